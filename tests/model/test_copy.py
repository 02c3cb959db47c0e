"""Copy attention (model.copy_attention): the mixture is the distribution it claims, the cheap
training loss equals cross-entropy on it, every decoder path agrees, and a model that copies
writes tokens it never saw as targets."""

import random

import pytest
import torch
import torch.nn.functional as F

from nmt.config import ModelConfig
from nmt.data.batches import Batch
from nmt.data.vocab import SPECIALS, Vocab
from nmt.inference.search import Sources, Specials, beam_search, greedy
from nmt.model import build_model
from nmt.model.copy import CopyGate, CopyScores, source_to_target_ids
from nmt.model.loss import batch_loss

TARGET = Vocab(list(SPECIALS) + [f"w{i}" for i in range(12)])
SOURCE = Vocab(list(SPECIALS) + [f"w{i}" for i in range(0, 20, 2)])  # w12..w18: no target id


def _scores(rows=5, src_len=6) -> tuple[CopyScores, torch.Tensor]:
    torch.manual_seed(0)
    gate = CopyGate(4, 3, SOURCE, TARGET)
    logits = torch.randn(rows, len(TARGET), requires_grad=True)
    src = torch.randint(0, len(SOURCE), (rows, src_len))
    src[0, :3] = SOURCE.stoi["w2"]  # one id at several positions
    src[1, 0] = SOURCE.stoi["w14"]  # one the target cannot write
    weights = torch.rand(rows, src_len).softmax(-1)
    return gate(logits, torch.randn(rows, 4), torch.randn(rows, 3), weights, gate.copy_ids(src)), logits


def test_source_tokens_map_to_the_same_target_string_and_specials_to_none():
    ids = source_to_target_ids(SOURCE, TARGET)
    assert ids[SOURCE.stoi["w4"]] == TARGET.stoi["w4"]
    assert ids[SOURCE.stoi["w14"]] == len(TARGET)  # not in the target vocabulary
    assert all(ids[SOURCE.stoi[s]] == len(TARGET) for s in SPECIALS)


def test_log_probs_are_the_gated_mixture_renormalized_over_what_can_be_copied():
    scores, logits = _scores()
    p = torch.sigmoid(scores.gate)
    copied = torch.zeros(5, len(TARGET) + 1).scatter_add(1, scores.copy_ids, scores.weights)
    kept = copied[:, :-1].sum(-1, keepdim=True)
    expected = (p * logits.softmax(-1) + (1 - p) * copied[:, :-1]) / (p + (1 - p) * kept)
    assert torch.allclose(scores.log_probs().exp(), expected, atol=1e-6)
    assert kept[1] < 1 and torch.allclose(scores.log_probs().exp().sum(-1), torch.ones(5))


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_training_loss_equals_cross_entropy_on_the_full_distribution(label_smoothing):
    scores, logits = _scores()
    targets = torch.tensor([TARGET.stoi["w2"], 6, 7, TARGET.unk_id, 10])
    cheap = scores.cross_entropy(targets, label_smoothing)
    full = F.cross_entropy(scores.log_probs(), targets, reduction="sum", label_smoothing=label_smoothing)
    assert torch.allclose(cheap, full, rtol=1e-5)
    cheap_grad, = torch.autograd.grad(cheap, logits, retain_graph=True)
    full_grad, = torch.autograd.grad(full, logits)
    assert torch.allclose(cheap_grad, full_grad, atol=1e-6)


def _model(**options):
    torch.manual_seed(0)
    sizes = dict(embed_size=16, hidden_size=16, num_layers=2, copy_attention=True) | options
    return build_model(ModelConfig(**sizes), TARGET, TARGET).eval()


BATCH = Batch(torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0], [9, 10, 2, 0]]), torch.tensor([4, 2, 3]),
              torch.tensor([[1, 9, 10, 11], [1, 12, 0, 0], [1, 13, 14, 0]]),
              torch.tensor([[9, 10, 11, 2], [12, 2, 0, 0], [13, 14, 2, 0]]), num_tokens=9)
OPTIONS = dict(bidirectional=True, input_feeding=True, tie_embeddings=True)


def test_teacher_forcing_equals_step_by_step_decoding_and_the_loss_uses_it():
    model = _model(**OPTIONS)
    full = model(BATCH.src, BATCH.src_lens, BATCH.tgt_in)  # (batch, tgt_len, vocab) log P
    state = model.encode(BATCH.src, BATCH.src_lens)
    for t in range(BATCH.tgt_in.shape[1]):
        log_probs, state, _ = model.decode_step(BATCH.tgt_in[:, t], state)
        assert torch.allclose(log_probs, full[:, t], atol=1e-5)
    mask = BATCH.tgt_out != TARGET.pad_id
    expected = -full.gather(2, BATCH.tgt_out[..., None]).squeeze(-1)[mask].sum()
    assert torch.allclose(batch_loss(model, BATCH, TARGET.pad_id), expected, rtol=1e-5)


def test_a_copying_model_writes_tokens_it_never_saw_as_targets():
    """Sources `w0 w1 X w2 <eos>` translate to `X <eos>`. Trained on 19 values of X, the model
    with copy attention writes the 10 it never saw (greedy and beam search); without it, none."""
    vocab = Vocab(list(SPECIALS) + [f"w{i}" for i in range(30)])
    seen, unseen = list(range(5, 24)), list(range(24, 34))

    def batch(xs):
        src = torch.tensor([[4, 5, x, 6, 2] for x in xs])
        return src, torch.full((len(xs),), 5), torch.tensor([[1, x] for x in xs]), torch.tensor([[x, 2] for x in xs])

    for copy in (False, True):
        torch.manual_seed(0)
        rng = random.Random(0)
        model = build_model(ModelConfig(embed_size=32, hidden_size=32, num_layers=1, bidirectional=True,
                                        input_feeding=True, tie_embeddings=True, copy_attention=copy),
                            vocab, vocab)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(300):
            src, src_lens, tgt_in, tgt_out = batch([rng.choice(seen) for _ in range(32)])
            loss = batch_loss(model, Batch(src, src_lens, tgt_in, tgt_out, num_tokens=64), vocab.pad_id)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        assert loss.item() / 64 < 0.05  # both learn the training pairs
        model.eval()
        src, src_lens, _, _ = batch(unseen)
        caps = torch.full((len(unseen),), 3)
        with torch.inference_mode():
            given, target_ids = Sources(src, src_lens, caps), Specials(1, 2)
            greedy_out = [h.tokens for h in greedy(model, given, target_ids)]
            beam_out = [hyps[0].tokens for hyps in beam_search(model, given, target_ids, beam_size=3)]
        wanted = [[x] for x in unseen]
        copied = sum(out == want for out, want in zip(greedy_out, wanted))
        assert copied == len(unseen) if copy else copied == 0, greedy_out
        if copy:
            assert beam_out == wanted
