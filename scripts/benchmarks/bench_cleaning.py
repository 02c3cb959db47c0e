"""What each cleaning rule costs a million pairs, one process: the seconds a corpus of millions
adds to `nmt prepare` (whose worker processes judge the pair rules, one a core; the ratio and
duplicates rules run in the process that writes the stores).

    python scripts/benchmarks/bench_cleaning.py [--data data/fra-eng.zip] [--pairs 200000]

The pairs are fra-eng's training pairs, repeated to `--pairs`; the figures are seconds a million
pairs, beside the streaming pass's own split of a line (`split_pair`) as the reference.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np

from nmt.config import DataConfig
from nmt.data.cleaning.duplicates import SeenPairs
from nmt.data.cleaning.rules import InOrder, PairRules, _junk, normalised, pair_key
from nmt.data.corpus import load_splits, split_pair


def timed(pairs: list[tuple[str, str]], work) -> float:
    start = time.perf_counter()
    work(pairs)
    return (time.perf_counter() - start) / len(pairs) * 1e6  # seconds a million pairs


def in_order(cfg: DataConfig, pairs: list[tuple[str, str]]) -> None:
    judge = InOrder(cfg, 40 * len(pairs)).judge
    for start in range(0, len(pairs), 20_000):
        judge([(s, t, start + i) for i, (s, t) in enumerate(pairs[start:start + 20_000])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data/fra-eng.zip")
    parser.add_argument("--pairs", type=int, default=200_000)
    args = parser.parse_args()
    cfg = DataConfig()
    train = [p.raw for p in load_splits(Path(args.data)).train]
    pairs = list(itertools.islice(itertools.cycle(train), args.pairs))
    rules = PairRules(cfg)
    languages = rules.languages
    costs = {
        "split_pair (the pass's own work, reference)": lambda ps: [split_pair(s, t, cfg) for s, t in ps],
        "empty + junk": lambda ps: [_junk(s) or _junk(t) for s, t in ps],
        "copies": lambda ps: [normalised(s) == normalised(t) for s, t in ps],
        "language (py3langid, both sides)": lambda ps: [(languages.probability(s, 0), languages.probability(t, 1))
                                                       for s, t in ps],
        "all four pair rules": lambda ps: [rules.broken(s, t) for s, t in ps],
        "duplicates: pair_key": lambda ps: [pair_key(s, t) for s, t in ps],
        "duplicates: Bloom filter": lambda ps: SeenPairs(40 * len(ps)).repeated(np.arange(len(ps), dtype=np.int64)),
        "ratio + duplicates (InOrder, chunks of 20,000)": lambda ps: in_order(cfg, ps),
    }
    reference = None
    for name, work in costs.items():
        seconds = timed(pairs, work)
        reference = reference or seconds
        print(f"{name:48s} {seconds:7.1f} s a million pairs ({seconds / reference:.2f}x split_pair)")


if __name__ == "__main__":
    main()
