"""Peak memory of `nmt translate --input FILE` for 10,000 and 100,000 lines: streaming in chunks
should keep it flat as the input grows.

    python scripts/benchmarks/bench_translate_memory.py

Trains configs/tiny.yaml for a few seconds (a small real model), writes input files of English
corpus sentences, then runs `python -m nmt translate -i FILE` in a fresh process for each size
and reports its peak resident memory, its speed and that every input line got an output line.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def run(args: list[str]) -> tuple[float, float, bytes]:
    """Run `python -m nmt ARGS`; returns (seconds, peak RSS in MB, stdout)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, "-m", "nmt", *args], cwd=REPO, stdout=out,
                                stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"nmt {' '.join(args)} failed with exit code {proc.returncode}")
        out.seek(0)
        return seconds, usage.ru_maxrss / 1024, out.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="fra-eng.zip (default: as nmt finds it)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args()

    from nmt.config import load_config
    from nmt.training.recipe import fit_to_corpus
    from nmt.data.corpus import load_corpus

    data = ["--data", args.data] if args.data else []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run(["train", "configs/tiny.yaml", "--out", str(tmp / "run"), "--quiet", *data])
        cfg = fit_to_corpus(load_config(REPO / "configs/default.yaml"), None)
        english = [" ".join(p.src) for p in load_corpus(args.data, cfg.data)[1].train]
        rng = random.Random(0)
        print(f"model: configs/tiny.yaml trained for {load_config(REPO / 'configs/tiny.yaml').train.epochs} epochs; "
              f"inputs: English sentences of the train split, drawn at random")
        for size in args.sizes:
            path = tmp / f"in-{size}.txt"
            path.write_text("".join(rng.choice(english) + "\n" for _ in range(size)), encoding="utf-8")
            seconds, peak_mb, out = run(["translate", "-i", str(path), "-c", str(tmp / "run"), "--device", "cpu"])
            lines = out.decode("utf-8").count("\n")
            print(f"{size:>8,} lines: peak RSS {peak_mb:6,.0f} MB | {seconds:6.1f} s | "
                  f"{size / seconds:7,.0f} sentences/s | {lines:,} output lines"
                  f"{'' if lines == size else '  MISMATCH'}")


if __name__ == "__main__":
    main()
