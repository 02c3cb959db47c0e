"""A handful of toy pairs and links no model finds on its own: what the tests of guided alignment
and the alignment head train toward."""

import numpy as np
import torch

from nmt.data.batches import Batch, Example, collate, encode_pairs
from nmt.data.corpus import Pair
from nmt.data.vocab import Vocab
from nmt.model import build_model
from nmt.training.loop import train_step

HANDFUL = [("go now .", "va maintenant !"), ("he is calm .", "il est calme ."), ("i am home .", "je suis chez moi ."),
           ("we see a big red boat .", "nous voyons un grand bateau rouge ."), ("wait here !", "attends ici !")]


def reversed_links(example: Example) -> np.ndarray:
    """Target piece j to source piece n-1-j (clamped): an alignment no model finds on its own."""
    n_src, n_tgt = len(example.src) - 1, len(example.tgt) - 1
    return np.array([[max(0, n_src - 1 - j), j] for j in range(n_tgt)])


def linked_batch() -> tuple[Vocab, Vocab, Batch]:
    """The handful's vocabularies and one batch of it carrying the reversed links."""
    pairs = [Pair(en.split(), fr.split()) for en, fr in HANDFUL]
    sv, tv = Vocab.build((p.src for p in pairs), 1), Vocab.build((p.tgt for p in pairs), 1)
    examples = [Example(ex.src, ex.tgt, reversed_links(ex)) for ex in encode_pairs(pairs, sv, tv)]
    return sv, tv, collate(examples, tv.pad_id, tv.bos_id)


def trained_on(batch: Batch, cfg, sv: Vocab, tv: Vocab, steps: int = 80) -> torch.nn.Module:
    """A model of `cfg` (seed 0) after `steps` training steps on `batch`, in eval mode."""
    torch.manual_seed(0)
    model = build_model(cfg.model, sv, tv)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
    for _ in range(steps):
        train_step(model, [batch], optimizer, cfg, tv.pad_id)
    return model.eval()


def mass_on_links(weights: torch.Tensor, batch: Batch) -> float:
    """The mean share of `weights` (batch, tgt_len, src_len) on the batch's links, over linked positions."""
    linked = batch.alignment.sum(-1) > 0
    return (weights * batch.alignment).sum(-1)[linked].mean().item()
