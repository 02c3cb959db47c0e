#!/usr/bin/env bash
# Set everything up, train for a few minutes on a CPU, then translate a few sentences.
#   MINUTES=10 bash scripts/quickstart.sh             # a longer budget
#   CONFIG=configs/default.yaml MINUTES=30 bash ...   # the full-size model of the results table
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

CONFIG=${CONFIG:-configs/quickstart.yaml}
MINUTES=${MINUTES:-5}
RUN="runs/quickstart-$(date +%Y%m%d-%H%M%S)"
.venv/bin/nmt train "$CONFIG" --max-minutes "$MINUTES" --out "$RUN"
SENTENCES=("Go." "I'm OK." "He's calm." "I am cold." "Where is the train station?" "We will leave tomorrow morning.")
printf '%s\n' "${SENTENCES[@]}" > "$RUN/quickstart-input.txt"
echo "translations by $RUN:" >&2
.venv/bin/nmt translate -c "$RUN" --input "$RUN/quickstart-input.txt" | paste -d '|' "$RUN/quickstart-input.txt" - \
    | sed 's/|/  ->  /'
