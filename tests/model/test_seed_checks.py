"""The numbers and shapes the seed documents print, reproduced with nmt's own components."""

import torch

from nmt.data.vocab import SPECIALS, Vocab
from nmt.model import build_model
from nmt.model.attention import AdditiveAttention, DotAttention, dot_scores, masked_softmax
from nmt.model.decoder import Decoder
from nmt.model.encoder import Encoder
from conftest import seed_model


def test_masked_softmax_zeroes_padding():
    weights = masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3]))
    assert torch.allclose(weights.sum(-1), torch.ones(2, 2))
    assert (weights[0, :, 2:] == 0).all() and (weights[1, :, 3:] == 0).all()
    assert (weights[0, :, :2] > 0).all()


def _seed_002_inputs():
    keys = torch.ones(2, 10, 2)
    values = torch.arange(40, dtype=torch.float).view(1, 10, 4).repeat(2, 1, 1)
    return torch.ones(2, 1, 2), keys, values, torch.tensor([2, 6])


def test_seed_002_dot_attention_example():
    query, keys, values, valid = _seed_002_inputs()
    context, weights = DotAttention(2, 2)(query, keys, values, valid)
    assert torch.allclose(context, torch.tensor([[[2.0, 3, 4, 5]], [[10.0, 11, 12, 13]]]))
    assert torch.allclose(weights[0, 0, :2], torch.full((2,), 0.5))
    assert torch.allclose(weights[1, 0, :6], torch.full((6,), 1 / 6))


def test_seed_002_mlp_attention_example():
    query, keys, values, valid = _seed_002_inputs()
    context, _ = AdditiveAttention(2, 2, units=8)(query, keys, values, valid)
    # identical keys get identical scores, so MLP attention matches dot attention here
    assert torch.allclose(context, torch.tensor([[[2.0, 3, 4, 5]], [[10.0, 11, 12, 13]]]), atol=1e-5)


def test_seed_001_scores_weights_and_context():
    dec_hidden_state = torch.tensor([[[5.0, 1, 20]]])  # (batch 1, 1 query, 3)
    annotations = torch.tensor([[[3.0, 12, 45], [59, 2, 5], [1, 43, 5], [4, 3, 45.3]]])  # (1, 4 keys, 3)
    scores = dot_scores(dec_hidden_state, annotations)
    assert torch.allclose(scores, torch.tensor([[[927.0, 397, 148, 929]]]))
    weights = masked_softmax(scores)
    assert torch.allclose(weights, torch.tensor([[[0.119203, 0, 0, 0.880797]]]), atol=1e-6)
    context = torch.bmm(weights, annotations)
    assert torch.allclose(context, torch.tensor([[[3.8808, 4.0728, 45.2642]]]), atol=1e-4)


def test_seed_002_shapes():
    # batch 4, length 7, embed 8, hidden 16, 2 layers, vocab 10; nmt is batch-first, so the
    # encoder output the seed prints as (7, 4, 16) is (4, 7, 16) here.
    seed = seed_model(embed_size=8, hidden_size=16, num_layers=2)
    encoder, decoder = Encoder(10, seed), Decoder(10, seed)
    X = torch.zeros(4, 7, dtype=torch.long)
    outputs, (h, c) = encoder(X)
    assert outputs.shape == (4, 7, 16) and h.shape == (2, 4, 16) and c.shape == (2, 4, 16)
    state = decoder.init_state(outputs, (h, c), torch.ones(4, 7, dtype=torch.bool))
    hidden, state, weights = decoder.teacher_forced(decoder.embed(X), state)  # the seed's decoder(X, state)
    logits = decoder.scored(hidden)
    assert logits.shape == (4, 7, 10)
    assert state.memory.shape == (4, 7, 16) and state.hidden[0].shape == (2, 4, 16)
    assert weights.shape == (4, 7, 7)


def test_model_built_from_config_has_the_seed_layout():
    vocab = Vocab(list(SPECIALS) + [f"w{i}" for i in range(6)])
    model = build_model(seed_model(embed_size=8, hidden_size=16, num_layers=2), vocab, vocab)
    assert model.decoder.rnn.input_size == 8 + 16  # [context; embedding]
    assert model.decoder.out.out_features == 10
    assert isinstance(model.decoder.attention, AdditiveAttention)
