"""From token lists to padded tensors: length filtering, bucketing by length, batches."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nmt.data.corpus import Pair
from nmt.data.indexed import IndexedArray
from nmt.data.tokenizer import Tokenizer
from nmt.data.vocab import Vocab
from nmt.hardware import to_device


@dataclass
class Batch:
    src: torch.Tensor  # (batch, src_len) source ids followed by <eos>, right-padded
    src_lens: torch.Tensor  # (batch,) valid source lengths, <eos> included
    tgt_in: torch.Tensor  # (batch, tgt_len) <bos> + target ids, the decoder's teacher-forced input
    tgt_out: torch.Tensor  # (batch, tgt_len) target ids + <eos>, what the decoder must predict
    num_tokens: int  # non-pad target tokens (<eos> included): what the loss and tokens/s count
    positions: torch.Tensor | None = None  # (num_tokens,) flat indices of the non-pad targets in tgt_out

    def to(self, device: torch.device) -> Batch:
        """The tensors on `device`, except `src_lens`: the encoder packs by lengths on the host, and
        keeping them there spares a device-to-host copy (a wait for the GPU) every step. On CUDA
        the copies go through pinned memory without blocking, so the host runs ahead."""
        if device.type == "cpu":
            return self
        positions = None if self.positions is None else to_device(self.positions, device)
        return Batch(to_device(self.src, device), self.src_lens, to_device(self.tgt_in, device),
                     to_device(self.tgt_out, device), self.num_tokens, positions)


@dataclass(frozen=True)
class Example:
    src: list[int]  # ids + <eos>
    tgt: list[int]  # ids + <eos>


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
    )


WINDOW = 1 << 20  # examples sorted by length together: the whole of a corpus up to a million pairs
CHUNK = 1 << 18  # pairs whose lengths are read at once


def lengths(examples: Sequence[Example]) -> tuple[np.ndarray, np.ndarray]:
    """The source and target lengths (with <eos>) of in-memory examples, for `bucket_batches`."""
    return (np.array([len(ex.src) for ex in examples], dtype=np.int32),
            np.array([len(ex.tgt) for ex in examples], dtype=np.int32))


def bucket_batches(src_lens: np.ndarray, tgt_lens: np.ndarray, batch_size: int, rng: np.random.Generator | None,
                   batch_tokens: int = 0) -> list[np.ndarray]:
    """Index arrays of examples of similar lengths, so batches carry little padding: `batch_size`
    examples each, or with `batch_tokens`, as many as fit that many padded target tokens
    (rows x longest target), as Joey NMT's and fairseq's token batches do.

    With `rng`, a permutation of all examples (a global shuffle) is cut into windows of `WINDOW`,
    each sorted by length (stable: equal lengths keep the shuffle) and cut into batches, and the
    batch order is shuffled; without it the order is fixed. Only index arrays are made, so a
    corpus of millions of pairs costs a few bytes a pair.
    """
    n, widest = len(src_lens), int(tgt_lens.max(initial=0)) + 1
    order = np.arange(n, dtype=np.int32)  # int32 and shuffled in place: 4 bytes a pair
    if rng is not None:
        rng.shuffle(order)
    batches: list[np.ndarray] = []
    for start in range(0, n, WINDOW):
        window = order[start: start + WINDOW]
        key = src_lens[window].astype(np.int64) * widest + tgt_lens[window]
        window = window[np.argsort(key, kind="stable")]
        if batch_tokens:
            batches.extend(token_batches(window, tgt_lens, batch_tokens))
        else:
            batches.extend(window[i: i + batch_size] for i in range(0, len(window), batch_size))
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def token_batches(order: np.ndarray, tgt_lens: np.ndarray, batch_tokens: int) -> list[np.ndarray]:
    """Cut `order` into runs whose rows x longest target stays within `batch_tokens` (at least one
    row), greedily, as one would example by example; but a run of equal target lengths (a sorted
    window holds few distinct lengths) is taken in one step, so the cost is per batch."""
    lens = tgt_lens[order]
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


def iterate_batches(examples: Sequence[Example], batch_size: int, pad_id: int, bos_id: int) -> Iterator[Batch]:
    """In-memory examples (validation, evaluation) in length-sorted batches, in a fixed order."""
    for indices in bucket_batches(*lengths(examples), batch_size, None):
        yield collate([examples[i] for i in indices], pad_id, bos_id)


@dataclass
class TrainingSet:
    """The training pairs within data.max_len, read from the prepared id stores when a batch asks:
    in memory are only their lengths and positions, a few bytes a pair."""
    src: IndexedArray  # ids without <eos>, one sequence a training pair of the split
    tgt: IndexedArray
    kept: np.ndarray  # (pairs within max_len,) int32: their indices in the stores
    src_lens: np.ndarray  # (len(kept),) lengths with <eos>, uint16
    tgt_lens: np.ndarray
    eos_id: int

    @classmethod
    def from_stores(cls, src: IndexedArray, tgt: IndexedArray, max_len: int, eos_id: int) -> TrainingSet:
        # Read in chunks into arrays of the final size: memory stays at 8 bytes a pair.
        n, lens_type = len(src), np.uint16 if max_len < 1 << 16 else np.int32
        kept, src_lens, tgt_lens = np.empty(n, np.int32), np.empty(n, lens_type), np.empty(n, lens_type)
        count = 0
        for start in range(0, n, CHUNK):
            src_chunk, tgt_chunk = src.sizes(start, CHUNK) + 1, tgt.sizes(start, CHUNK) + 1  # with <eos>
            within = np.flatnonzero((src_chunk <= max_len) & (tgt_chunk <= max_len))
            end = count + len(within)
            kept[count:end], src_lens[count:end], tgt_lens[count:end] = within + start, src_chunk[within], \
                tgt_chunk[within]
            count = end
        return cls(src, tgt, kept[:count], src_lens[:count], tgt_lens[:count], eos_id)

    def __len__(self) -> int:
        return len(self.kept)

    def examples(self, rows: Sequence[int] | np.ndarray) -> list[Example]:
        """The examples at `rows` (positions among the kept pairs), ids + <eos>."""
        eos = [self.eos_id]
        return [Example(self.src[i].tolist() + eos, self.tgt[i].tolist() + eos) for i in self.kept[rows].tolist()]
