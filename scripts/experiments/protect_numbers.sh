#!/usr/bin/env bash
# Protected numbers (data.protect) against none: two runs of configs/default.yaml for MINUTES,
# trained side by side with THREADS threads each (on a 2-core machine both get one core: the
# same conditions for both), then scored with beam 5 on the test split (paired bootstrap, the
# rare-word subset, numbers copied and invented) and on the number probe
# (scripts/tools/number_probe.py: the valid/test sources with numbers and random-number variants).
# Finished runs are kept and skipped.
#   bash scripts/experiments/protect_numbers.sh                   # 30 minutes, about 45 in all
#   MINUTES=5 OUT=/tmp/protect bash scripts/experiments/protect_numbers.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
MINUTES=${MINUTES:-30}
THREADS=${THREADS:-1}
OUT=${OUT:-runs/numbers}
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"

for protect in false true; do
  dir="$OUT/protect-$protect"
  [ -f "$dir/best.pt" ] && continue
  rm -rf "$dir"
  $PY -m nmt train configs/default.yaml --set data.protect=$protect --set train.threads="$THREADS" \
    --max-minutes "$MINUTES" --out "$dir" --quiet > "$OUT/protect-$protect.log" 2>&1 &
done
wait

$PY scripts/tools/number_probe.py --out "$OUT/number-probe.tsv"
runs=(-c "$OUT/protect-false" -c "$OUT/protect-true")
echo "== test split (beam 5)"
$PY -m nmt eval --bleu "${runs[@]}" | tee "$OUT/eval.test.txt"
echo "== number probe (beam 5)"
$PY -m nmt eval --bleu "${runs[@]}" --test "$OUT/number-probe.tsv" | tee "$OUT/eval.probe.txt"
for protect in false true; do echo "protect=$protect: $(grep -h "done:" "$OUT/protect-$protect/train.log")"; done
