#!/usr/bin/env bash
# The GPU figures in one command, on a machine with CUDA and nmt's dependencies (pytest-xdist too):
# the test suite, one epoch of configs/default.yaml's model per batch setting (time and BLEU),
# the benchmark's GPU section, and a one-process NCCL run under torchrun.
#   bash scripts/benchmarks/gpu_check.sh                   # writes runs/gpu-check/*
#   RUNS="4000:0.005 0:0.002" bash scripts/benchmarks/gpu_check.sh   # batch_tokens:lr pairs (0 = 64 sentences)
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
OUT_DIR=${OUT_DIR:-runs/gpu-check}
RUNS=${RUNS:-"0:0.002 2000:0.0035 4000:0.005"}
mkdir -p "$OUT_DIR"
start=$SECONDS
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) | $(nproc) cores | torch $($PY -c 'import torch; print(torch.__version__)')"

echo "== test suite"
timeout ${SUITE_TIMEOUT:-240} $PY -m pytest -q -n ${JOBS:-8} -p no:cacheprovider tests/ > "$OUT_DIR/suite.log" 2>&1
echo "exit $?"; tail -4 "$OUT_DIR/suite.log"

echo "== one epoch of the default model on the GPU"
for run in $RUNS; do
    tokens=${run%%:*} lr=${run##*:} dir="$OUT_DIR/epoch1-bt$tokens"
    rm -rf "$dir"
    timeout ${EPOCH_TIMEOUT:-200} $PY -m nmt train configs/default.yaml --device cuda --max-minutes 0 --out "$dir" -q \
        --set train.epochs=1 --set train.batch_tokens="$tokens" --set train.lr="$lr" \
        --set train.warmup_steps=$([ "$tokens" = 0 ] && echo 0 || echo 100) --set train.eval_every=0 --set train.precision=${PRECISION:-fp32}
    echo "batch_tokens=$tokens lr=$lr: $(grep -o 'epoch 1: .*' "$dir/train.log") | $(grep -o 'validation at step.*' "$dir/train.log" | tail -1)"
done

echo "== benchmark, GPU section"
timeout ${BENCH_TIMEOUT:-150} $PY scripts/benchmarks/bench.py --device cuda --config configs/gpu.yaml --model config --decode-sentences 300 \
    --warmup 20 --windows 3 --window-steps 30 --json "$OUT_DIR/bench_cuda.json" 2>&1 | grep -v "^\["

echo "== torchrun, one process, NCCL"
rm -rf "$OUT_DIR/nccl"
timeout 120 $PY -m torch.distributed.run --standalone --nproc_per_node=1 -m nmt train configs/gpu.yaml \
    --set train.max_steps=60 --out "$OUT_DIR/nccl" -q
echo "exit $? | $(ls "$OUT_DIR/nccl" | tr '\n' ' ')"
echo "total $((SECONDS - start)) s"
