#!/usr/bin/env bash
# Runs the cluster chaos scenarios (tests/cluster/chaos) with a seeded nemesis:
#
#   scripts/chaos.sh [--seed N] [--minutes M] [pytest args...]
#
# The seed (default: random, printed) and the minutes of faults per scenario
# (default 1) reach the scenarios as CHAOS_SEED and CHAOS_MINUTES. Repeat a failed run
# with the seed it printed. pytest runs under a hard timeout of M minutes per
# scenario plus margin (CHAOS_TIMEOUT seconds overrides it). Everything runs on
# 127.0.0.1: real ZooKeeper and broker processes behind the harness's proxies.
set -euo pipefail
cd "$(dirname "$0")/.."

seed=""
minutes=1
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seed) seed="$2"; shift 2 ;;
        --seed=*) seed="${1#*=}"; shift ;;
        --minutes) minutes="$2"; shift 2 ;;
        --minutes=*) minutes="${1#*=}"; shift ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done
if [ -z "$seed" ]; then
    seed=$(( (RANDOM << 15 | RANDOM) ))
fi
case "$seed" in ''|*[!0-9]*) echo "chaos.sh: --seed takes a non-negative integer" >&2; exit 2 ;; esac
case "$minutes" in ''|*[!0-9.]*) echo "chaos.sh: --minutes takes a number" >&2; exit 2 ;; esac

scenarios=$(find tests/cluster/chaos -name 'test_*.py' | wc -l)
budget=${CHAOS_TIMEOUT:-$(python3 -c "import math; print(math.ceil(($minutes * 60 + 180) * max(1, $scenarios)))")}
echo "chaos: seed=$seed minutes=$minutes scenarios=$scenarios timeout=${budget}s"

export CHAOS_SEED="$seed" CHAOS_MINUTES="$minutes"
set +e
timeout --kill-after=30 "$budget" python3 -m pytest -q -p no:cacheprovider -o timeout=0 tests/cluster/chaos ${args[@]+"${args[@]}"}
status=$?
set -e
case $status in
    5) echo "chaos: no scenarios yet (tests/cluster/chaos holds none)"; exit 0 ;;
    124|137) echo "chaos: timed out after ${budget}s (seed=$seed)" >&2 ;;
    0) ;;
    *) echo "chaos: failed (seed=$seed); repeat with: scripts/chaos.sh --seed $seed --minutes $minutes" >&2 ;;
esac
exit $status
