#!/usr/bin/env bash
# Set up a virtual environment in .venv with nmt and its dependencies.
# torch is installed first and pinned (TORCH_SPEC, default torch==2.13.0), so that installing
# nmt afterwards never pulls a different torch build. Idempotent: safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# (this machine's pip config names local package folders that may be absent: drop those warnings)
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@" 2> >(grep -v "^WARNING: Location" >&2); }
.venv/bin/python -c "import torch" 2>/dev/null || pip install "$TORCH_SPEC"
pip install -e ".[dev,plot,serve,tensorboard,onnx,align]"
.venv/bin/python -c "import torch, nmt" || { echo "setup failed: torch or nmt does not import" >&2; exit 1; }

# A local copy of the corpus beside the repository (as on the team's machines) goes into the
# data/ cache, where the loader looks before it downloads.
if [ ! -f data/fra-eng.zip ] && [ -f ../shared/data/fra-eng.zip ]; then
    cp ../shared/data/fra-eng.zip data/fra-eng.zip && chmod 644 data/fra-eng.zip
fi
echo "setup done: $(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'), nmt in .venv" >&2
