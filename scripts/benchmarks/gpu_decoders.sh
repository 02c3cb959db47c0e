#!/usr/bin/env bash
# configs/gpu.yaml with each decoder for the same wall minutes on one GPU: epoch time, the GPU's
# busy share (nvidia-smi's utilization.gpu, the share of each sample period with a kernel running,
# sampled every 0.5 s over the whole run), validation BLEU as the minutes pass, and the two best
# checkpoints decoded on the test split with a paired bootstrap between them.
#   bash scripts/benchmarks/gpu_decoders.sh                 # writes $OUT_DIR (runs/gpu-decoders)
#   MINUTES=2.5 EVAL_EVERY=600 bash scripts/benchmarks/gpu_decoders.sh
#   DEVICE=cpu MINUTES=0.2 bash scripts/benchmarks/gpu_decoders.sh   # the script itself, without a GPU
#   CONFIG=configs/default.yaml EXTRA="--set train.precision=fp32" DATA=data/fra-eng.zip bash ...  # subword pieces
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
OUT_DIR=${OUT_DIR:-runs/gpu-decoders}
MINUTES=${MINUTES:-2.5}
EVAL_EVERY=${EVAL_EVERY:-600}
DEVICE=${DEVICE:-cuda}
CONFIG=${CONFIG:-configs/gpu.yaml}
EXTRA=${EXTRA:-}                 # more --set options, for both arms
DATA=${DATA:+--data $DATA}
EVAL_TIMEOUT=${EVAL_TIMEOUT:-240}
mkdir -p "$OUT_DIR"
start=$SECONDS
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) | $(nproc) cores | torch $($PY -c 'import torch; print(torch.__version__)')"

declare -A ARMS=(
    [stepwise]="--set model.decoder=stepwise --set model.input_feeding=true"
    [parallel]="--set model.decoder=parallel --set model.input_feeding=false"
)
for arm in stepwise parallel; do
    dir="$OUT_DIR/$arm"
    rm -rf "$dir"
    sampler=""
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 500 > "$OUT_DIR/$arm-busy.txt" &
        sampler=$!
    fi
    # shellcheck disable=SC2086
    timeout $(( ${MINUTES%.*} * 60 + 150 )) $PY -m nmt train "$CONFIG" --device "$DEVICE" --max-minutes "$MINUTES" \
        --out "$dir" -q ${ARMS[$arm]} --set train.eval_every="$EVAL_EVERY" $DATA $EXTRA
    status=$?
    [ -n "$sampler" ] && kill "$sampler" 2> /dev/null
    busy=$(awk '{ s += $1; n += 1 } END { if (n) printf "%.0f%% over %d samples", s / n, n; else print "not sampled" }' \
        "$OUT_DIR/$arm-busy.txt" 2> /dev/null || echo "not sampled")
    echo "== $arm: exit $status | GPU busy $busy | $(grep -o 'epoch 1: .*' "$dir/train.log" | head -1)"
    [ -f "$dir/metrics.jsonl" ] && $PY - "$dir/metrics.jsonl" << 'EOF'
import json, sys
for line in open(sys.argv[1]):
    record = json.loads(line)
    if "val_bleu" in record:
        print(f"   step {record['step']:>6} epoch {record['epoch']} {record['elapsed_s']:>6.1f} s: "
              f"val loss {record['val_loss']:.3f} BLEU {record['val_bleu']:.2f}")
EOF
done
echo "== test split, beam 5, stepwise against parallel (paired bootstrap)"
timeout "$EVAL_TIMEOUT" $PY -m nmt eval --bleu --device "$DEVICE" -c "$OUT_DIR/stepwise" -c "$OUT_DIR/parallel" 2>&1 | tail -12
echo "total $((SECONDS - start)) s"
