"""How the data path scales: prepare time, prepared size, warm start and peak memory of training
on synthetic corpora of 0.16M, 1M, 4M, 12M and 36M pairs (WMT14 English-French's size) made from
fra-eng.

    python scripts/benchmarks/bench_scale.py [--data data/fra-eng.zip] [--sizes 160000,1000000,...]

36M pairs need about 12 GB of free disk under the temporary folder (the corpus and its prepared
copy) and about an hour on two cores.

Each corpus is fra-eng's pairs repeated, each copy in its own seeded order and marked by its number
(a pair repeated word for word is a duplicate that cleaning drops), written as a
tab-separated file under a temporary folder that is deleted at the end (never commit one).
For each size it runs, as separate processes with `configs/default.yaml`:
- `nmt prepare` (cold): wall time, pairs/s, the prepared folder's size, peak RSS;
- `nmt train` on the prepared data (warm: a cache hit): seconds from the process start to the
  log line of the first training step, and peak RSS over its first 100 steps; then a later start
  (a new run on the same folder, which reads what the first start kept there) to its first step.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.config import DataConfig  # noqa: E402
from nmt.data.corpus import read_lines, resolve_corpus  # noqa: E402
from nmt.hardware import cpu_name, noted_flags  # noqa: E402

STEPS = 100
STEP_LINE = re.compile(r"^step (\d+) \|")


def synthesize(lines: list[str], pairs: int, path: Path) -> None:
    """`pairs` lines: the corpus repeated, every copy in its own seeded order, and after the first
    each pair ending in its copy's number on both sides (a repeated pair is a duplicate that
    cleaning drops: data.drop_duplicates)."""
    with open(path, "w", encoding="utf-8") as f:
        written, copy = 0, 0
        while written < pairs:
            order = list(range(len(lines)))
            random.Random(copy).shuffle(order)
            for i in order[: pairs - written]:
                src, tgt = lines[i].split("\t")[:2]
                f.write(f"{src} {copy}\t{tgt} {copy}\n" if copy else f"{src}\t{tgt}\n")
            written += min(len(order), pairs - written)
            copy += 1


def run_measured(command: list[str], until_step: int | None = None) -> tuple[float, float, float | None]:
    """Run `command`; returns (wall seconds, peak RSS in MB, seconds to the first step's log line).
    With `until_step`, the process is stopped once that step's line is logged."""
    start = time.monotonic()
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    first_step = None
    assert proc.stderr is not None
    buffer = ""
    while chunk := proc.stderr.read(1):
        buffer += chunk
        if chunk not in "\r\n":
            continue
        line, buffer = buffer.strip(), ""
        match = STEP_LINE.match(line)
        if match and first_step is None:
            first_step = time.monotonic() - start
        if match and until_step is not None and int(match.group(1)) >= until_step:
            proc.send_signal(signal.SIGKILL)
            break
        if line.startswith("error:"):
            print(line, file=sys.stderr)
    _, status, usage = os.wait4(proc.pid, 0)
    if until_step is None and status != 0:
        raise SystemExit(f"{' '.join(command)} failed")
    return time.monotonic() - start, usage.ru_maxrss / 1024, first_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None)
    parser.add_argument("--sizes", default="160000,1000000,4000000,12000000,36000000")
    parser.add_argument("--config", default="configs/default.yaml")
    args = parser.parse_args()
    lines = read_lines(resolve_corpus(args.data, DataConfig()))
    nmt = [sys.executable, "-m", "nmt"]
    rows = []
    work = Path(tempfile.mkdtemp(prefix="nmt-bench-scale-"))
    try:
        for pairs in (int(s) for s in args.sizes.split(",")):
            corpus, prepared = work / f"corpus-{pairs}.tsv", work / f"prepared-{pairs}"
            synthesize(lines, pairs, corpus)
            common = [args.config, "--data", str(corpus), "--set", f"data.prepared_dir={prepared}"]
            wall, prep_rss, _ = run_measured(nmt + ["prepare", *common])
            size_mb = sum(p.stat().st_size for p in prepared.rglob("*") if p.is_file()) / 1e6
            train = nmt + ["train", *common, "--set", "train.log_every=1", "--set", "train.eval_every=0",
                           "--set", "train.save_every=0"]
            _, train_rss, first = run_measured(train + ["--out", str(work / f"run-{pairs}")], until_step=STEPS)
            _, _, later = run_measured(train + ["--out", str(work / f"again-{pairs}")], until_step=1)
            rows.append((pairs, wall, pairs / wall, corpus.stat().st_size / 1e6, size_mb, prep_rss, first, later,
                         train_rss))
            shutil.rmtree(prepared)
            corpus.unlink()
            print(f"{pairs:,} pairs done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores; {', '.join(noted_flags())}); {args.config}")
    print("| pairs | prepare | pairs/s | corpus | prepared | prepare peak RSS | warm start to step 1 (first, later) "
          f"| train peak RSS ({STEPS} steps) |")
    print("|---|---|---|---|---|---|---|---|")
    for pairs, wall, rate, corpus_mb, size_mb, prep_rss, first, later, train_rss in rows:
        print(f"| {pairs:,} | {wall:.1f} s | {rate:,.0f} | {corpus_mb:.0f} MB | {size_mb:.0f} MB | {prep_rss:,.0f} MB "
              f"| {first:.1f} s, {later:.1f} s | {train_rss:,.0f} MB |")
    base = next((r for r in rows if r[0] == 1_000_000), rows[0])
    print(f"train peak RSS relative to {base[0]:,} pairs: "
          + ", ".join(f"{r[0]:,}: {r[-1] / base[-1]:.2f}x" for r in rows))


if __name__ == "__main__":
    main()
