"""Several training corpora as one: each drawn by its weight every epoch, each optionally tagged.

A weight is how often an epoch draws each pair of its corpus (fairseq's upsampling, OpenNMT-py's
corpus weights, in pairs rather than in batches): 2 draws every pair twice, 0.5 a random half,
1.5 every pair once and a random half of them again. The draw comes from the epoch's random
generator, so a resumed run and every rank of a torchrun job draw the same. A tag (tagged
back-translation, Caswell et al. 2019) is one reserved source piece put before each source of
its corpus, after the prepared ids are read: the prepared copies do not depend on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nmt.data.batches import Example, TrainingSet
from nmt.data.epoch_order import Lengths


@dataclass
class MixPart:
    name: str  # the corpus as the config names it
    pairs: TrainingSet
    weight: float
    tag: str | None = None  # the reserved source piece put before each source, if any
    tag_id: int | None = None  # its id

    def draws(self) -> int:
        """Pairs of this corpus in one epoch."""
        return round(self.weight * len(self.pairs))


class CorpusMix:
    """The training pairs of several corpora behind `TrainingSet`'s interface: rows number the
    corpora end to end; `epoch_rows` says which rows (with repeats) an epoch holds."""

    def __init__(self, parts: Sequence[MixPart]):
        self.parts = list(parts)
        sizes = [len(p.pairs) for p in self.parts]
        self.starts = np.cumsum([0, *sizes])
        # In memory, int32 (a tag adds one to its corpus's sources; 0, too long, stays 0), as batching needs them.
        tagged = np.concatenate([np.full(n, p.tag_id is not None, np.int32) for p, n in zip(self.parts, sizes)])
        every = [p.pairs.lengths.arrays() for p in self.parts]
        src = np.concatenate([src for src, _ in every]).astype(np.int32)
        src += tagged * (src > 0)
        self.lengths = Lengths(src, np.concatenate([tgt for _, tgt in every]).astype(np.int32))

    def __len__(self) -> int:
        return int(self.starts[-1])

    def epoch_rows(self, rng: np.random.Generator) -> np.ndarray | None:
        """The rows one epoch draws, each corpus by its weight; None when every weight is 1 (every
        row once: the single-corpus epoch, drawn as before)."""
        if all(p.weight == 1 for p in self.parts):
            return None
        rows = []
        for part, start in zip(self.parts, self.starts):
            n, count = len(part.pairs), part.draws()
            whole, rest = divmod(count, n)
            rows.extend(np.arange(start, start + n, dtype=np.int64) for _ in range(whole))
            if rest:
                rows.append(start + np.sort(rng.choice(n, rest, replace=False)))
        return np.concatenate(rows) if rows else np.zeros(0, np.int64)

    def part_of(self, rows: np.ndarray) -> np.ndarray:
        """The corpus (its index in `parts`) of each row."""
        return np.searchsorted(self.starts, rows, side="right") - 1

    def examples(self, rows: Sequence[int] | np.ndarray) -> list[Example]:
        rows = np.asarray(rows, dtype=np.int64)
        parts = self.part_of(rows)
        out: list[Example | None] = [None] * len(rows)
        for index in np.unique(parts).tolist():
            part, at = self.parts[index], np.flatnonzero(parts == index)
            tag = [] if part.tag_id is None else [part.tag_id]
            for position, example in zip(at.tolist(), part.pairs.examples(rows[at] - self.starts[index])):
                out[position] = Example(tag + example.src, example.tgt) if tag else example
        return out  # type: ignore[return-value]

    def describe(self) -> str:
        """One line: each corpus, its pairs, weight and tag, and what an epoch draws."""
        epoch = sum(p.draws() for p in self.parts)
        return " | ".join(f"{p.name}: {len(p.pairs):,} pairs x {p.weight:g}" + (f", tag {p.tag}" if p.tag else "")
                          for p in self.parts) + f" -> {epoch:,} pairs an epoch"
