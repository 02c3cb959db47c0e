"""Why the output projection's rows are padded: memory of a bf16 projection fed changing shapes.

    python scripts/benchmarks/bench_projection_memory.py            # row counts as they come
    python scripts/benchmarks/bench_projection_memory.py --pad 64   # padded to a multiple of 64, as nmt does

A linear layer of the default model's projection size (256 -> 17,582) trains 400 steps under bf16
autocast with Adam, each step on a random number of rows (200-1,300, like a batch's target
tokens); prints the resident set every 100 steps.
"""

import argparse
import random

import torch

from nmt.hardware import keep_freed_memory


def rss_mb() -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in open("/proc/self/status", encoding="utf-8"))
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pad", type=int, default=0, help="pad the row count to a multiple of this (0: no)")
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    keep_freed_memory()  # as nmt runs
    torch.set_num_threads(2)
    random.seed(0)
    layer = torch.nn.Linear(256, 17582)
    optimizer = torch.optim.Adam(layer.parameters())
    for step in range(1, args.steps + 1):
        rows = random.randint(200, 1300)
        if args.pad:
            rows = -(-rows // args.pad) * args.pad
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = layer(torch.randn(rows, 256))
        loss = torch.nn.functional.cross_entropy(logits.float(), torch.randint(0, 17582, (rows,)))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 100 == 0:
            rss, peak = rss_mb()
            print(f"step {step}: RSS {rss:,.0f} MB, peak {peak:,.0f} MB")


if __name__ == "__main__":
    main()
