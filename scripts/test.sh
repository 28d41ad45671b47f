#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian machine, then runs the linters (ruff,
# import-linter, mypy, clippy) and every test: the Rust core's unit tests (no Python), then
# the pytest suites against the installed wheel, driving a real broker process with real
# clients (kcat, confluent-kafka, kafka-python, aiokafka) and a real ZooKeeper.
set -euo pipefail
cd "$(dirname "$0")/.."

# kcat for the client tests; a JVM for the Spark suite (tests/spark runs a local
# SparkSession); Debian's ZooKeeper server for the cluster tests (tests/cluster) and
# `logstore dev-cluster`; a Prometheus server scraping the broker's metrics
# (tests/integration/test_metrics_prometheus.py).
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v chromium >/dev/null 2>&1 || missing+=(chromium chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python3 -m pip install --quiet --upgrade pip
# Build the one wheel, check it carries all three packages, install it with test deps.
rm -rf dist && python3 -m pip wheel --quiet --no-deps -w dist .
wheel=$(ls dist/logstore-*.whl)
listing=$(python3 -m zipfile -l "$wheel")
for member in logstore/__init__.py logstore/spark/source.py logstore/_native logstore/protocol/frame.py logstore/console/templates/base.html logstore/console/static/console.js broker_py/__init__.py broker_py/server/kafka_server.py; do
    grep -q "$member" <<<"$listing" || { echo "wheel lacks $member" >&2; exit 1; }
done
# The wheel replaces any installed logstore (its dependencies stay as they are), then its
# test extras are installed from the same wheel, so the Rust core is built once.
python3 -m pip install --quiet --force-reinstall --no-deps "$wheel"
python3 -m pip install --quiet "${wheel}[test]"

# Linters before the tests: ruff (errors and format), import-linter (the broker's layers,
# drawn in docs/design/layout.md; PYTHONPATH=. so it reads this tree), mypy (strict on the pure
# cores listed in pyproject.toml), clippy on the core alone and with the PyO3 bindings.
ruff check .
ruff format --check .
PYTHONPATH=. lint-imports
mypy
cargo clippy --quiet --all-targets -- -D warnings
cargo clippy --quiet --all-targets --features python -- -D warnings

cargo test --quiet

if [ $# -gt 0 ]; then
    python3 -m pytest -q -p no:cacheprovider "$@"
    exit
fi
# The in-process suites (no ports, no processes: tests/broker, tests/storage) on both
# cores; then the suites that start their own brokers, ZooKeeper and clients on free ports
# and in their own directories, two test files at a time (a file's module-scoped broker
# stays on one worker); then the cluster suite, two files at a time too (its fault
# injection, SIGSTOP, proxies cutting links and ZooKeeper outages, waits on sessions of
# seconds, which a second worker does not threaten, and its outages mostly wait); then, one
# test at a time, the hardening suite, which checks that a hostile client delays no other by
# a second.
python3 -m pytest -q -p no:cacheprovider -n 2 tests/broker tests/storage
python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=10 \
    --ignore=tests/broker --ignore=tests/storage --ignore=tests/cluster \
    --ignore=tests/integration/hardening
python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=10 tests/cluster
python3 -m pytest -q -p no:cacheprovider --durations=10 tests/integration/hardening
