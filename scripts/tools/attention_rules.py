"""The attention scoring rules the seeds teach, as small functions on plain tensors: teaching code
for scripts/tools/attention_walkthrough.py (the model does not import it).

Each takes a query (..., d_q) and keys (..., n, d_k) and returns scores (..., n); `attend`
turns scores into weights and a context vector, exactly as seed 001 does it by hand.
The model's layers in nmt.model.attention compute the same rules batched and masked.
"""

from __future__ import annotations

import math

import torch


def dot(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """<q, k>: seed 001's rule (query and keys of one size)."""
    return (keys @ query.unsqueeze(-1)).squeeze(-1)


def scaled_dot(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """<q, k> / sqrt(d): seed 002's DotProductAttention, which keeps scores in softmax's useful range."""
    return dot(query, keys) / math.sqrt(query.shape[-1])


def general(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """q^T W k, the bilinear ('general') rule; W is (d_q, d_k), so sizes may differ."""
    return dot(query @ W, keys)


def additive(query: torch.Tensor, keys: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor,
             v: torch.Tensor) -> torch.Tensor:
    """v^T tanh(W_q q + W_k k), Bahdanau's MLP rule (seed 002's MLPAttention); W_q (h, d_q), W_k (h, d_k)."""
    return torch.tanh((query @ W_q.T).unsqueeze(-2) + keys @ W_k.T) @ v


def concat(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """v^T tanh(W [q; k]), seed 004's concat rule; W is (h, d_q + d_k)."""
    queries = query.unsqueeze(-2).expand(*keys.shape[:-1], query.shape[-1])
    return torch.tanh(torch.cat((queries, keys), dim=-1) @ W.T) @ v


def attend(scores: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax the scores (..., n) and take the weighted sum of values (..., n, d_v).

    Returns (weights, context); seed 001 calls the context 'the attention vector'.
    """
    weights = scores.softmax(dim=-1)
    return weights, (weights.unsqueeze(-1) * values).sum(dim=-2)


RULES = {"dot": dot, "scaled_dot": scaled_dot, "general": general, "additive": additive, "concat": concat}
