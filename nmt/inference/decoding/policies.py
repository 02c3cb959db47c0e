"""What a search policy sees and decides: the live hypotheses, a step's candidates, and the
interface greedy search, beam search and sampling share (`Policy`), with the plain beam (`Beam`);
and what a search lets its caller's rules add to each step (`Hooks`), which it never names.
The glossary's beam (`nmt.inference.text.steering.ConstrainedBeam`) and sampling's draw
(`nmt.inference.decoding.sampling.Draw`) are policies too, and the glossary's steering is hooks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from nmt.inference.decoding.constraints import Progress, Rules, Step

Candidate = tuple[float, int, int]  # (the score the policy ranks by, beam within its sentence, column)


@dataclass
class Live:
    """One live hypothesis: its tokens, their log-probabilities, its progress through its rules
    and what the steering toward its terms keeps of it (`nmt.inference.text.steering.TermMarks`)."""
    tokens: list[int]
    token_scores: list[float]
    progress: Progress
    marks: Any = field(default=None)


@dataclass
class Turn:
    """What a step of the search holds beyond the scores, for a policy that reads the rules: the
    candidates' token ids (n * k, c), each row's `Step`, the sentence of each group of k rows,
    every sentence's rules and where each row's candidates are tokens it owes (None: none)."""
    ids: torch.Tensor
    steps: list[Step | None]
    alive: list[int]
    rules: Sequence[Rules]
    owed: torch.Tensor | None = None


class Policy(Protocol):
    beam_size: int  # live hypotheses a sentence keeps

    def width(self) -> int | None:
        """How many candidates of each hypothesis a step needs, best first (None: every token, in
        vocabulary order); search adds room for the tokens the rules may refuse."""

    def propose(self, running: torch.Tensor, chosen: torch.Tensor, turn: Turn) -> list[list[Candidate]]:
        """Each sentence's continuations, best first: running (n, k) the live hypotheses' scores
        (-inf: none), chosen (n * k, c) their candidates' masked log-probabilities."""

    def arrange(self, moves: list[tuple[int, int, float]], beams: list[Live], rules: Rules
                ) -> list[tuple[int, int, float, Progress]]:
        """A sentence's continuations that do not end, as (beam, token, log-prob, the hypothesis's
        progress after the token), in the order in which they take its k places (the first k at least)."""


class Beam:
    """Beam search: each sentence keeps its k best hypotheses (k = 1: greedy search)."""

    def __init__(self, beam_size: int):
        self.beam_size = beam_size
        self.candidates = 2 * beam_size  # an <eos> among the k best ends a hypothesis; k others live on

    def width(self) -> int:
        return self.candidates

    def propose(self, running: torch.Tensor, chosen: torch.Tensor, turn: Turn | None = None) -> list[list[Candidate]]:
        n, k = running.shape
        columns = chosen.shape[-1]
        total = (running[:, :, None] + chosen.view(n, k, columns)).view(n, -1)
        top, index = total.topk(min(self.candidates, k * columns), dim=-1)
        return [[(s, i // columns, i % columns) for s, i in zip(scores, indices) if s != float("-inf")]
                for scores, indices in zip(top.tolist(), index.tolist())]

    def arrange(self, moves: list[tuple[int, int, float]], beams: list[Live], rules: Rules
                ) -> list[tuple[int, int, float, Progress]]:
        return advanced(moves[:self.beam_size], beams, rules)  # best first


class Hooks:
    """What a search lets its caller add to every step beyond the rules' mask (as fairseq's search
    takes constraints through init_constraints / update_constraints): the decoder state each row
    reads (`reading`), the candidates' scores after the mask (`steered`, and `owed`, the candidates
    each row owes, for the policy), and what a new hypothesis keeps for the next step (`marks`).
    These hooks add nothing; a search made with a `Steer` gets the caller's own."""
    owed: torch.Tensor | None = None

    def reading(self, state: Any, alive: list[int]) -> Any:
        return state

    def steered(self, chosen: torch.Tensor, running: torch.Tensor, top: torch.Tensor, ids: torch.Tensor,
                eos: torch.Tensor, attention: torch.Tensor, steps: list[Step | None], alive: list[int]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        return chosen, running

    def marks(self, row: int, hyp: Live, log_prob: float, progress: Progress, rules: Rules) -> Any:
        return None


NO_HOOKS = Hooks()
# What makes one search's hooks: its sentences' rules, their source lengths, the padded source
# length, k hypotheses a sentence, each sentence's live hypotheses (the search's own lists) and the device
Steer = Callable[[list[Rules], list[int], int, int, list[list[Live]], torch.device], Hooks]


def advanced(moves: list[tuple[int, int, float]], beams: list[Live], rules: Rules
             ) -> list[tuple[int, int, float, Progress]]:
    """The moves, each with its hypothesis's progress after the token (what a policy's `arrange` returns)."""
    return [(beam, token, log_prob, rules.advance(beams[beam].progress, token)) for beam, token, log_prob in moves]
