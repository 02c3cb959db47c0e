"""From token lists to padded tensors: length filtering, batches, and the training pairs on disk
(the order an epoch batches them in is `nmt.data.epoch_order`'s)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from nmt.data.corpus import Pair
from nmt.data.epoch_order import Lengths, PairLengths, bucket_batches, stable_order
from nmt.data.indexed import IndexedArray
from nmt.data.tokenizer import Tokenizer
from nmt.data.vocab import Vocab
from nmt.files import write_atomically
from nmt.hardware import to_device


@dataclass
class Batch:
    src: torch.Tensor  # (batch, src_len) source ids followed by <eos>, right-padded
    src_lens: torch.Tensor  # (batch,) valid source lengths, <eos> included
    tgt_in: torch.Tensor  # (batch, tgt_len) <bos> + target ids, the decoder's teacher-forced input
    tgt_out: torch.Tensor  # (batch, tgt_len) target ids + <eos>, what the decoder must predict
    num_tokens: int  # non-pad target tokens (<eos> included): what the loss and tokens/s count
    positions: torch.Tensor | None = None  # (num_tokens,) flat indices of the non-pad targets in tgt_out
    # (batch, tgt_len, src_len) with train.guided_alignment: each target position's share of attention on
    # each source position by the aligner's links (rows sum to 1; 0 where a position has no link)
    alignment: torch.Tensor | None = None

    def to(self, device: torch.device) -> Batch:
        """The tensors on `device`, except `src_lens`: the encoder packs by lengths on the host, and
        keeping them there spares a device-to-host copy (a wait for the GPU) every step. On CUDA
        the copies go through pinned memory without blocking, so the host runs ahead."""
        if device.type == "cpu":
            return self
        positions = None if self.positions is None else to_device(self.positions, device)
        alignment = None if self.alignment is None else to_device(self.alignment, device)
        return Batch(to_device(self.src, device), self.src_lens, to_device(self.tgt_in, device),
                     to_device(self.tgt_out, device), self.num_tokens, positions, alignment)


@dataclass(frozen=True)
class Example:
    src: list[int]  # ids + <eos>
    tgt: list[int]  # ids + <eos>
    # (links, 2) source and target piece positions the aligner linked (`nmt.data.links`), for guided alignment
    links: np.ndarray | None = field(default=None, compare=False)


def pair_tokens(pairs: Sequence[Pair], tokenizer: Tokenizer | None) -> tuple[list[list[str]], list[list[str]]]:
    """Both sides' tokens: the corpus's word tokens, or the tokenizer's pieces of the raw text."""
    if tokenizer is None or tokenizer.kind == "word":
        return [p.src for p in pairs], [p.tgt for p in pairs]
    src, tgt = [p.raw[0] for p in pairs], [p.raw[1] for p in pairs]
    if tokenizer.protector:  # data.protect: numbers as placeholders, as the model trained
        src, tgt = tokenizer.protector.protect_pairs(src, tgt)
    return tokenizer.source_tokens(src), tokenizer.target_tokens(tgt)


def encode_pairs(pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab,
                 max_len: int | None = None, tokenizer: Tokenizer | None = None) -> list[Example]:
    """Encode pairs (word tokens unless a subword `tokenizer` is given); with `max_len`, drop pairs
    whose either side (with <eos>) is longer."""
    return encode_tokens(*pair_tokens(pairs, tokenizer), src_vocab, tgt_vocab, max_len)


def encode_tokens(src_tokens: Sequence[list[str]], tgt_tokens: Sequence[list[str]], src_vocab: Vocab,
                  tgt_vocab: Vocab, max_len: int | None = None) -> list[Example]:
    """Token lists of both sides to examples (ids + <eos>), dropping pairs longer than `max_len`."""
    examples = []
    for src_side, tgt_side in zip(src_tokens, tgt_tokens):
        src = src_vocab.encode(src_side) + [src_vocab.eos_id]
        tgt = tgt_vocab.encode(tgt_side) + [tgt_vocab.eos_id]
        if max_len is None or fits(Example(src, tgt), max_len):
            examples.append(Example(src, tgt))
    return examples


def fits(example: Example, max_len: int) -> bool:
    """Whether both sides (with <eos>) are at most `max_len` tokens long."""
    return len(example.src) <= max_len and len(example.tgt) <= max_len


