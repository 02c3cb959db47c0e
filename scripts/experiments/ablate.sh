#!/usr/bin/env bash
# Model and training options, each measured against seed 002's design at equal steps: the
# default config with SEED's overrides (its model options and lr decay off), each run turning
# one back on. Two runs at a time, one thread each (a 2-core machine); every run validates once.
#   STEPS=1000 bash scripts/experiments/ablate.sh      # prints a table; finished runs are kept and skipped
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-1000}
OUT=${OUT:-runs/ablate}
SEED=(--set model.bidirectional=false --set model.input_feeding=false --set model.tie_embeddings=false
      --set train.lr_schedule=constant)
mkdir -p "$OUT"
run() {  # name, then --set overrides
  local name=$1; shift
  [ -f "$OUT/$name/metrics.jsonl" ] && return
  rm -rf "${OUT:?}/$name"
  .venv/bin/nmt train configs/default.yaml --out "$OUT/$name" --quiet \
    --set train.max_steps="$STEPS" --set train.threads=1 --set train.eval_every=0 --set train.save_every=0 "${SEED[@]}" "$@" \
    2> "$OUT/$name.log"
}
run baseline & run bidirectional --set model.bidirectional=true & wait
run bridge --set model.bidirectional=true --set model.bridge=true & run input_feeding --set model.input_feeding=true & wait
run tied --set model.tie_embeddings=true & run linear_lr --set train.lr_schedule=linear & wait
run label_smoothing --set train.label_smoothing=0.1 &
run all --set model.bidirectional=true --set model.input_feeding=true --set model.tie_embeddings=true \
  --set train.lr_schedule=linear & wait
.venv/bin/python - "$OUT" <<'PY'
import json, re, sys
from pathlib import Path
print(f"{'run':16} {'val loss':>8} {'val BLEU':>8} {'tok/s':>7} {'minutes':>7}   (1 thread, 2 runs at a time)")
for log in sorted(Path(sys.argv[1]).glob("*/metrics.jsonl"), key=lambda p: p.stat().st_mtime):
    last = json.loads(log.read_text().splitlines()[-1])
    speeds = [float(s.replace(",", "")) for s in re.findall(r"([\d,]+) tok/s", (log.parent / "train.log").read_text())]
    print(f"{log.parent.name:16} {last['val_loss']:8.3f} {last['val_bleu']:8.2f} "
          f"{sum(speeds[1:]) / max(len(speeds) - 1, 1):7,.0f} {last['elapsed_s'] / 60:7.1f}")
PY
