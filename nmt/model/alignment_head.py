"""An alignment head (`model.alignment_head`): word alignment read from a layer trained for it,
not from the attention that translates.

The decoder's attention at a position is computed before the word there is written: it reads
the source for the next word, so its most-read source word is often the one the word after
translates (an article's step reads the noun: `<b>Koalas</b>` -> `<b>Les</b> koalas`), and on
sentences unlike the training's it spreads. Garg et al. (2019, "Jointly Learning to Align and
Translate") train a separate attention toward an aligner's links and query it with the whole
target known; here the head's query is the decoder's output at a position together with the
embedding of the word written there, so it asks "which source word does *this* word translate",
and its additive attention over the encoder's outputs is trained by cross-entropy against
eflomal's links (the targets guided alignment uses, `nmt.model.loss.alignment_loss`).

Its inputs are detached: the head learns from the translation model and teaches it nothing, so
a run with it translates as one without (the same weights up to the steps the head's time
costs; its gradients are clipped apart, `translation_and_head_parameters`). Alignment with a
given output (`--align`, `--markup`, the page) is then one teacher-forced pass (`aligned`).
"""

from __future__ import annotations

import torch
from torch import nn

from nmt.model.attention import AdditiveAttention


class AlignmentHead(nn.Module):
    def __init__(self, hidden_size: int, embed_size: int):
        super().__init__()
        self.attention = AdditiveAttention(hidden_size + embed_size, hidden_size, hidden_size)

    def forward(self, outputs: torch.Tensor, written: torch.Tensor, memory: torch.Tensor,
                src_mask: torch.Tensor) -> torch.Tensor:
        """outputs (batch, tgt_len, hidden): the decoder's at each position; written (batch,
        tgt_len, embed): the embedding of the token written there; memory (batch, src_len, hidden)
        -> alignment weights (batch, tgt_len, src_len), each row a distribution over the source."""
        query = torch.cat((outputs, written), dim=-1).detach()
        memory = memory.detach()
        _, weights = self.attention(query, memory, memory, mask=src_mask)
        return weights


def translation_and_head_parameters(model: nn.Module) -> list[list[nn.Parameter]]:
    """The model's parameters in the groups clipped apart: the translation model's, and the
    alignment head's where there is one (its gradients must not scale the model's)."""
    model_params, head_params = [], []
    for name, param in model.named_parameters():
        (head_params if "alignment_head." in name else model_params).append(param)
    return [group for group in (model_params, head_params) if group]
