#!/usr/bin/env bash
# Runs the cluster chaos scenarios (tests/cluster/chaos) with a seeded nemesis:
#
#   scripts/chaos.sh [--seed N] [--minutes M] [pytest args...]
#
# The seed (default: $CHAOS_SEED, else random, printed) and the minutes of faults per
# scenario (default: $CHAOS_MINUTES, else 1) reach the scenarios as CHAOS_SEED and
# CHAOS_MINUTES; without CHAOS_SEED the scenarios skip, so the quick suite never runs
# them. Repeat a failed run with the seed it printed. pytest runs under a hard timeout
# of M minutes plus 5 per scenario (CHAOS_TIMEOUT seconds overrides it); each scenario
# also has its own pytest-timeout. Everything runs on 127.0.0.1: real ZooKeeper and
# broker processes behind the harness's proxies. Each run keeps its processes' logs,
# data and histories under a fresh dir (printed; CHAOS_DIR chooses it) with
# results.jsonl, one line per scenario, printed as a table at the end. Select
# scenarios with pytest args: -k matrix, -k nemesis, -k 'hard_bounce and leader'.
# CHAOS_CLIENT_DEBUG=eos,msg,protocol logs the confluent-kafka producer's librdkafka
# debug output to confluent-producer.log next to the brokers' logs.
set -euo pipefail
cd "$(dirname "$0")/.."

seed="${CHAOS_SEED:-}"
minutes="${CHAOS_MINUTES:-1}"
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seed) seed="$2"; shift 2 ;;
        --seed=*) seed="${1#*=}"; shift ;;
        --minutes) minutes="$2"; shift 2 ;;
        --minutes=*) minutes="${1#*=}"; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done
if [ -z "$seed" ]; then
    seed=$(( (RANDOM << 15 | RANDOM) ))
fi
case "$seed" in ''|*[!0-9]*) echo "chaos.sh: --seed takes a non-negative integer" >&2; exit 2 ;; esac
case "$minutes" in ''|*[!0-9.]*) echo "chaos.sh: --minutes takes a number" >&2; exit 2 ;; esac

export CHAOS_SEED="$seed" CHAOS_MINUTES="$minutes"
# Scenarios: the test cases collected (the matrix alone is 8), after any -k in args.
scenarios=$(python3 -m pytest -q -p no:cacheprovider --collect-only tests/cluster/chaos ${args[@]+"${args[@]}"} 2>/dev/null | grep -c '::' || true)
budget=${CHAOS_TIMEOUT:-$(python3 -c "import math; print(math.ceil(($minutes * 60 + 300) * max(1, $scenarios)))")}
run_dir=${CHAOS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/chaos-$seed-XXXXXX")}
mkdir -p "$run_dir"
export CHAOS_RESULTS="$run_dir/results.jsonl"
basetemp=()
case " ${args[*]-} " in *" --basetemp"*) ;; *) basetemp=(--basetemp "$run_dir/tmp") ;; esac
echo "chaos: seed=$seed minutes=$minutes scenarios=$scenarios timeout=${budget}s dir=$run_dir"

set +e
timeout --kill-after=30 "$budget" python3 -m pytest -q -p no:cacheprovider -o timeout=0 --show-capture=stdout \
    ${basetemp[@]+"${basetemp[@]}"} tests/cluster/chaos ${args[@]+"${args[@]}"}
status=$?
set -e
if [ -s "$CHAOS_RESULTS" ]; then
    python3 - "$CHAOS_RESULTS" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print("| scenario | acked | lost | unseen | duplicated | longest ack gap | ack stall | replicas identical | workload | total | result |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    stall = f"{r.get('ack_stall', 0):.1f} s" + (f" ({r['ack_stall_producer']})" if r.get("ack_stall_producer") else "")
    print(f"| {r['scenario']} | {r['acked']} | {r['lost']} | {r['unseen']} | {r['duplicates']} | {r['longest_ack_gap']:.1f} s | {stall} "
          f"| {'yes' if r['replicas_identical'] else 'NO'} | {r['workload_seconds']:.0f} s | {r['total_seconds']:.0f} s "
          f"| {'ok' if r['ok'] else 'FAILED'} |")
PY
fi
echo "chaos: logs and data in $run_dir"
case $status in
    5) echo "chaos: no scenarios selected" ;;
    124|137) echo "chaos: timed out after ${budget}s (seed=$seed)" >&2 ;;
    0) ;;
    *) echo "chaos: failed (seed=$seed); repeat with: scripts/chaos.sh --seed $seed --minutes $minutes" >&2 ;;
esac
[ "$status" -eq 5 ] && exit 0
exit $status
