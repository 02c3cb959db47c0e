"""The scoring rules on plain tensors, pinned to seed 001's worked numbers and to the model's layers."""

import math

import torch

from scripts.tools import attention_rules as rules
from nmt.model.attention import AdditiveAttention, DotAttention

DEC_HIDDEN_STATE = torch.tensor([5.0, 1, 20])
ANNOTATIONS = torch.tensor([[3.0, 12, 45], [59, 2, 5], [1, 43, 5], [4, 3, 45.3]])  # one row per encoder step


def test_seed_001_walkthrough_numbers():
    assert rules.dot(DEC_HIDDEN_STATE, ANNOTATIONS[0:1]).item() == 927.0  # a single annotation
    scores = rules.dot(DEC_HIDDEN_STATE, ANNOTATIONS)
    assert scores.tolist() == [927.0, 397.0, 148.0, 929.0]
    weights, context = rules.attend(scores, ANNOTATIONS)
    assert torch.allclose(weights, torch.tensor([0.11920292, 0.0, 0.0, 0.88079708]), atol=1e-7)
    applied = weights.unsqueeze(-1) * ANNOTATIONS  # seed 001's "applied attention", by column
    assert torch.allclose(applied[0], torch.tensor([0.35760877, 1.4304351, 5.3641315]), atol=1e-6)
    assert torch.allclose(applied[3], torch.tensor([3.5231883, 2.6423912, 39.900108]), atol=1e-5)
    assert torch.allclose(context, torch.tensor([3.8807971, 4.0728263, 45.264239]), atol=1e-5)


def test_rules_agree_with_each_other_and_the_model_layers():
    torch.manual_seed(0)
    q, keys = torch.randn(2, 6), torch.randn(2, 5, 6)
    assert torch.allclose(rules.scaled_dot(q, keys), rules.dot(q, keys) / math.sqrt(6))
    assert torch.allclose(rules.general(q, keys, torch.eye(6)), rules.dot(q, keys), atol=1e-6)
    W_q, W_k, v = torch.randn(4, 6), torch.randn(4, 6), torch.randn(4)
    # concat with W = [W_q W_k] is the additive rule
    assert torch.allclose(rules.concat(q, keys, torch.cat((W_q, W_k), dim=1), v),
                          rules.additive(q, keys, W_q, W_k, v), atol=1e-5)
    layer = AdditiveAttention(6, 6, 4)
    with torch.no_grad():
        layer.W_q.weight.copy_(W_q)
        layer.W_k.weight.copy_(W_k)
        layer.v.weight.copy_(v[None])
    _, layer_weights = layer(q[:, None], keys, keys)
    rule_weights, _ = rules.attend(rules.additive(q, keys, W_q, W_k, v), keys)
    assert torch.allclose(layer_weights[:, 0], rule_weights, atol=1e-6)
    _, dot_weights = DotAttention(6, 6)(q[:, None], keys, keys)
    assert torch.allclose(dot_weights[:, 0], rules.attend(rules.scaled_dot(q, keys), keys)[0], atol=1e-6)


def test_general_rule_allows_different_sizes():
    scores = rules.general(torch.ones(3), torch.ones(4, 2), torch.ones(3, 2))
    assert scores.tolist() == [6.0, 6.0, 6.0, 6.0]
