#!/usr/bin/env bash
# Runs Quix Streams' schema-registry serializer tests
# (tests/test_quixstreams/test_models/test_serializers/test_schema_registry.py: Avro, JSON
# Schema and Protobuf serializers and deserializers through confluent-kafka's
# SchemaRegistryClient, auto-registration on and off, subject name strategies, errors)
# against the schema registry of a fresh logstore broker, in place of the Confluent
# Schema Registry container their conftest starts, and prints pytest's summary.
#
#   scripts/quix-schema-registry-suite.sh QUIX_SOURCE [PYTEST_ARGS ...]
#
# QUIX_SOURCE is a quix-streams checkout or a bare git directory of
# github.com/quixio/quix-streams. PyPI publishes quixstreams as wheels only (no sdist),
# and the wheels hold no tests/, so the tests come from the repository: QUIX_VERSION
# (default 3.25.0) is the tag whose tests/ is taken and the quixstreams version installed.
# The install goes into a venv of its own (QUIX_VENV, default /tmp/quix-sr-venv, reused
# when present): quixstreams pins confluent-kafka < 2.13, which must not replace the
# system's confluent-kafka. The tests' conftest imports testcontainers (installed, never
# used: no container starts); a conftest.py written beside the tests points their
# `schema_registry_container` fixture at the broker's registry.
set -euo pipefail
src=${1:?usage: $0 QUIX_SOURCE [PYTEST_ARGS ...]}
shift
version=${QUIX_VERSION:-3.25.0}
venv=${QUIX_VENV:-/tmp/quix-sr-venv}
work=$(mktemp -d /tmp/quix-sr-suite.XXXXXX)

# the tests of tag v$version, from a checkout or a bare repository
if git --git-dir="$src" rev-parse -q --verify "v$version^{commit}" >/dev/null 2>&1; then
    git --git-dir="$src" archive "v$version" tests | tar -x -C "$work"
elif git -C "$src" rev-parse -q --verify "v$version^{commit}" >/dev/null 2>&1; then
    git -C "$src" archive "v$version" tests | tar -x -C "$work"
else
    echo "$src has no tag v$version (set QUIX_VERSION to one it has)" >&2
    exit 2
fi
cat >"$work/tests/test_quixstreams/test_models/test_serializers/conftest.py" <<'EOF'
import os

import pytest

from tests.conftest import SchemaRegistryContainer


@pytest.fixture(scope="session")
def schema_registry_container():
    return SchemaRegistryContainer(
        schema_registry_address=os.environ["QUIX_SCHEMA_REGISTRY_URL"]
    )
EOF

if [ ! -x "$venv/bin/pytest" ] || ! "$venv/bin/python" -c "
import importlib.metadata as m, sys
sys.exit(m.version('quixstreams') != '$version')" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "quixstreams[avro,protobuf]==$version" pytest \
        "testcontainers==4.13.2" "fastavro>=1.8,<2.0" "protobuf>=5.27.2,<7.0"
fi

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port)
sr_port=$(free_port)
logstore-broker --override "listeners=PLAINTEXT://127.0.0.1:$port" --override "log.dirs=$work/data" \
    --override "schema.registry.listeners=http://127.0.0.1:$sr_port" >"$work/broker.log" 2>&1 &
broker=$!
trap 'kill "$broker" 2>/dev/null; wait "$broker" 2>/dev/null || true' EXIT
url="http://127.0.0.1:$sr_port"
# ready once the registry has read _schemas and takes writes (bounded: 60 s)
for _ in $(seq 300); do
    if curl -sf -X PUT -H 'Content-Type: application/json' -d '{"compatibility": "BACKWARD"}' \
        "$url/config" >/dev/null 2>&1; then
        break
    fi
    sleep 0.2
done
curl -sf "$url/subjects" >/dev/null || { echo "the registry at $url does not answer" >&2 && exit 1; }

echo "quixstreams $version tests against logstore's schema registry at $url (broker log: $work/broker.log)"
cd "$work"
QUIX_SCHEMA_REGISTRY_URL=$url "$venv/bin/python" -m pytest -p no:cacheprovider -q -rfE \
    tests/test_quixstreams/test_models/test_serializers/test_schema_registry.py "$@"
