"""The encoder–decoder with attention, built from a `ModelConfig`."""

from __future__ import annotations

import torch
from torch import nn

from nmt.config import ModelConfig
from nmt.errors import ConfigError
from nmt.data.vocab import Vocab
from nmt.hardware import to_device
from nmt.model.alignment_head import AlignmentHead
from nmt.model.attention import sequence_mask
from nmt.model.decoder import AttentionDecoder, Decoder, DecoderState
from nmt.model.encoder import Encoder
from nmt.model.parallel_decoder import ParallelDecoder

def ranked(log_probs: torch.Tensor, k: int | torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's k best log-probabilities and their ids, best first; with k None, every token as
    it is, in vocabulary order (what search needs where a rule names tokens: no sort at all)."""
    if k is None:
        return log_probs, torch.arange(log_probs.shape[-1], device=log_probs.device).expand_as(log_probs)
    return log_probs.topk(min(k, log_probs.shape[-1]) if isinstance(k, int) else k, dim=-1)


def with_named(top: torch.Tensor, ids: torch.Tensor, log_probs: torch.Tensor, also: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The ranked candidates with the `also` tokens' log-probabilities appended as further columns."""
    if also is None:
        return top, ids
    return torch.cat((top, log_probs.gather(1, also)), 1), torch.cat((ids, also), 1)


class Seq2Seq(nn.Module):
    def __init__(self, encoder: Encoder, decoder: AttentionDecoder, alignment_head: AlignmentHead | None = None):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.alignment_head = alignment_head  # model.alignment_head: what alignments read, where there is one

    def encode(self, src: torch.Tensor, src_lens: torch.Tensor) -> DecoderState:
        """src (batch, src_len), src_lens (batch,) on any device -> the decoder's initial state.

        Lengths already on the host (training batches keep them there) cost no wait for the GPU."""
        memory, hidden = self.encoder(src, src_lens.cpu())
        src_mask = sequence_mask(to_device(src_lens, src.device), src.shape[1])
        return self.decoder.init_state(memory, hidden, src_mask)

    def candidates(self, prev_ids: torch.Tensor, state: DecoderState, k: int | torch.Tensor | None,
                   banned_id: int | None, eos_id: int, also: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, DecoderState, torch.Tensor]:
        """One decoding step reduced to what search reads of it: per row the k most likely next
        tokens' log-probabilities and ids (rows, k), the log-probability of <eos> (rows,), the new
        state and the attention weights (rows, src_len). `banned_id` is never proposed (the
        distribution is renormalized without it). Beam search needs no more than the 2 * beam
        best of each row, so the (rows, vocab) distribution never leaves this function (nor, in
        the ONNX export, ONNX Runtime). `k` may be a 0-dim tensor (a graph input, when exported), or
        None: every token in vocabulary order. `also` (rows, m): these tokens' too, after the k best
        (the tokens search's rules name, wherever they rank)."""
        log_probs, state, weights = self.next_log_probs(prev_ids, state, banned_id)
        top, ids = with_named(*ranked(log_probs, k), log_probs, also)
        return top, ids, log_probs[:, eos_id], state, weights

    def next_log_probs(self, prev_ids: torch.Tensor, state: DecoderState, banned_id: int | None
                       ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """One decoding step: the whole next-token distribution (rows, vocab) as log-probabilities
        (renormalized without `banned_id`), the new state and the attention weights."""
        logits, state, weights = self.decoder.decode_step(prev_ids, state)
        logits = logits.float()
        if banned_id is not None:  # (the ONNX export has it in the output bias instead)
            logits[:, banned_id] = float("-inf")
        return logits.log_softmax(-1), state, weights

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor,
                positions: torch.Tensor | None = None, attention: bool = False, tgt_out: torch.Tensor | None = None
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: -> logits (batch, tgt_len, tgt_vocab), or (len(positions), tgt_vocab)
        for the flat (batch * tgt_len) `positions` only; with
        `attention`, also the attention weights (batch, tgt_len, src_len) that guided alignment reads
        and, given the written tokens `tgt_out` and with an alignment head, the head's weights (else None)."""
        state = self.encode(src, src_lens)
        emb = self.decoder.embed(tgt_in)  # (batch, tgt_len, embed), looked up once for all steps
        hidden, final, weights = self.decoder.teacher_forced(emb, state)
        logits = self.decoder.scored(hidden, positions)
        if not attention:
            return logits
        aligned = None
        if self.alignment_head is not None and tgt_out is not None:
            aligned = self.alignment_head(hidden, self.decoder.embedding(tgt_out), state.memory, state.src_mask)
        return logits, weights, aligned

    def aligned(self, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor
                ) -> torch.Tensor:
        """The alignment head's weights (batch, tgt_len, src_len) for given outputs, in one teacher-forced pass."""
        assert self.alignment_head is not None, "a model built with model.alignment_head"
        state = self.encode(src, src_lens)
        hidden, _, _ = self.decoder.teacher_forced(self.decoder.embed(tgt_in), state)
        return self.alignment_head(hidden, self.decoder.embedding(tgt_out), state.memory, state.src_mask)


def build_model(cfg: ModelConfig, src_vocab: Vocab, tgt_vocab: Vocab) -> Seq2Seq:
    """The model of `cfg` for these vocabularies."""
    if not isinstance(cfg.alignment_head, bool):
        raise ConfigError(f"model.alignment_head must be decided before a model is built (got {cfg.alignment_head!r})")
    encoder = Encoder(len(src_vocab), cfg, src_vocab.pad_id)
    decoder = (ParallelDecoder if cfg.decoder == "parallel" else Decoder)(len(tgt_vocab), cfg, tgt_vocab.pad_id)
    head = AlignmentHead(cfg.hidden_size, cfg.embed_size) if cfg.alignment_head else None
    return Seq2Seq(encoder, decoder, head)
