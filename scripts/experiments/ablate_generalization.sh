#!/usr/bin/env bash
# What generalizes: each option alone against the baseline at equal training time, then the
# ones given in ALL together. The baseline is configs/default.yaml with BASE's overrides: by
# default without split_digits (the default before this ablation put it in) and with copy
# attention off whatever a config says. Runs train one after another (2 threads each on a
# 2-core machine), then `nmt eval --bleu` greedy and with beam 5 on the test split: standard
# BLEU, the rare-word subset, numbers copied.
# Finished runs are kept and skipped; the table is printed last.
#   bash scripts/experiments/ablate_generalization.sh                        # 30 minutes a run
#   MINUTES=10 RUNS="baseline ema" bash scripts/experiments/ablate_generalization.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
MINUTES=${MINUTES:-30}
OUT=${OUT:-runs/generalization}
RUNS=${RUNS:-"baseline label_smoothing subword_sampling ema split_digits copy all"}
BASE=${BASE:-"--set data.split_digits=false --set model.copy_attention=false"}
ALL=${ALL:-"--set train.label_smoothing=0.1 --set data.subword_sampling=0.1 --set train.ema_decay=0.999 --set data.split_digits=true"}
NMT=${NMT:-.venv/bin/nmt}
mkdir -p "$OUT"

options() {  # a run's name -> its --set overrides
  case $1 in
    baseline) ;;
    label_smoothing) echo "--set train.label_smoothing=0.1" ;;
    subword_sampling) echo "--set data.subword_sampling=0.1" ;;
    ema) echo "--set train.ema_decay=0.999" ;;
    split_digits) echo "--set data.split_digits=true" ;;
    copy) echo "--set model.copy_attention=true" ;;
    copy_augment) echo "--set model.copy_attention=true --set data.copy_augment=0.5" ;;
    copy_augment_0.2) echo "--set model.copy_attention=true --set data.copy_augment=0.2" ;;
    copy_label_smoothing) echo "--set model.copy_attention=true --set train.label_smoothing=0.1" ;;
    all) echo "$ALL" ;;
    *) echo "unknown run $1" >&2; exit 2 ;;
  esac
}

for name in $RUNS; do
  dir="$OUT/$name"
  [ -f "$dir/eval.beam5.txt" ] && continue
  rm -rf "$dir"
  # shellcheck disable=SC2046  # the options are words on purpose
  "$NMT" train --out "$dir" --max-minutes "$MINUTES" --quiet $BASE $(options "$name") 2> "$OUT/$name.log"
  "$NMT" eval --bleu -c "$dir" > "$dir/eval.greedy.txt" 2>> "$OUT/$name.log"
  "$NMT" eval --bleu --beam 5 -c "$dir" > "$dir/eval.beam5.txt" 2>> "$OUT/$name.log"
done

.venv/bin/python - "$OUT" $RUNS <<'PY'
import json, re, sys
from pathlib import Path
out, names = Path(sys.argv[1]), sys.argv[2:]
def figures(path):
    text = path.read_text()
    bleu = float(re.search(r"^(?:greedy|beam \d+): BLEU ([\d.]+)", text, re.M).group(1))
    rare = re.search(r"rare-word subset .*: BLEU ([\d.]+) \| chrF ([\d.]+)", text)
    copied = re.search(r"numbers copied: (\d+) of (\d+)", text)
    return bleu, float(rare.group(1)), f"{copied.group(1)}/{copied.group(2)}" if copied else "-"
print("| run | steps | test BLEU greedy / beam 5 | rare-word BLEU greedy / beam 5 | numbers copied (beam 5) |")
print("|---|---|---|---|---|")
for name in names:
    run = out / name
    if not (run / "eval.beam5.txt").is_file():
        continue
    steps = max(json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines())
    g, b = figures(run / "eval.greedy.txt"), figures(run / "eval.beam5.txt")
    print(f"| {name} | {steps:,} | {g[0]:.2f} / {b[0]:.2f} | {g[1]:.2f} / {b[1]:.2f} | {b[2]} |")
PY
