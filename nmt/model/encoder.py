"""The encoder (seed 002's Seq2SeqEncoder): embedding and a multi-layer LSTM."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

LSTMState = tuple[torch.Tensor, torch.Tensor]


class Encoder(nn.Module):
    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, num_layers: int,
                 dropout: float = 0.0, pad_id: int = 0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.rnn = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True,
                           dropout=dropout if num_layers > 1 else 0.0)

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, LSTMState]:
        """src (batch, src_len) -> outputs (batch, src_len, hidden), (h, c) each (layers, batch, hidden).

        With `src_lens`, the sequence is packed so the final state is taken at each sentence's
        last real token rather than after its padding.
        """
        emb = self.embedding(src)  # (batch, src_len, embed)
        if src_lens is None:
            return self.rnn(emb)
        packed = pack_padded_sequence(emb, src_lens.cpu(), batch_first=True, enforce_sorted=False)
        outputs, state = self.rnn(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        return outputs, state
