"""The alignment head (model.alignment_head): trained toward the aligner's links beside the
translation model and teaching it nothing; what forced decoding's alignments read."""

import numpy as np
import pytest
import torch
from conftest import TINY
from helpers.linked_pairs import linked_batch, mass_on_links, trained_on

from nmt.config import config_from_dict
from nmt.inference.decoding.search import Specials, forced
from nmt.model import build_model
from nmt.model.loss import batch_loss


def config(decoder: str, head: bool, guided: float = 0.0, lr: float = 0.01):
    return config_from_dict({**TINY, "model": {**TINY["model"], "decoder": decoder, "alignment_head": head},
                             "train": {**TINY["train"], "lr": lr, "guided_alignment": guided}})


@pytest.mark.parametrize("decoder", ["parallel", "stepwise"])
def test_the_head_teaches_the_translation_model_nothing(decoder):
    """The same weights with and without the head: the same logits, and the same gradients on every
    translation parameter from a batch with links (the head's loss reaches the head alone)."""
    sv, tv, batch = linked_batch()
    torch.manual_seed(0)
    with_head = build_model(config(decoder, True, guided=0.5).model, sv, tv)
    without = build_model(config(decoder, False, guided=0.5).model, sv, tv)
    without.load_state_dict({k: v for k, v in with_head.state_dict().items() if not k.startswith("alignment_head.")})
    with_head.eval(), without.eval()  # (no dropout: the two runs draw no masks)
    assert torch.equal(with_head(batch.src, batch.src_lens, batch.tgt_in), without(batch.src, batch.src_lens, batch.tgt_in))
    grads = []
    for model in (with_head, without):
        model.zero_grad()
        batch_loss(model, batch, tv.pad_id, guided_alignment=0.5).backward()
        grads.append({k: p.grad.clone() for k, p in model.named_parameters() if not k.startswith("alignment_head.")})
    assert grads[0].keys() == grads[1].keys()
    assert all(torch.allclose(grads[0][k], grads[1][k], atol=1e-6) for k in grads[0])
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in with_head.alignment_head.parameters())


@pytest.mark.parametrize("decoder", ["parallel", "stepwise"])
def test_the_head_learns_links_its_attention_is_not_pulled_to_and_forced_decoding_reads_it(decoder):
    """Trained on links no model finds on its own (target j to source n-1-j) with guided alignment
    off, the head puts most of its weight on them, and forced decoding's alignment weights are the
    head's; the translation attention was never pulled there."""
    sv, tv, batch = linked_batch()
    model = trained_on(batch, config(decoder, True), sv, tv)
    with torch.no_grad():
        _, attention, aligned = model(batch.src, batch.src_lens, batch.tgt_in, attention=True, tgt_out=batch.tgt_out)
    on_links = {"head": mass_on_links(aligned, batch), "attention": mass_on_links(attention, batch)}
    assert on_links["head"] > 0.8 and on_links["head"] > on_links["attention"] + 0.3, on_links

    outputs = [[x for x in row if x not in (tv.pad_id, tv.eos_id)] for row in batch.tgt_out.tolist()]
    specials = Specials(bos=tv.bos_id, eos=tv.eos_id, banned=None)
    with torch.no_grad():
        found = forced(model, batch.src, batch.src_lens, specials, outputs, scored=False)
    for i, (scores, weights) in enumerate(found):
        n = len(outputs[i]) + 1
        assert scores == [] and weights.shape == (n, int(batch.src_lens[i]))
        assert torch.allclose(weights, aligned[i, :n, : int(batch.src_lens[i])].float(), atol=1e-5)
        assert np.allclose(weights.sum(-1).numpy(), 1.0, atol=1e-5)
