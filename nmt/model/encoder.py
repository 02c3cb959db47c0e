"""The encoder (seed 002's Seq2SeqEncoder): embedding and a multi-layer LSTM, optionally
bidirectional with a bridge that turns its final states into the decoder's initial state."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from nmt.config import ModelConfig
from nmt.hardware import to_device

LSTMState = tuple[torch.Tensor, torch.Tensor]


def between_layers(h: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout on an LSTM layer's output where it enters the layer above (nn.LSTM's `dropout`), as
    every arrangement of the decoder's layers applies it."""
    return F.dropout(h, p, training) if p else h


def pack_by_length(emb: torch.Tensor, lengths: torch.Tensor) -> tuple[PackedSequence, torch.Tensor]:
    """pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False), step for step,
    except that nothing waits for the GPU: torch's own version copies the sort order with a
    blocking copy, and its pad_packed_sequence reads it back to the host, once per batch each.
    `lengths` (batch,) must be on the host. Returns the packed batch and the order that restores
    the input's (apply it with `unpack`)."""
    lengths, sorted_indices = torch.sort(lengths, descending=True)
    unsorted_indices = torch.argsort(sorted_indices)  # the inverse permutation (traceable for ONNX export)
    sorted_indices, unsorted_indices = (to_device(i, emb.device) for i in (sorted_indices, unsorted_indices))
    packed = pack_padded_sequence(emb.index_select(0, sorted_indices), lengths, batch_first=True)
    return PackedSequence(packed.data, packed.batch_sizes, sorted_indices, unsorted_indices), unsorted_indices


def unpack(packed: PackedSequence, unsorted_indices: torch.Tensor, total_length: int) -> torch.Tensor:
    """pad_packed_sequence(packed, batch_first=True, total_length=...)[0] for `pack_by_length`'s output."""
    sorted_order = PackedSequence(packed.data, packed.batch_sizes)  # no index: nothing to copy back
    outputs, _ = pad_packed_sequence(sorted_order, batch_first=True, total_length=total_length)
    return outputs.index_select(0, unsorted_indices)


class Encoder(nn.Module):
    """Outputs are always `hidden_size` wide: a bidirectional encoder runs hidden_size / 2 per
    direction (as OpenNMT-py does), so attention and the decoder see the same shapes either way."""

    def __init__(self, vocab_size: int, cfg: ModelConfig, pad_id: int = 0):
        """The source embedding and LSTM of `cfg` (embed_size, hidden_size, num_layers, dropout,
        embed_dropout, bidirectional, bridge) for a vocabulary of `vocab_size`."""
        super().__init__()
        hidden_size, self.bidirectional = cfg.hidden_size, cfg.bidirectional
        assert not (self.bidirectional and hidden_size % 2), "model.bidirectional's rule, checked with the config"
        self.embedding = nn.Embedding(vocab_size, cfg.embed_size, padding_idx=pad_id)
        self.embed_dropout = nn.Dropout(cfg.embed_dropout)
        self.rnn = nn.LSTM(cfg.embed_size, hidden_size // 2 if cfg.bidirectional else hidden_size, cfg.num_layers,
                           batch_first=True, dropout=cfg.dropout if cfg.num_layers > 1 else 0.0,
                           bidirectional=cfg.bidirectional)
        # The learned bridge (Joey NMT's and OpenNMT-py's `bridge`): a layer per state from the
        # encoder's final (h, c) to the decoder's initial one, instead of copying them.
        self.bridge = nn.ModuleList(nn.Linear(hidden_size, hidden_size) for _ in range(2)) if cfg.bridge else None

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, LSTMState]:
        """src (batch, src_len) -> outputs (batch, src_len, hidden), (h, c) each (layers, batch, hidden).

        With `src_lens`, the sequence is packed so the final state is taken at each sentence's
        last real token rather than after its padding (for the backward direction: at its first).
        """
        emb = self.embed_dropout(self.embedding(src))  # (batch, src_len, embed)
        if src_lens is None:
            outputs, state = self.rnn(emb)
        else:
            packed, unsorted_indices = pack_by_length(emb, src_lens.cpu())
            outputs, state = self.rnn(packed)  # the final states come back in the input's order
            outputs = unpack(outputs, unsorted_indices, src.shape[1])
        return outputs, self._decoder_state(state)

    def _decoder_state(self, state: LSTMState) -> LSTMState:
        h, c = state
        if self.bidirectional:  # (layers * 2, batch, hidden / 2) -> (layers, batch, hidden): [forward; backward]
            h, c = (torch.cat((s[0::2], s[1::2]), dim=-1) for s in (h, c))
        if self.bridge is not None:
            h, c = torch.tanh(self.bridge[0](h)), self.bridge[1](c)
        return h.contiguous(), c.contiguous()
