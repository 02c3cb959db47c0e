"""Sampling: each next token drawn from the model's distribution instead of taken as its best,
optionally sharpened or flattened (temperature), cut to the k most likely tokens (top-k) or to the
smallest set holding probability p (top-p, nucleus sampling), reproducibly from a seed. The
back-translations of Edunov et al. 2018 are made this way (fairseq's --sampling, OpenNMT-py's
random_sampling_topk/topp/temp, Marian's --output-sampling)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.errors import NmtError
from nmt.inference.decoding.constraints import Progress, Rules
from nmt.inference.decoding.policies import Live, Steer, advanced
from nmt.inference.decoding.search import Hypothesis, Sources, Specials, search
from nmt.model import Seq2Seq


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
    """The search policy of sampling: each hypothesis's next token drawn from what the rules allow
    of its distribution, tempered and cut (k = 1: every sample is its own hypothesis)."""
    beam_size = 1

    def __init__(self, sampling: Sampling, device: torch.device):
        self.sampling = sampling
        self.generator = torch.Generator(device=device).manual_seed(sampling.seed)

    def width(self) -> int | None:
        """top-k alone needs only the k best; top-p the whole vocabulary, ranked here; no cut the
        whole vocabulary in any order."""
        return self.sampling.top_k if self.sampling.top_k and self.sampling.top_p == 1 else None

    def propose(self, running: torch.Tensor, chosen: torch.Tensor, turn: object = None
                ) -> list[list[tuple[float, int, int]]]:
        order = None
        if self.sampling.top_k or self.sampling.top_p < 1:  # a cut counts allowed tokens only, best first
            chosen, order = chosen.sort(dim=-1, descending=True, stable=True)
        column = draw_one(truncated(chosen, self.sampling), self.generator)
        if order is not None:
            column = order.gather(1, column)
        return [[(score, 0, c)] for score, c in zip(running[:, 0].tolist(), column[:, 0].tolist())]

    def arrange(self, moves: list[tuple[int, int, float]], beams: list[Live], rules: Rules
                ) -> list[tuple[int, int, float, Progress]]:
        return advanced(moves, beams, rules)  # one a sample: what was drawn


def samples(model: Seq2Seq, sources: Sources, specials: Specials, n: int, sampling: Sampling,
            length_penalty: float = 1.0, steer: Steer | None = None) -> list[list[Hypothesis]]:
    """`n` samples of each source, best first by their score (the model's own log-probabilities,
    untempered and uncut, <eos> last, normalized as `search` does): the batch repeated n times, drawn
    at once from one generator seeded with `sampling.seed`, so the same batch draws the same samples again;
    `steer`: the search's hooks (`search`)."""
    drawn = search(model, sources.repeated(n), specials, Draw(sampling, sources.ids.device), length_penalty, 1, steer)
    return [sorted((h for hyps in drawn[i * n:(i + 1) * n] for h in hyps), key=lambda h: h.normalized, reverse=True)
            for i in range(sources.ids.shape[0])]
