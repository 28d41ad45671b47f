#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian machine, then runs every test:
# the Rust core's unit tests (no Python) and the pytest suites against the installed wheel.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --upgrade pip
python3 -m pip install --quiet ".[test]"

cargo test --quiet

python3 -m pytest -q -p no:cacheprovider "$@"
