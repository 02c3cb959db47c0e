"""Data-parallel scaling on this machine: `nmt train` with 1 and 2 processes (one thread each).

    python scripts/benchmarks/bench_ddp.py                 # default config, 300 steps per run, ~4 min
    python scripts/benchmarks/bench_ddp.py --json ddp.json

Each run is a real `nmt train` (torchrun for 2 processes); throughput is the median of its
logged windows after the first (target tokens/s summed over all processes). Efficiency is
the 2-process rate over twice the 1-process, 1-thread rate. A 1-process, 2-thread run on the
same cores is printed for comparison: it is what one uses the two cores for otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def measure(config: str, steps: int, processes: int, threads: int, out: Path) -> dict:
    run = out / f"p{processes}-t{threads}"
    command = [sys.executable, "-m", "nmt", "train", config, "--out", str(run), "--quiet",
               "--set", f"train.max_steps={steps}", "--set", "train.log_every=50",
               "--set", f"train.threads={threads}", "--set", "train.eval_every=0",
               "--set", "train.save_every=0", "--set", "train.val_bleu_sentences=50"]
    if processes > 1:
        command += ["--nproc", str(processes)]
    subprocess.run(command, cwd=REPO, check=True)
    log = (run / "train.log").read_text(encoding="utf-8")
    windows = [float(x.replace(",", "")) for x in re.findall(r"step \d+ \|.* ([\d,]+) tok/s", log)]
    return {"processes": processes, "threads": threads, "tok_s": statistics.median(windows[1:]),
            "windows": windows, "global_batch": re.search(r"global batch (\d+)", log).group(1)
            if processes > 1 else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one = measure(args.config, args.steps, 1, 1, Path(tmp))
        two = measure(args.config, args.steps, 2, 1, Path(tmp))
        threads = measure(args.config, args.steps, 1, 2, Path(tmp))
    efficiency = two["tok_s"] / (2 * one["tok_s"])
    print(f"1 process  x 1 thread : {one['tok_s']:8,.0f} target tok/s (batch 64)")
    print(f"2 processes x 1 thread: {two['tok_s']:8,.0f} target tok/s (global batch {two['global_batch']}), "
          f"scaling efficiency {efficiency:.0%}")
    print(f"1 process  x 2 threads: {threads['tok_s']:8,.0f} target tok/s (batch 64), for comparison")
    if args.json:
        args.json.write_text(json.dumps({"one_process": one, "two_processes": two, "one_process_two_threads": threads,
                                         "efficiency": efficiency}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
