"""What a search may write next: the rules every search keeps, said once.

A sentence's `Rules` hold what its outputs may contain: a prefix (forced first), tokens written
at most once (its number placeholders) and tokens never written (other sentences' placeholders;
digits of the model's own under decode.strict_numbers). Each hypothesis carries a `Progress` that
`Rules.advance` moves on with every token it writes, and `Rules.step` turns it into the step's
`Step`: the tokens it is forced to (or None) and those it is refused. Search applies a step as a
mask over the model's log-probabilities, whatever then picks among them (greedy, beam or
sampling). The length cap is a rule too: at the cap a hypothesis may only end.

Terms that an output must write (glossary terms, strict numbers' placeholders) are rules of their
own (`nmt.inference.text.terms.TermRules`, a kind of `Rules`): the search asks every sentence's
rules the same questions and never names a term."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import ClassVar

import torch


@dataclass(frozen=True)
class Progress:
    """What a hypothesis has written of its sentence's rules (a new one has written nothing)."""
    used: frozenset[int] = frozenset()  # once-only tokens written


@dataclass(frozen=True)
class Step:
    forced: frozenset[int] | None  # the only tokens allowed, or None: any token not refused
    refused: frozenset[int]
    owed: frozenset[int]  # the tokens that would advance a term not yet written (<eos> is refused)
    closing: frozenset[int] = frozenset()  # closers refused while a glossary term is owed

    @cached_property
    def named(self) -> list[int]:
        """The tokens it forces or owes, sorted (a Step is made once for each progress and shared)."""
        return sorted((self.forced or frozenset()) | self.owed)

    @cached_property
    def owed_sorted(self) -> list[int]:
        return sorted(self.owed)


@dataclass(frozen=True)
class Rules:
    prefix: tuple[int, ...] = ()
    once: frozenset[int] = frozenset()
    refused: frozenset[int] = frozenset()
    length_penalty: float | None = None  # its outputs ranked by score / length^this (None: as the search ranks)
    terms: ClassVar[tuple[tuple[int, ...], ...]] = ()  # what an output must write (`TermRules`): none

    def start(self) -> Progress:
        """What a new hypothesis has written of these rules: nothing."""
        return Progress()

    @property
    def least_length(self) -> int:
        """The fewest tokens an output obeying these rules can hold: the length cap's floor."""
        return len(self.prefix)

    def ranking_penalty(self, search_penalty: float) -> float:
        """The exponent its finished outputs are ranked by (score / length^it): its own, else the search's."""
        return search_penalty if self.length_penalty is None else self.length_penalty

    def advance(self, progress: Progress, token: int) -> Progress:
        """`progress` after writing `token`."""
        return dataclasses.replace(progress, used=progress.used | {token}) if token in self.once else progress

    def bank(self, progress: Progress) -> int:
        """How many term pieces a hypothesis has written (`TermRules`): none."""
        return 0

    def forced(self, written: int, room: int, eos_id: int) -> Step | None:
        """What every rule set forces first: its prefix's next token, and at the cap <eos>."""
        if written < len(self.prefix):
            return Step(frozenset({self.prefix[written]}), frozenset(), frozenset())
        return Step(frozenset({eos_id}), frozenset(), frozenset()) if room <= 0 else None

    def step(self, progress: Progress, written: int, room: int, eos_id: int) -> Step | None:
        """The step's rules for a hypothesis that has `written` tokens and `room` left before its cap
        (None: nothing forced or refused, the common case, which costs search nothing)."""
        if (forced := self.forced(written, room, eos_id)) is not None:
            return forced
        if not progress.used:
            return self._unconstrained  # has used nothing: the common case, at no cost
        if (known := self._steps.get(progress.used)) is None:
            known = self._steps[progress.used] = Step(None, self.refused | (self.once & progress.used), frozenset())
        return known

    @cached_property
    def _steps(self) -> dict:
        return {}

    @cached_property
    def _unconstrained(self) -> Step | None:
        """The step of a hypothesis that has used nothing: one object, made once."""
        return Step(None, self.refused, frozenset()) if self.refused else None


NO_RULES = Rules()


def allowed(ids: torch.Tensor, steps: list[Step | None]) -> torch.Tensor | None:
    """Which of each row's candidate tokens `ids` (rows, c) its step allows (None: all of every row).
    Rows forced to, or refused, the same tokens are masked together: under the number rules that is
    nearly all, and a beam's hypotheses that write the same term share its next piece."""
    if all(step is None for step in steps):
        return None
    mask = torch.ones_like(ids, dtype=torch.bool)
    by_forced: dict[frozenset[int], list[int]] = {}
    by_refused: dict[frozenset[int], list[int]] = {}
    for row, step in enumerate(steps):
        if step is None:
            continue
        if step.forced is not None:
            by_forced.setdefault(step.forced, []).append(row)
        elif step.refused:
            by_refused.setdefault(step.refused, []).append(row)
    for forced, rows in by_forced.items():
        index = torch.tensor(rows, device=ids.device)
        mask[index] = _member(ids[index], forced)
    for refused, rows in by_refused.items():
        index = torch.tensor(rows, device=ids.device)
        mask[index] = ~_member(ids[index], refused)
    return mask


def _member(ids: torch.Tensor, tokens: frozenset[int]) -> torch.Tensor:
    """Where `ids` are among `tokens`, read from a table (a step after a glossary term refuses
    thousands of tokens: a lookup costs less than torch.isin against them, and is made once)."""
    table = _table(tokens, ids.device)
    return table[ids.clamp(max=table.shape[0] - 1)]


@lru_cache(maxsize=256)
def _table(tokens: frozenset[int], device: torch.device) -> torch.Tensor:
    """table[id] is True for each of `tokens`; ids past the largest read its last entry, False."""
    table = torch.zeros(max(tokens, default=-1) + 2, dtype=torch.bool, device=device)
    table[token_tensor(tokens, device)] = True
    return table


def token_tensor(tokens: Iterable[int], device: torch.device) -> torch.Tensor:
    """A set of token ids as a tensor (sorted, so the same set gives the same tensor)."""
    return torch.tensor(sorted(tokens), dtype=torch.long, device=device)
