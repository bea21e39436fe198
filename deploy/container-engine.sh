#!/usr/bin/env bash
# Vendored from the project's shared tools (shared/tools/container-engine.sh) so that CI, on a
# fresh clone, can run it: .ci/run calls it before the suite, tests/e2e/test_image_run.py when
# the local base image is missing.
# Makes this machine able to build and run the project's image with podman, without a registry:
#   1. installs podman, runc and mmdebstrap from Debian's packages (once);
#   2. configures podman for this sandbox: runc as the runtime (crun refuses the hybrid cgroup
#      layout here), no default ulimits (setting them is refused), vfs storage;
#   3. builds a local base image, localhost/debian-python:3.11-bookworm (Debian bookworm, its
#      python3 3.11, venv, CA certificates including the ones this machine trusts, so pip and
#      apt work inside a build), since no container registry can be reached from here.
# Then:  podman build --network host --build-arg PYTHON_IMAGE=localhost/debian-python:3.11-bookworm \
#          -f deploy/Dockerfile -t fetcher:local .
#        podman run --rm --network host fetcher:local --version
# Idempotent: a second run only checks. Prints the base image's name last.
set -euo pipefail
BASE=localhost/debian-python:3.11-bookworm
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v mmdebstrap >/dev/null; then
  echo "installing podman, runc, mmdebstrap ..." >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap uidmap >/dev/null
fi
mkdir -p /etc/containers
if ! grep -q 'fetcher-sandbox' /etc/containers/containers.conf 2>/dev/null; then
  cat > /etc/containers/containers.conf <<'CONF'
# fetcher-sandbox: settings this sandbox needs (see deploy/container-engine.sh)
[containers]
default_ulimits = []
[engine]
runtime = "runc"
CONF
fi
if ! grep -q 'fetcher-sandbox' /etc/containers/storage.conf 2>/dev/null; then
  cat > /etc/containers/storage.conf <<'CONF'
# fetcher-sandbox: overlay mounts are not available here
[storage]
driver = "vfs"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
CONF
fi
if ! podman image exists "$BASE"; then
  echo "building $BASE with mmdebstrap (about a minute) ..." >&2
  tar_file="$(mktemp -d)/base.tar"
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
    --customize-hook='if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/"; fi; chroot "$1" update-ca-certificates >/dev/null 2>&1' \
    bookworm "$tar_file"
  podman import --quiet "$tar_file" "$BASE" >/dev/null
  rm -rf "$(dirname "$tar_file")"
fi
podman run --rm --network host "$BASE" python3 -c 'import ssl, venv' >/dev/null
echo "$BASE"
