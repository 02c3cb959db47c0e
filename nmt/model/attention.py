"""Attention over encoder outputs (seed 002): masked softmax, additive (MLP) and scaled dot-product.

Both modules split the work into `prepare_keys`, done once per batch, and `forward`, done once
per decoder step, so the key projection is never recomputed inside the decoding loop.
"""

from __future__ import annotations

import math

import torch
from torch import nn

MASK_VALUE = -1e6  # seed 002's fill value: exp() of it is 0 in float32


def sequence_mask(valid_lens: torch.Tensor, max_len: int) -> torch.Tensor:
    """(batch,) lengths -> (batch, max_len) bool, True where the position is real, not padding."""
    return torch.arange(max_len, device=valid_lens.device)[None, :] < valid_lens[:, None]


def masked_softmax(scores: torch.Tensor, valid_lens: torch.Tensor | None = None,
                   mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis of (batch, queries, keys) that ignores keys past `valid_lens`.

    `valid_lens` is (batch,) or (batch, queries); alternatively pass a (batch, keys) bool `mask`.
    """
    if valid_lens is None and mask is None:
        return scores.softmax(dim=-1)
    if mask is None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(scores.shape[:2])
        mask = torch.arange(scores.shape[-1], device=scores.device) < lens[..., None]
    else:
        mask = mask[:, None, :]
    return scores.masked_fill(~mask, MASK_VALUE).softmax(dim=-1)


def dot_scores(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Unscaled dot-product scores (seed 001): (batch, queries, d) x (batch, keys, d) -> (batch, queries, keys)."""
    return torch.bmm(query, keys.transpose(1, 2))


class AdditiveAttention(nn.Module):
    """Bahdanau's MLP score v^T tanh(W_q q + W_k k), seed 002's MLPAttention."""

    def __init__(self, query_size: int, key_size: int, units: int, dropout: float = 0.0):
        super().__init__()
        self.W_q = nn.Linear(query_size, units, bias=False)
        self.W_k = nn.Linear(key_size, units, bias=False)
        self.v = nn.Linear(units, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def prepare_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return self.W_k(keys)  # (batch, keys, units)

    def forward(self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                valid_lens: torch.Tensor | None = None, *, mask: torch.Tensor | None = None,
                prepared_keys: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """query (batch, queries, q), keys (batch, keys, k), values (batch, keys, v)
        -> context (batch, queries, v), weights (batch, queries, keys)."""
        proj_keys = self.prepare_keys(keys) if prepared_keys is None else prepared_keys
        features = torch.tanh(self.W_q(query).unsqueeze(2) + proj_keys.unsqueeze(1))
        scores = self.v(features).squeeze(-1)  # (batch, queries, keys)
        weights = masked_softmax(scores, valid_lens, mask)
        return torch.bmm(self.dropout(weights), values), weights


class DotAttention(nn.Module):
    """Scaled dot-product score <q, k> / sqrt(d); queries and keys must have the same size."""

    def __init__(self, query_size: int, key_size: int, units: int = 0, dropout: float = 0.0):
        super().__init__()
        if query_size != key_size:
            raise ValueError(f"dot attention needs query size == key size ({query_size} != {key_size})")
        self.dropout = nn.Dropout(dropout)

    def prepare_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return keys

    def forward(self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                valid_lens: torch.Tensor | None = None, *, mask: torch.Tensor | None = None,
                prepared_keys: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        scores = dot_scores(query, keys) / math.sqrt(query.shape[-1])
        weights = masked_softmax(scores, valid_lens, mask)
        return torch.bmm(self.dropout(weights), values), weights


ATTENTION = {"additive": AdditiveAttention, "dot": DotAttention}
