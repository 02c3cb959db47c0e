"""Where a training step's time goes: torch.profiler over a few steps, the top operators by host
time and by device time, and the step's wall time.

    python scripts/benchmarks/profile_step.py --device cuda --config configs/gpu.yaml
    python scripts/benchmarks/profile_step.py --set train.batch_tokens=0   # 64-sentence batches
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "benchmarks"))

from bench import _prepare, _training_batches  # noqa: E402  (the benchmark's data and batches)

from nmt import hardware  # noqa: E402
from nmt.config import load_config  # noqa: E402
from nmt.model import build_model  # noqa: E402
from nmt.training.loop import train_step  # noqa: E402

# The operators that do a step's arithmetic, whatever arranges the model's loops: what is left
# when every other operator (element-wise work, copies, the softmax, Adam) costs nothing.
MATRIX_PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::mkldnn_rnn_layer",
                   "aten::mkldnn_rnn_layer_backward")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs/default.yaml"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=25, help="operators to list (0: only the step time)")
    args = parser.parse_args()

    device = hardware.resolve_device(args.device)
    requested = load_config(args.config, args.overrides).train.precision
    prepare_args = argparse.Namespace(config=args.config, data=None, threads=torch.get_num_threads(),
                                      overrides=args.overrides, model="config",
                                      precision=hardware.resolve_precision(requested, device))
    cfg, _, sv, tv, examples, _ = _prepare(prepare_args)
    torch.manual_seed(0)
    model = build_model(cfg.model, sv, tv).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr, fused=True)
    batches = _training_batches(cfg, examples, tv.pad_id, tv.bos_id)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step() -> int:
        batch = next(batches)
        train_step(model, [batch.to(device)], optimizer, cfg, tv.pad_id)
        return batch.num_tokens

    for _ in range(10):  # warm-up
        step()
    sync()
    start, tokens = time.perf_counter(), 0
    for _ in range(args.steps):
        tokens += step()
    sync()
    wall = time.perf_counter() - start
    print(f"{cfg.train.precision}, batch {cfg.train.batch_tokens or cfg.train.batch_size} "
          f"{'tokens' if cfg.train.batch_tokens else 'sentences'}: {1000 * wall / args.steps:.1f} ms a step, "
          f"{tokens / wall:,.0f} target tok/s on {device}")
    if not args.top:
        return
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(args.steps):
            step()
        sync()
    table = prof.key_averages()
    print(table.table(sort_by="self_cpu_time_total", row_limit=args.top))
    products = sum(e.self_cpu_time_total for e in table if e.key in MATRIX_PRODUCTS)
    total = sum(e.self_cpu_time_total for e in table)
    print(f"matrix products ({', '.join(MATRIX_PRODUCTS)}): {100 * products / total:.1f}% of the host "
          f"time; with everything else taking none, a step would be at most x{total / products:.2f} as fast")
    if device.type == "cuda":
        print(table.table(sort_by="self_cuda_time_total", row_limit=args.top))


if __name__ == "__main__":
    main()
