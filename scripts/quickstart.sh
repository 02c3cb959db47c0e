#!/usr/bin/env bash
# Set everything up, train for a few minutes on a CPU, then translate "Go.".
#   MINUTES=10 bash scripts/quickstart.sh             # a longer budget
#   CONFIG=configs/default.yaml MINUTES=30 bash ...   # the full-corpus model
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

CONFIG=${CONFIG:-configs/d2l.yaml}
MINUTES=${MINUTES:-5}
RUN="runs/quickstart-$(date +%Y%m%d-%H%M%S)"
.venv/bin/nmt train "$CONFIG" --max-minutes "$MINUTES" --out "$RUN"
echo "translate \"Go.\" with $RUN:" >&2
.venv/bin/nmt translate -c "$RUN" "Go."