def pad(sequences: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    out = torch.full((len(sequences), max(len(s) for s in sequences)), pad_id, dtype=torch.long)
    for row, seq in zip(out, sequences):
        row[: len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def collate(examples: Sequence[Example], pad_id: int, bos_id: int) -> Batch:
    tgt_in = pad([[bos_id] + ex.tgt[:-1] for ex in examples], pad_id)
    tgt_out = pad([ex.tgt for ex in examples], pad_id)
    return Batch(
        src=pad([ex.src for ex in examples], pad_id),
        src_lens=torch.tensor([len(ex.src) for ex in examples], dtype=torch.long),
        tgt_in=tgt_in,
        tgt_out=tgt_out,
        num_tokens=sum(len(ex.tgt) for ex in examples),
        # Found here, on the host: a boolean mask applied on a GPU would wait for it (nonzero()).
        positions=(tgt_out.flatten() != pad_id).nonzero().squeeze(1),
        alignment=gold_attention(examples, tgt_out.shape[1]) if any(ex.links is not None for ex in examples) else None,
    )


def gold_attention(examples: Sequence[Example], tgt_len: int) -> torch.Tensor:
    """(batch, tgt_len, src_len): for each target position with links, attention spread evenly over the
    source positions it is linked to; <eos> is linked to <eos> (as Marian does), a position without a
    link is all zeros (not guided), and so is every row of an example without links."""
    gold = torch.zeros(len(examples), tgt_len, max(len(ex.src) for ex in examples))
    for row, ex in enumerate(examples):
        if ex.links is None:
            continue
        src_at, tgt_at = ex.links[:, 0], ex.links[:, 1]
        inside = (src_at < len(ex.src) - 1) & (tgt_at < len(ex.tgt) - 1)  # (an empty side was aligned as "_")
        gold[row, torch.from_numpy(tgt_at[inside]), torch.from_numpy(src_at[inside])] = 1.0
        gold[row, len(ex.tgt) - 1, len(ex.src) - 1] = 1.0
    return gold / gold.sum(-1, keepdim=True).clamp_min(1.0)


CHUNK = 1 << 18  # pairs whose lengths are read at once
STORED_SLICE = 1 << 22  # rows of a lengths file read at once (4 MB a side)


def lengths(examples: Sequence[Example]) -> tuple[np.ndarray, np.ndarray]:
    """The source and target lengths (with <eos>) of in-memory examples, for `bucket_batches`."""
    return (np.array([len(ex.src) for ex in examples], dtype=np.int32),
            np.array([len(ex.tgt) for ex in examples], dtype=np.int32))


def iterate_batches(examples: Sequence[Example], batch_size: int, pad_id: int, bos_id: int) -> Iterator[Batch]:
    """In-memory examples (validation, evaluation) in length-sorted batches, in a fixed order."""
    for indices in bucket_batches(*lengths(examples), batch_size, None):
        yield collate([examples[i] for i in indices], pad_id, bos_id)


@dataclass
class TrainingSet:
    """The training pairs, read from the prepared id stores when a batch asks, their lengths from
    the file kept beside them (`StoredLengths`): a corpus of any size holds no memory a pair (and
    the epoch's order is computed a window at a time: `nmt.data.epoch_order`)."""
    src: IndexedArray  # ids without <eos>, one sequence a training pair of the split
    tgt: IndexedArray
    lengths: PairLengths  # with <eos>; 0 (both sides) where a side is longer than data.max_len
    eos_id: int
    links: IndexedArray | None = None  # the aligner's links a pair (`nmt.data.links`), with train.guided_alignment

    @classmethod
    def from_stores(cls, src: IndexedArray, tgt: IndexedArray, max_len: int, eos_id: int,
                    links: IndexedArray | None = None, folder: Path | None = None) -> TrainingSet:
        """The pairs' lengths under `max_len` (`training_lengths`, kept in `folder` if given)."""
        return cls(src, tgt, training_lengths(src, tgt, max_len, folder), eos_id, links)

    def __len__(self) -> int:
        """Rows: every pair of the split, trained or not."""
        return len(self.lengths)

    def fitting(self) -> int:
        """The pairs within data.max_len: those an epoch trains on."""
        return len(self.lengths) - len(self.lengths.too_long())

    def examples(self, rows: Sequence[int] | np.ndarray) -> list[Example]:
        """The examples at `rows`, ids + <eos> (and their links, where the set has them)."""
        eos, at = [self.eos_id], np.asarray(rows).tolist()
        links = [self.links[i].astype(np.int64).reshape(-1, 2) for i in at] \
            if self.links is not None else [None] * len(at)
        return [Example(self.src[i].tolist() + eos, self.tgt[i].tolist() + eos, linked) for i, linked in zip(at, links)]


def lengths_file(folder: Path, max_len: int) -> Path:
    return folder / f"train_lengths.{max_len}.npy"


def training_lengths(src: IndexedArray, tgt: IndexedArray, max_len: int, folder: Path | None = None) -> PairLengths:
    """Each pair's source and target lengths with <eos>, 0 on both sides where a side is longer
    than `max_len`: worked out from the stores' sizes and kept in `folder` (the prepared corpus;
    the recipe keeps them when it first decides data.max_len, so a run's first start finds them),
    then read from there; in memory where they cannot be kept."""
    n = len(src)
    lens_type = np.uint8 if max_len < 1 << 8 else np.uint16 if max_len < 1 << 16 else np.int32
    path = lengths_file(folder, max_len) if folder else None
    if path and (stored := StoredLengths.open(path, n, lens_type)):
        return stored
    lens = np.empty((2, n), lens_type)
    for start in range(0, n, CHUNK):  # read in chunks into arrays of the final size
        src_chunk, tgt_chunk = src.sizes(start, CHUNK) + 1, tgt.sizes(start, CHUNK) + 1  # with <eos>
        fits = (src_chunk <= max_len) & (tgt_chunk <= max_len)
        end = start + len(src_chunk)
        lens[0, start:end], lens[1, start:end] = np.where(fits, src_chunk, 0), np.where(fits, tgt_chunk, 0)
    if path:
        with contextlib.suppress(OSError):  # unwritable: this run holds them, the next works them out again
            write_atomically(path, lambda f: np.save(f, lens, allow_pickle=False))
            if stored := StoredLengths.open(path, n, lens_type):
                return stored
    return Lengths(lens[0], lens[1])


class StoredLengths:
    """`PairLengths` read from the (2, pairs) .npy `training_lengths` keeps, a slice at a time and
    with pread, as the stores are (`nmt.data.indexed`): 36M pairs' lengths are 72 MB that a run
    would otherwise hold, and an epoch's window of rows spread over the whole corpus would map
    every page of the file into its resident memory."""

    def __init__(self, path: Path, n: int, dtype: np.dtype, offset: int):
        self.n, self.dtype, self.offset = n, dtype, offset
        self.file = open(path, "rb", buffering=0)
        self._too_long: np.ndarray | None = None
        self._longest: int | None = None

    @classmethod
    def open(cls, path: Path, n: int, dtype: type) -> StoredLengths | None:
        """The file's lengths where they fit these stores (a rebuilt prepared folder is replaced
        whole, so it never holds an older corpus's); None where it is missing or another's."""
        try:
            with open(path, "rb") as f:
                version = np.lib.format.read_magic(f)
                shape, fortran, stored = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                          else np.lib.format.read_array_header_2_0)(f)
                offset = f.tell()
        except (OSError, ValueError):
            return None
        whole = path.stat().st_size == offset + 2 * n * stored.itemsize  # not cut short
        if shape != (2, n) or fortran or stored != np.dtype(dtype) or not whole:
            return None
        return cls(path, n, stored, offset)

    def __len__(self) -> int:
        return self.n

    def _slices(self, side: int) -> Iterator[tuple[int, np.ndarray]]:
        """Side 0 (sources) or 1 (targets): (first row, lengths) a slice of rows at a time."""
        size = self.dtype.itemsize
        for start in range(0, self.n, STORED_SLICE):
            count = min(STORED_SLICE, self.n - start)
            at = self.offset + (side * self.n + start) * size
            yield start, np.frombuffer(os.pread(self.file.fileno(), count * size, at), self.dtype)

    def take(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        slice_of = rows // STORED_SLICE  # the rows grouped by slice: a few ms a million rows
        order = stable_order(slice_of)
        bounds = np.cumsum([0, *np.bincount(slice_of, minlength=-(-self.n // STORED_SLICE)).tolist()])
        out = (np.empty(len(rows), self.dtype), np.empty(len(rows), self.dtype))
        for side in (0, 1):
            for k, (start, lens) in enumerate(self._slices(side)):
                at = order[bounds[k]:bounds[k + 1]]
                out[side][at] = lens[rows[at] - start]
        return out

    def too_long(self) -> np.ndarray:
        if self._too_long is None:
            self._too_long = np.concatenate([np.flatnonzero(lens == 0) + start for start, lens in self._slices(0)]
                                            or [np.zeros(0, np.int64)])
        return self._too_long

    def longest_target(self) -> int:
        if self._longest is None:
            self._longest = max((int(lens.max()) for _, lens in self._slices(1)), default=0)
        return self._longest

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        src, tgt = (np.concatenate([lens for _, lens in self._slices(side)] or [np.zeros(0, self.dtype)])
                    for side in (0, 1))
        return src, tgt

    def __del__(self) -> None:
        if (file := getattr(self, "file", None)) is not None:
            file.close()
