"""An epoch's order: the training pairs shuffled over the whole corpus and cut into batches of
similar lengths, a window of a million pairs at a time, so a corpus of any size costs the memory
of one window.

The shuffle is a keyed permutation of the row numbers (a Feistel network over the next even
power of two, walking back into range: Black and Rogaway's cipher on an arbitrary domain), so
the rows of window w, the permuted positions w x WINDOW onwards, are computed from the key
alone: no array of the whole epoch's order is made, and a resumed run recomputes the same. Each
window is sorted by length (stable: equal lengths keep the shuffle) and cut into batches of
`batch_size` sentences, or of as many sentences as fit `batch_tokens` padded target tokens (as
Joey NMT's and fairseq's token batches), and its batches are shuffled among themselves.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Protocol

import numpy as np

WINDOW = 1 << 20  # rows sorted by length together: the whole of a corpus up to a million pairs
ROUNDS = 4
_MIX = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: a multiply that spreads every bit upwards


class Permutation:
    """A seeded permutation of range(n), evaluated at any positions without materialising it."""

    def __init__(self, n: int, rng: np.random.Generator):
        self.n = n
        self.half = max(1, (max(1, n - 1).bit_length() + 1) // 2)  # 2^(2 half) >= n, < 4n
        self.keys = rng.integers(0, 1 << 63, size=ROUNDS, dtype=np.uint64)

    def _cipher(self, x: np.ndarray) -> np.ndarray:
        """One pass of the Feistel network: a bijection of range(2^(2 half))."""
        half, shift = np.uint64(self.half), np.uint64(64 - self.half)
        left, right = x >> half, x & np.uint64((1 << self.half) - 1)
        for key in self.keys:
            left, right = right, left ^ (((right ^ key) * _MIX) >> shift)
        return (left << half) | right

    def _decipher(self, y: np.ndarray) -> np.ndarray:
        half, shift = np.uint64(self.half), np.uint64(64 - self.half)
        left, right = y >> half, y & np.uint64((1 << self.half) - 1)
        for key in self.keys[::-1]:
            left, right = right ^ (((left ^ key) * _MIX) >> shift), left
        return (left << half) | right

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The rows at `positions` of the permuted order."""
        return self._walk(self._cipher, positions)

    def inverse(self, rows: np.ndarray) -> np.ndarray:
        """The positions of `rows` in the permuted order."""
        return self._walk(self._decipher, rows)

    def _walk(self, step, values: np.ndarray) -> np.ndarray:
        out = step(values.astype(np.uint64))
        outside = np.flatnonzero(out >= self.n)
        while outside.size:  # cycle walking: applied again until in range, it stays a bijection of range(n)
            out[outside] = step(out[outside])
            outside = outside[out[outside] >= self.n]
        return out.astype(np.int64)


