#!/usr/bin/env bash
# Run one test (a pytest node id) N times, optionally with busy cores beside it, and count the
# failures; the output of each failing run is kept. For hunting flaky tests before CI does:
#
#   bash scripts/tools/repeat_test.sh 50 "tests/training/test_distributed.py::test_sigterm_stops_all_processes_together_and_the_run_resumes"
#   LOAD=1 bash scripts/tools/repeat_test.sh 20 tests/serving/test_serve.py    # one core kept busy meanwhile
#
# Failing runs' output goes to $KEEP (default /tmp/repeat-test-failures); nothing else is written.
set -uo pipefail
cd "$(dirname "$0")/../.."
runs=${1:?usage: repeat_test.sh N NODE_ID [pytest args...]}; shift
node=${1:?usage: repeat_test.sh N NODE_ID [pytest args...]}; shift
keep=${KEEP:-/tmp/repeat-test-failures}
load=${LOAD:-0}
mkdir -p "$keep"
busy=()
for _ in $(seq 1 "$load"); do
    python3 -c "while True: pass" & busy+=($!)
done
trap '[ ${#busy[@]} -gt 0 ] && kill "${busy[@]}" 2>/dev/null' EXIT
failed=0
start=$(date +%s)
for i in $(seq 1 "$runs"); do
    out=$(mktemp)
    if .venv/bin/python -m pytest -q -p no:cacheprovider -x "$node" "$@" >"$out" 2>&1; then
        rm -f "$out"
        echo "run $i/$runs: passed"
    else
        failed=$((failed + 1))
        mv "$out" "$keep/run-$i.log"
        echo "run $i/$runs: FAILED (output in $keep/run-$i.log)"
    fi
done
echo "$node: $((runs - failed)) of $runs passed, $failed failed, load $load busy core(s), $(( $(date +%s) - start )) s"
[ "$failed" -eq 0 ]
