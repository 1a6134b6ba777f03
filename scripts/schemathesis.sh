#!/usr/bin/env bash
# Installs the pinned schemathesis (test/schemathesis/requirements.txt) into a
# virtualenv cached outside the checkout, keyed by that file's hash, and prints
# the path of its `schemathesis` command. Nothing is fetched when the venv for
# these pins is already complete, so .ci/run and the contract test can both
# call it. Needs python3 with the venv module (Debian: python3-venv).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
req="$repo/test/schemathesis/requirements.txt"
key="$(sha256sum "$req" | cut -c1-12)"
cache="${FLINT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flint}"
venv="$cache/schemathesis-$key"
if [ ! -f "$venv/.complete" ]; then
  # A venv left half-made by an interrupted install is made again from scratch.
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/schemathesis"
