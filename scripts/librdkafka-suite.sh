#!/usr/bin/env bash
# Runs librdkafka's own test suite (its tests/ directory) against a fresh logstore
# broker, one test at a time with a time limit, and prints one line per test: PASSED,
# SKIPPED (with the runner's reason) or FAILED (with its log).
#
#   scripts/librdkafka-suite.sh LIBRDKAFKA_SOURCE_DIR [TEST_NAME ...]
#
# LIBRDKAFKA_SOURCE_DIR is a librdkafka checkout (e.g. from github.com/confluentinc/
# librdkafka); it is configured and built here if tests/test-runner is missing
# (needs gcc, make, zlib1g-dev, libzstd-dev). Without test names, every test of the
# 0001-0153 series runs except those needing what this broker does not offer or
# what is not here: SASL/SSL/OAuth, ACLs, share groups, mock clusters, local-only
# tests, a Kafka installation (KAFKA_PATH), and three brokers (0103_transactions
# creates its topics with replication factor 3; with that changed to 1 in its
# source, it passes: name it to run it).
# RDK_MODE=-Q (the default) is librdkafka's quick mode; RDK_MODE= runs them in full.
# The broker uses num.partitions=4, as librdkafka's trivup clusters do; LOGSTORE_OVERRIDES
# adds broker keys ("key=value key=value"), e.g. an authorizer for 0081's ACL sub-tests:
#   LOGSTORE_OVERRIDES="authorizer.class.name=kafka.security.authorizer.AclAuthorizer
#   allow.everyone.if.no.acl.found=true"
# RDK_GROUP_PROTOCOL=consumer runs the consumers on KIP-848's consumer protocol: it sets
# TEST_CONSUMER_GROUP_PROTOCOL=consumer (test.c then gives every consumer
# group.protocol=consumer and skips the keys that protocol forbids: session.timeout.ms,
# heartbeat.interval.ms, partition.assignment.strategy, group.protocol.type) and
# TEST_KAFKA_VERSION=RDK_KAFKA_VERSION (default 4.1.0, whose ConsumerGroupHeartbeat
# range this broker serves). The tests' consumer-protocol paths follow the protocol
# setting; the version picks their Kafka 4 paths (0081 checks GROUP configs and Kafka 4's
# group ACL operations, 0052 and 0092 skip the message formats Kafka 4 removed). Unset,
# or classic, is the classic run with TEST_KAFKA_VERSION=3.9.0, as before.
# RDK_SHARE=1 runs the share-consumer tests (KIP-932, librdkafka 2.15's 0170-0185 series,
# gated on broker version 4.2.0): the broker gets group.share.enable=true, the runner
# TEST_KAFKA_VERSION=RDK_KAFKA_VERSION (default 4.2.0), and without test names the list is
# the series' broker tests (not _local, _mock, the local 0186 or the manual 0190). Their
# sub-tests are all full-mode ones (quick mode runs none and still says PASSED), so this
# mode runs in full unless RDK_MODE says otherwise.
set -euo pipefail
src=$(cd "${1:?usage: $0 LIBRDKAFKA_SOURCE_DIR [TEST ...]}" && pwd)
shift
mode=${RDK_MODE--Q}
case ${RDK_GROUP_PROTOCOL:-classic} in
classic) kafka_version=3.9.0 ;;
consumer) kafka_version=${RDK_KAFKA_VERSION:-4.1.0} && export TEST_CONSUMER_GROUP_PROTOCOL=consumer ;;
*) echo "RDK_GROUP_PROTOCOL must be classic or consumer" >&2 && exit 2 ;;
esac
share=${RDK_SHARE:-0}
if [ "$share" = 1 ]; then
    kafka_version=${RDK_KAFKA_VERSION:-4.2.0} mode=${RDK_MODE-}
    # librdkafka's own share test clusters (tests/cluster_testing.py, run-all-tests.sh)
    # lower the group lock-duration floor so that tests may set 1-3 s locks.
    LOGSTORE_OVERRIDES="group.share.enable=true group.share.min.record.lock.duration.ms=1000 ${LOGSTORE_OVERRIDES:-}"
fi
work=$(mktemp -d /tmp/librdkafka-suite.XXXXXX)

if [ ! -x "$src/tests/test-runner" ]; then
    (cd "$src" && ./configure --disable-ssl --disable-gssapi --disable-curl >"$work/configure.log" 2>&1 &&
        make -j"$(nproc)" libs >"$work/make.log" 2>&1 && make -C tests -j"$(nproc)" build >>"$work/make.log" 2>&1)
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
logstore-broker --override "listeners=PLAINTEXT://127.0.0.1:$port" --override "log.dirs=$work/data" \
    --override num.partitions=4 $(for kv in ${LOGSTORE_OVERRIDES:-}; do printf -- '--override %s ' "$kv"; done) \
    >"$work/broker.log" 2>&1 &
broker=$!
trap 'kill "$broker" 2>/dev/null; wait "$broker" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    grep -q listening "$work/broker.log" && break
    sleep 0.1
done
echo "metadata.broker.list=127.0.0.1:$port" >"$work/test.conf"

if [ $# -eq 0 ] && [ "$share" = 1 ]; then
    set -- $(grep -oE '_TEST\(01[5-8][0-9]_share_[a-z0-9_]+' "$src/tests/test.c" |
        sed 's/_TEST(//' | sort -u | grep -vE '_local$|_mock$|^0186_')
elif [ $# -eq 0 ]; then
    set -- $(grep -oE '_TEST\(0[0-9]{3}_[a-z0-9_]+' "$src/tests/test.c" | sed 's/_TEST(//' | sort -u |
        grep -vE '_local|_mock|_ut$|ssl|sasl|oauth|auth|share|^0000_|^0004_|^0006_|^0009_|^0038_|^0052_|^0064_|^0066_|^0077_|^0078_|^0079_|^0098_|^0103_|^0109_' |
        awk -F_ '$1 < "0155"')
fi

cd "$src/tests"
export LD_LIBRARY_PATH="$src/src:$src/src-cpp" TEST_KAFKA_VERSION=$kafka_version RDKAFKA_TEST_CONF="$work/test.conf"
# A test that ran nothing still exits 0: its own row in the runner's summary table says
# SKIPPED (local-only tests under -L, other scenarios, missing RapidJSON, version gates).
passed=0 skipped=0 failed=0
for t in "$@"; do
    start=$(date +%s)
    if TESTS=$t timeout 300 ./test-runner $mode -L -p1 >"$work/$t.log" 2>&1; then
        plain=$(sed 's/\x1b\[[0-9;]*m//g' "$work/$t.log")
        if grep -qE "^\| $t +\| +SKIPPED" <<<"$plain"; then
            why=$(grep -m1 -E "^\[$t[ /].*SKIPPING TEST: " <<<"$plain" |
                sed 's/.*SKIPPING TEST: //; s/\[.*//' || true)
            skipped=$((skipped + 1)) result="SKIPPED${why:+ ($why)}"
        else
            passed=$((passed + 1)) result=PASSED
        fi
    else
        failed=$((failed + 1)) result="FAILED (log: $work/$t.log)"
    fi
    echo "$t $result $(($(date +%s) - start))s"
done
echo "$passed passed, $skipped skipped, $failed failed; broker log: $work/broker.log"
[ "$failed" -eq 0 ]
