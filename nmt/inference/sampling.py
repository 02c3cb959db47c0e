"""Sampling: each next token drawn from the model's distribution instead of taken as its best,
optionally sharpened or flattened (temperature), cut to the k most likely tokens (top-k) or to the
smallest set holding probability p (top-p, nucleus sampling), reproducibly from a seed. The
back-translations of Edunov et al. 2018 are made this way (fairseq's --sampling, OpenNMT-py's
random_sampling_topk/topp/temp, Marian's --output-sampling)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from nmt.data.protected_numbers import SpanRule
from nmt.errors import NmtError
from nmt.inference.search import EVERY, Hypothesis, greedy, hypothesis
from nmt.model import Seq2Seq
from nmt.model.seq2seq import UNRANKED


@dataclass(frozen=True)
class Sampling:
    top_k: int = 0  # 0: no cut; 1 is greedy search
    top_p: float = 1.0  # 1: no cut
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.top_k < 0:
            raise NmtError(f"--top-k must be 0 (no cut) or more (got {self.top_k})")
        if not 0 < self.top_p <= 1:
            raise NmtError(f"--top-p must be in (0, 1] (got {self.top_p})")
        if not self.temperature > 0:
            raise NmtError(f"--temperature must be positive (got {self.temperature})")


def truncated(log_probs: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """The distribution to draw from, as probabilities, from rows of log-probabilities (-inf where
    a token may not be written; sorted best first where there is a cut): tempered, then cut to the
    top k and to the smallest set whose probability reaches top_p (which always keeps the best token)."""
    tempered = log_probs / sampling.temperature
    if sampling.top_k:
        tempered[:, sampling.top_k:] = float("-inf")
    probs = tempered.softmax(-1)
    if sampling.top_p < 1:
        before = probs.cumsum(-1) - probs  # probability of the tokens ranked above each one
        probs = probs.masked_fill(before >= sampling.top_p, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def _allowed(ids: torch.Tensor, spans: SpanRule | None, rows: list[int], outputs: list[list[int]],
             rooms: list[int]) -> torch.Tensor | None:
    """Which candidates each row may write under the number rules (None: every one): the rules'
    few tokens per row are marked in a (rows, vocabulary) table, read back at the candidates' ids."""
    if spans is None:
        return None
    size = int(ids.max()) + 1
    table = torch.ones(len(rows), size, dtype=torch.bool)
    must_rows, must, refused = [], ([], []), ([], [])  # rows, and (row, token) pairs
    for i, row in enumerate(rows):
        if tokens := spans.must_place(row, outputs[row], rooms[i]):
            must_rows.append(i)
            pairs = must
        else:
            tokens, pairs = spans.refused(row, outputs[row]), refused
        tokens = [t for t in tokens if t < size]  # the others are no candidate of this step
        pairs[0].extend([i] * len(tokens))
        pairs[1].extend(tokens)
    table[refused] = False
    table[must_rows] = False
    table[must] = True
    return table.to(ids.device).gather(1, ids)


def draw_one(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One index per row drawn from rows of probabilities (summing to 1) by inverting their running
    sum with one uniform number a row: torch.multinomial draws an exponential number for every
    entry, which over a whole vocabulary cost more than the decoder's step. A token whose share is
    below the sum's float precision (~1e-7) is never drawn; one of probability 0 never is."""
    cumulative = probs.cumsum(-1)
    total = cumulative[:, -1:]
    u = torch.rand(total.shape, generator=generator, device=probs.device, dtype=probs.dtype) * total
    u = torch.minimum(u, total.nextafter(torch.zeros_like(total)))  # strictly below the total
    return torch.searchsorted(cumulative, u, right=True)


class Draw:
    """greedy's `Chooser` for sampling: each row's next token drawn from its allowed candidates."""

    def __init__(self, sampling: Sampling, device: torch.device):
        self.sampling = sampling
        self.generator = torch.Generator(device=device).manual_seed(sampling.seed)

    def width(self, spans: SpanRule | None) -> int:
        """top-k alone needs only the k best, and as many as the number rules can refuse besides;
        top-p the whole vocabulary ranked; no cut the whole vocabulary in any order."""
        if self.sampling.top_p < 1:
            return EVERY
        if self.sampling.top_k:
            return self.sampling.top_k + (spans.blockable if spans else 0)
        return UNRANKED

    def __call__(self, top: torch.Tensor, ids: torch.Tensor, rows: list[int], outputs: list[list[int]],
                 rooms: list[int], spans: SpanRule | None, prefixes: list[list[int]] | None) -> torch.Tensor:
        allowed = _allowed(ids, spans, rows, outputs, rooms)
        candidates = top.float()
        order = None
        if allowed is not None:
            candidates = candidates.masked_fill(~allowed, float("-inf"))
            if self.sampling.top_k:  # the allowed tokens first, still best first, so that top-k counts only those
                order = (~allowed).to(torch.int8).argsort(dim=-1, stable=True)
                candidates = candidates.gather(1, order)
        column = draw_one(truncated(candidates, self.sampling), self.generator)
        if order is not None:
            column = order.gather(1, column)
        for i, row in enumerate(rows):
            if prefixes is not None and len(outputs[row]) < len(prefixes[row]):  # given, not drawn
                column[i, 0] = int((ids[i] == prefixes[row][len(outputs[row])]).nonzero()[0, 0])
        return column


def sample(model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor, bos_id: int, eos_id: int,
           max_lens: torch.Tensor, sampling: Sampling, banned_id: int | None = None,
           scores: list[list[float]] | None = None, spans: SpanRule | None = None,
           prefixes: list[list[int]] | None = None) -> list[list[int]]:
    """Draw each row's tokens until <eos> or its length cap: `greedy`'s loop (the same arguments
    and outputs, number rules and prefixes) with each token drawn; `scores` gets each drawn token's
    log-probability under the model itself (untempered, uncut), <eos> last. The rows draw from one
    generator seeded with `sampling.seed`, so the same batch draws the same samples again."""
    return greedy(model, src, src_lens, bos_id, eos_id, max_lens, banned_id=banned_id, scores=scores, spans=spans,
                  prefixes=prefixes, choose=Draw(sampling, src.device))[0]


def samples(model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor, bos_id: int, eos_id: int,
            max_lens: torch.Tensor, n: int, sampling: Sampling, banned_id: int | None, spans: SpanRule | None,
            prefixes: list[list[int]] | None, length_penalty: float) -> list[list[Hypothesis]]:
    """`n` samples of each row, best first by their score: the batch repeated n times, drawn at once."""
    rows = torch.arange(src.shape[0], device=src.device).repeat_interleave(n)
    if spans is not None:
        spans = dataclasses.replace(spans, counts=[c for c in spans.counts for _ in range(n)])
    repeated = None if prefixes is None else [p for p in prefixes for _ in range(n)]
    scores: list[list[float]] = []
    outputs = sample(model, src[rows], src_lens[rows], bos_id, eos_id, max_lens[rows], sampling, banned_id, scores,
                     spans, repeated)
    drawn = [hypothesis(o, sum(s), length_penalty, s) for o, s in zip(outputs, scores)]
    return [sorted(drawn[i * n:(i + 1) * n], key=lambda h: h.normalized, reverse=True) for i in range(src.shape[0])]