class PairLengths(Protocol):
    """Each row's source and target lengths with <eos>; 0 on both sides where the pair is longer
    than data.max_len (never batched)."""

    def __len__(self) -> int: ...

    def take(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The source and target lengths of `rows`."""

    def too_long(self) -> np.ndarray:
        """The rows over data.max_len."""

    def longest_target(self) -> int: ...

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Every row's, in memory."""


class Lengths:
    """`PairLengths` held in memory."""

    def __init__(self, src: np.ndarray, tgt: np.ndarray):
        self.src, self.tgt = src, tgt

    def __len__(self) -> int:
        return len(self.src)

    def take(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.src[rows], self.tgt[rows]

    def too_long(self) -> np.ndarray:
        return np.flatnonzero(self.src == 0)

    def longest_target(self) -> int:
        return int(self.tgt.max(initial=0))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.src, self.tgt


class EpochBatches:
    """One epoch's batches of rows, computed a window at a time: iterate them (`from_batch` skips
    ahead for a resumed run), take `len()` or a slice.

    `lengths`: each row's (`PairLengths`: a row over data.max_len is never batched). `rows`: the
    epoch's rows when not every row once (a weighted corpus mix). Without `rng`, the rows in
    order, unshuffled (counting, evaluation). With `size` processes, each global batch
    (batch_size x size sentences or batch_tokens x size tokens) is dealt to the ranks, rank r
    taking every size-th row, so ranks see disjoint, equally long shards and a step of N
    processes is a step of one process with an N times larger batch; a global batch too small to
    give every rank a row is dropped (an empty shard would stall the gradient all-reduce)."""

    def __init__(self, lengths: PairLengths, batch_size: int, rng: np.random.Generator | None = None,
                 batch_tokens: int = 0, rank: int = 0, size: int = 1, rows: np.ndarray | None = None):
        self.lengths, self.rows = lengths, rows
        self.n = len(lengths) if rows is None else len(rows)
        self.batch_size, self.batch_tokens = batch_size * size, batch_tokens * size
        self.rank, self.size = rank, size
        self.widest = lengths.longest_target() + 1
        self.permutation = None if rng is None else Permutation(self.n, rng)
        self.window_seed = None if rng is None else int(rng.integers(1 << 63))
        self.windows = -(-self.n // WINDOW)
        self._count: int | None = None
        self._fitting: np.ndarray | None = None
        self._made: tuple[int, list[np.ndarray]] | None = None

    def window_rows(self, w: int) -> np.ndarray:
        """The rows of window `w` that fit data.max_len, shuffled unless the order is fixed."""
        return self._window_lengths(w)[0]

    def _window_lengths(self, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`window_rows` and their source and target lengths."""
        positions = np.arange(w * WINDOW, min(self.n, (w + 1) * WINDOW), dtype=np.int64)
        if self.permutation is not None:
            positions = self.permutation(positions)
        rows = positions if self.rows is None else self.rows[positions]
        src, tgt = self.lengths.take(rows)
        fits = src > 0
        return rows[fits], src[fits], tgt[fits]

    def window(self, w: int) -> list[np.ndarray]:
        """This rank's batches of window `w`, in the epoch's order (the last one made is kept:
        counting a window of token batches makes it, and iterating it comes next)."""
        if self._made is None or self._made[0] != w:
            self._made = (w, self._make_window(w))
        return self._made[1]

    def _make_window(self, w: int) -> list[np.ndarray]:
        rows, src, tgt = self._window_lengths(w)
        order = stable_order(src.astype(np.int64) * self.widest + tgt)
        rows = rows[order]
        if self.batch_tokens:
            batches = token_batches(rows, tgt[order], self.batch_tokens)
        else:
            batches = [rows[i: i + self.batch_size] for i in range(0, len(rows), self.batch_size)]
        if self.window_seed is not None:
            batches = [batches[i] for i in np.random.default_rng([self.window_seed, w]).permutation(len(batches))]
        if self.size > 1:
            batches = [b[self.rank::self.size] for b in batches if len(b) >= self.size]
        return batches

    def window_count(self, w: int) -> int:
        """How many batches window `w` gives (by sentences: counted without making them)."""
        if self.batch_tokens:
            return len(self.window(w))
        full, rest = divmod(int(self.fitting_per_window()[w]), self.batch_size)
        return full + (rest >= self.size)

    def fitting_per_window(self) -> np.ndarray:
        """The rows within data.max_len in each window. Every row once: each window's size less
        the too-long rows whose permuted positions fall in it (few, and found by the inverse)."""
        if self._fitting is None:
            if self.rows is None:
                too_long = self.lengths.too_long()
                positions = too_long if self.permutation is None else self.permutation.inverse(too_long)
                sizes = np.diff(np.minimum(np.arange(self.windows + 1, dtype=np.int64) * WINDOW, self.n))
                self._fitting = sizes - np.bincount(positions // WINDOW, minlength=self.windows)
            else:
                self._fitting = np.array([len(self.window_rows(w)) for w in range(self.windows)], np.int64)
        return self._fitting

    def __len__(self) -> int:
        if self._count is None:
            self._count = sum(self.window_count(w) for w in range(self.windows))
        return self._count

    def from_batch(self, start: int) -> Iterator[np.ndarray]:
        """The batches from the `start`-th on: a resumed run continues where it stopped."""
        for w in range(self.windows):
            if start and start >= (count := self.window_count(w)):
                start -= count
                continue
            yield from self.window(w)[start:]
            start = 0

    def __iter__(self) -> Iterator[np.ndarray]:
        return self.from_batch(0)

    def groups(self, start: int, size: int) -> Iterator[list[np.ndarray]]:
        """The batches from the `start`-th on, `size` at a time (the micro-batches of one step)."""
        batches = self.from_batch(start)
        while group := list(itertools.islice(batches, size)):
            yield group

    def __getitem__(self, index: slice) -> list[np.ndarray]:
        """The first few batches (`epoch[:k]`); one batch at an index would remake its window."""
        if not isinstance(index, slice):
            raise TypeError("EpochBatches takes a slice; iterate it for every batch")
        return list(itertools.islice(self, index.start, index.stop, index.step))


def bucket_batches(src_lens: np.ndarray, tgt_lens: np.ndarray, batch_size: int, rng: np.random.Generator | None,
                   batch_tokens: int = 0) -> list[np.ndarray]:
    """Every row's index in batches of similar lengths (`EpochBatches` of one process, as a list)."""
    return list(EpochBatches(Lengths(src_lens, tgt_lens), batch_size, rng, batch_tokens))


def token_batches(order: np.ndarray, lens: np.ndarray, batch_tokens: int) -> list[np.ndarray]:
    """Cut `order` (rows whose target lengths are `lens`) into runs whose rows x longest target
    stays within `batch_tokens` (at least one row), greedily, as one would example by example; but
    a run of equal target lengths (a sorted window holds few distinct lengths) is taken in one
    step, so the cost is per batch."""
    edges = [0, *(np.flatnonzero(np.diff(lens)) + 1).tolist(), len(order)]
    batches, start, count, longest = [], 0, 0, 0
    for run_start, run_end in zip(edges[:-1], edges[1:]):
        length, pos = int(lens[run_start]), run_start
        while pos < run_end:
            widest = max(longest, length)
            room = max(1, batch_tokens // length) if count == 0 else batch_tokens // widest - count
            if room <= 0:  # not one more row fits: close the batch
                batches.append(order[start:pos])
                start, count, longest = pos, 0, 0
                continue
            take = min(room, run_end - pos)
            pos, count, longest = pos + take, count + take, widest
            if pos < run_end:  # the rest of the run does not fit
                batches.append(order[start:pos])
                start, count, longest = pos, 0, 0
    if count:
        batches.append(order[start:])
    return batches


def stable_order(keys: np.ndarray) -> np.ndarray:
    """`np.argsort(keys, kind="stable")` of non-negative keys; where they fit in 16 bits (nearly
    always: lengths, slice numbers) numpy sorts them by radix, 8x faster."""
    if keys.max(initial=0) < 1 << 16:
        keys = keys.astype(np.uint16)
    return np.argsort(keys, kind="stable")
