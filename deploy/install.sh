#!/bin/sh
# Installs Fetcher from a source tree into a new virtualenv: the install step of the image
# (deploy/Dockerfile runs exactly this), also run by tests/deploy/test_image.py in a clean
# folder to prove it gives a working `fetcher`.
#
#   deploy/install.sh SOURCE PREFIX      e.g. deploy/install.sh /src /opt/fetcher
#
# FETCHER_EXTRAS adds optional extras of pyproject.toml, comma-separated (e.g. `otlp-grpc`, the
# OTLP gRPC trace exporter). PYTHON chooses the interpreter (default python3); pip's own
# settings (PIP_NO_CACHE_DIR, PIP_INDEX_URL, ...) come from the environment.
set -eu
source_tree="${1:?usage: install.sh SOURCE PREFIX}"
prefix="${2:?usage: install.sh SOURCE PREFIX}"
requirement="$source_tree"
if [ -n "${FETCHER_EXTRAS:-}" ]; then
  requirement="$source_tree[$FETCHER_EXTRAS]"
fi
"${PYTHON:-python3}" -m venv "$prefix"
python="$prefix/bin/python"
"$python" -m pip install --disable-pip-version-check "$requirement"

# The runtime keeps only what runs (the image's /opt/fetcher stays under 200 MB, measured by
# tests/e2e/test_image_run.py, which runs every role of the image):
# - Litestar declares, for features Fetcher does not use, its example generator (polyfactory
#   and faker, 26 MB: the OpenAPI document asks for no generated examples, a unit test pins
#   it) and its own command line's terminal rendering (rich, rich-click, pygments,
#   markdown-it-py, mdurl: 14 MB; httpx, which would use them for its command line, does
#   without). Nothing of Fetcher imports them.
# - botocore carries the API models of ~430 AWS services (27 MB): Fetcher's S3 client reads
#   S3's, and the credential chain STS's (web identity, assumed roles) and SSO's.
# - The installer itself (pip, setuptools), last.
"$python" -m pip uninstall --disable-pip-version-check -y -q \
  polyfactory faker rich rich-click pygments markdown-it-py mdurl
botocore_data="$("$python" -c 'import botocore, os; print(os.path.join(os.path.dirname(botocore.__file__), "data"))')"
find "$botocore_data" -mindepth 1 -maxdepth 1 -type d \
  ! -name s3 ! -name sts ! -name sso ! -name sso-oidc -exec rm -rf {} +
"$python" -m pip uninstall --disable-pip-version-check -y -q pip setuptools
"$prefix/bin/fetcher" --version
