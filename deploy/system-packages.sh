#!/usr/bin/env bash
# Installs the Debian packages the test suite needs and a fresh machine may lack: the FreeTDS
# ODBC driver (SQL Server client side, used by the statement and wire tests) and headless
# Chromium (renders the OpenAPI page offline in tests/e2e/test_openapi_ui.py). Idempotent; does
# nothing when they are present. Needs root (CI and the development machines run as root).
set -euo pipefail
packages=(tdsodbc unixodbc-dev chromium)
missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) -ne 0 ]]; then
    echo "system-packages.sh: missing ${missing[*]}; install them as root (apt-get install ${missing[*]})" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
echo "system-packages.sh: installing ${missing[*]}" >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
