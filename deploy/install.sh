#!/bin/sh
# Installs Fetcher from a source tree into a new virtualenv: the install step of the image
# (deploy/Dockerfile runs exactly this), also run by tests/deploy/test_image.py in a clean
# folder to prove it gives a working `fetcher`.
#
#   deploy/install.sh SOURCE PREFIX      e.g. deploy/install.sh /src /opt/fetcher
#
# PYTHON chooses the interpreter (default python3); pip's own settings (PIP_NO_CACHE_DIR,
# PIP_INDEX_URL, ...) come from the environment.
set -eu
source_tree="${1:?usage: install.sh SOURCE PREFIX}"
prefix="${2:?usage: install.sh SOURCE PREFIX}"
"${PYTHON:-python3}" -m venv "$prefix"
"$prefix/bin/python" -m pip install --disable-pip-version-check "$source_tree"
"$prefix/bin/fetcher" --version
