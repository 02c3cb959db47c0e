"""Ensembles: several models that share a tokenizer and vocabularies decode as one.

At every step each model scores the next token from its own state, and search ranks the tokens
by the weighted mean of their log-probabilities (as OpenNMT-py and Marian combine; fairseq's log
of the mean probability lost: docs/results.md). An `Ensemble` offers search what a model offers (`encode`
and `candidates`), so greedy and beam search, n-best lists, prefixes, number rules, forced
scoring and the attention view work unchanged, with either engine behind each member.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from nmt.model.seq2seq import ranked, with_named


@dataclass(frozen=True)
class EnsembleState:
    parts: tuple  # one decoder state per member

    def select(self, index: torch.Tensor, same_sources: bool = False) -> EnsembleState:
        return EnsembleState(tuple(part.select(index, same_sources) for part in self.parts))

    def reading(self, src_mask: torch.Tensor) -> EnsembleState:
        return EnsembleState(tuple(part.reading(src_mask) for part in self.parts))


class Ensemble:
    def __init__(self, models: Sequence, weights: Sequence[float] | None = None):
        weights = list(weights) if weights else [1.0] * len(models)
        total = sum(weights)
        self.models = list(models)
        self.weights = [w / total for w in weights]
        self.weight_column = torch.tensor(self.weights)[:, None, None]  # (models, 1, 1): made once, not each step

    def encode(self, src: torch.Tensor, src_lens: torch.Tensor) -> EnsembleState:
        return EnsembleState(tuple(model.encode(src, src_lens) for model in self.models))

    def candidates(self, prev_ids: torch.Tensor, state: EnsembleState, k: int | None, banned_id: int | None, eos_id: int,
                   also: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, EnsembleState, torch.Tensor]:
        """`Seq2Seq.candidates` of the combined distribution; the attention is the members' weighted
        mean (each member's weights sum to 1 over the source, so the mean does too)."""
        log_probs, states, attention = [], [], None
        for model, part, weight in zip(self.models, state.parts, self.weights):
            # each member's whole distribution, in vocabulary order, from either engine
            lp, _, _, new, weights = model.candidates(prev_ids, part, None, banned_id, eos_id)
            log_probs.append(lp.float())
            states.append(new)
            attention = weight * weights.float() if attention is None else attention + weight * weights.float()
        stacked = torch.stack(log_probs)  # (models, rows, vocab)
        # (a banned token's -inf times a weight stays -inf; 0 * -inf never happens: weights > 0)
        combined = (stacked * self.weight_column.to(stacked.device)).sum(0)
        top, ids = with_named(*ranked(combined, k), combined, also)
        return top, ids, combined[:, eos_id], EnsembleState(tuple(states)), attention
