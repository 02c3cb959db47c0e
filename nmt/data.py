"""From token lists to padded tensors: length filtering, bucketing by length, batches."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from nmt.corpus import Pair
from nmt.runtime import to_device
from nmt.tokenizer import Tokenizer
from nmt.vocab import Vocab


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
    return (tokenizer.source_tokens([p.raw[0] for p in pairs]),
            tokenizer.target_tokens([p.raw[1] for p in pairs]))


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


def bucket_batches(examples: Sequence[Example], batch_size: int, rng: random.Random | None,
                   batch_tokens: int = 0) -> list[list[int]]:
    """Index lists of examples of similar lengths, so batches carry little padding: `batch_size`
    examples each, or with `batch_tokens`, as many as fit that many padded target tokens
    (rows x longest target), as Joey NMT's and fairseq's token batches do.

    With `rng`, equal-length examples are shuffled before sorting and the batch order is
    shuffled, so every epoch sees new batches; without it the order is fixed. The number of
    batches depends on the lengths alone, never on the shuffle.
    """
    order = list(range(len(examples)))
    if rng is not None:
        rng.shuffle(order)
    order.sort(key=lambda i: (len(examples[i].src), len(examples[i].tgt)))  # stable: keeps the shuffle
    if batch_tokens:
        batches = token_batches(order, [len(ex.tgt) for ex in examples], batch_tokens)
    else:
        batches = [order[i: i + batch_size] for i in range(0, len(order), batch_size)]
    if rng is not None:
        rng.shuffle(batches)
    return batches


def token_batches(order: Sequence[int], tgt_lens: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Cut `order` into runs whose rows x longest target stays within `batch_tokens` (at least one row)."""
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        if current and (len(current) + 1) * max(longest, tgt_lens[i]) > batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, tgt_lens[i])
    if current:
        batches.append(current)
    return batches


def iterate_batches(examples: Sequence[Example], batch_size: int, pad_id: int, bos_id: int,
                    rng: random.Random | None = None) -> Iterator[Batch]:
    for indices in bucket_batches(examples, batch_size, rng):
        yield collate([examples[i] for i in indices], pad_id, bos_id)
