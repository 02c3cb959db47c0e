"""Copy attention: the decoder may write a source token by pointing at it (See et al., 2017's
pointer-generator; OpenNMT-py's `copy_attn`).

At each step a gate p = sigmoid(w . [output; embedding] + b) mixes two distributions over the
target vocabulary: the softmax of the output projection, and the attention weights moved onto
the target ids of the source tokens they rest on:

    P(y) = p * softmax(logits)[y] + (1 - p) * sum of attention over source positions holding y

A source token reaches the target side when the target vocabulary writes it the same way (with
`data.split_digits`, every digit; with subwords, most pieces of a name). Those it lacks and the
specials point at a column that is dropped, so their share is renormalized away.

The result is returned as log-probabilities, which callers treat as logits: cross-entropy and
beam search take log_softmax of them, which leaves a normalized distribution unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nmt.data.vocab import SPECIALS, Vocab

# Copy probabilities below this are treated as this (log of 0 has no gradient); far below any
# probability a decoder acts on.
MIN_PROBABILITY = 1e-30


def source_to_target_ids(src_vocab: Vocab, tgt_vocab: Vocab) -> torch.Tensor:
    """(len(src_vocab),): each source token's target id if the target vocabulary has the same
    string, else len(tgt_vocab) (the dropped column). Specials are never copied."""
    missing = len(tgt_vocab)
    ids = [missing if token in SPECIALS else tgt_vocab.stoi.get(token, missing) for token in src_vocab.itos]
    return torch.tensor(ids, dtype=torch.long)


@dataclass
class CopyScores:
    """What the output layer gives per row with copy attention, before any (rows, vocab) mixture
    is built: training needs only the targets' probabilities, decoding the whole distribution."""
    logits: torch.Tensor  # (rows, vocab) the output projection's
    gate: torch.Tensor  # (rows, 1) log(p / (1 - p)), p the share of generating, fp32
    weights: torch.Tensor  # (rows, src_len) attention, fp32
    copy_ids: torch.Tensor  # (rows, src_len) target id of each source position (vocab: none)

    def source_ids(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per source position (rows, src_len): its target id (0 where it has none), whether it
        is the first position of a copyable id (each id counts once), and the attention on its
        id, summed over the positions that hold it."""
        same = self.copy_ids[:, :, None] == self.copy_ids[:, None, :]  # (rows, src_len, src_len)
        first = (same.tril(-1).sum(-1) == 0) & (self.copy_ids < self.logits.shape[-1])
        return self.copy_ids.where(first, 0), first, (self.weights[:, None, :] * same).sum(-1)

    def log_probs(self) -> torch.Tensor:
        """log P (rows, vocab): the mixture, renormalized over what can be copied.

        Built without a second (rows, vocab) distribution: with p the gate and Z the softmax's
        normalizer, only the logits of the ids the source holds change, each l to
        log(e^l + (1 - p) / p * m * Z) for its attention mass m; the softmax of the result is P."""
        logits = self.logits.float()
        ids, first, mass = self.source_ids()
        current = logits.gather(1, ids)
        raised = torch.logaddexp(current, log(mass) - self.gate + logits.logsumexp(-1, keepdim=True))
        change = torch.zeros_like(logits).scatter_add(1, ids, (raised - current).where(first, 0.0))
        return (logits + change).log_softmax(-1)

    def cross_entropy(self, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
        """Summed -log P(target) over the rows (with label smoothing, as F.cross_entropy defines
        it), from the targets' and the copyable ids' probabilities only: the one (rows, vocab)
        log_softmax the plain model's loss takes too, and no other pass over the vocabulary."""
        generated = self.logits.float().log_softmax(-1)  # (rows, vocab)
        log_p, log_q = F.logsigmoid(self.gate), F.logsigmoid(-self.gate)  # generate, copy
        # What P is renormalized by: the share generated plus the attention on copyable tokens.
        norm = torch.logaddexp(log_p, log_q + log((self.weights * (self.copy_ids < generated.shape[-1]))
                                                  .sum(-1, keepdim=True)))
        mass = (self.weights[:, None, :] * (self.copy_ids[:, None, :] == targets[:, None, None])).sum(-1)
        target_generated = log_p + generated.gather(1, targets[:, None]) - norm
        nll = -torch.logaddexp(target_generated, log_q + log(mass) - norm).sum()
        if not label_smoothing:
            return nll
        # -sum over the vocabulary of log P: every id's generated share, and at each id the
        # source holds, what copying adds to it.
        ids, first, mass = self.source_ids()
        source_generated = log_p + generated.gather(1, ids) - norm
        added = torch.logaddexp(source_generated, log_q + log(mass) - norm) - source_generated
        vocab = generated.shape[-1]
        total = vocab * (log_p - norm).sum() + generated.sum() + (added * first).sum()
        return (1 - label_smoothing) * nll - label_smoothing / vocab * total


def log(probability: torch.Tensor) -> torch.Tensor:
    """log, with 0 read as MIN_PROBABILITY (the log of 0 has no gradient)."""
    return probability.clamp_min(MIN_PROBABILITY).log()


class CopyGate(nn.Module):
    def __init__(self, hidden_size: int, embed_size: int, src_vocab: Vocab, tgt_vocab: Vocab):
        super().__init__()
        self.gate = nn.Linear(hidden_size + embed_size, 1)
        # Derived from the vocabularies each time a model is built: not part of a checkpoint.
        self.register_buffer("target_ids", source_to_target_ids(src_vocab, tgt_vocab), persistent=False)

    def copy_ids(self, src: torch.Tensor) -> torch.Tensor:
        """Source ids (batch, src_len) -> the target ids they copy to (the dropped column if none)."""
        return self.target_ids[src]

    def forward(self, logits: torch.Tensor, output: torch.Tensor, emb: torch.Tensor,
                weights: torch.Tensor, copy_ids: torch.Tensor) -> CopyScores:
        """Per row: logits (rows, vocab), decoder output (rows, hidden), the input embedding
        (rows, embed), attention weights and copy ids (rows, src_len)."""
        gate = self.gate(torch.cat((output, emb), dim=-1)).float()
        return CopyScores(logits, gate, weights.float(), copy_ids)
