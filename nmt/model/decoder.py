"""The attention decoder (seed 002's Seq2SeqAttentionDecoder).

At each step the query is the top LSTM layer's previous hidden state; the context is attention
over the encoder outputs (padding masked); the LSTM reads [context; embedding]; a linear layer
maps the LSTM output to the target vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nmt.model.attention import ATTENTION
from nmt.model.encoder import LSTMState


@dataclass
class DecoderState:
    memory: torch.Tensor  # (batch, src_len, hidden) encoder outputs: attention keys and values
    prepared_keys: torch.Tensor  # (batch, src_len, units) keys projected once per batch
    src_mask: torch.Tensor  # (batch, src_len) True on real source tokens
    hidden: LSTMState  # (h, c), each (layers, batch, hidden)

    def select(self, index: torch.Tensor) -> DecoderState:
        """Keep (and repeat) batch rows by `index`, as beam search and finished-row pruning need."""
        h, c = self.hidden
        return DecoderState(self.memory[index], self.prepared_keys[index], self.src_mask[index],
                            (h[:, index], c[:, index]))


class Decoder(nn.Module):
    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, num_layers: int,
                 dropout: float = 0.0, attention: str = "additive", pad_id: int = 0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.attention = ATTENTION[attention](hidden_size, hidden_size, hidden_size)
        self.rnn = nn.LSTM(embed_size + hidden_size, hidden_size, num_layers, batch_first=True,
                           dropout=dropout if num_layers > 1 else 0.0)
        self.out = nn.Linear(hidden_size, vocab_size)

    def init_state(self, memory: torch.Tensor, hidden: LSTMState, src_mask: torch.Tensor) -> DecoderState:
        return DecoderState(memory, self.attention.prepare_keys(memory), src_mask, hidden)

    def step(self, emb: torch.Tensor, state: DecoderState
             ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """One step: emb (batch, embed) -> LSTM output (batch, hidden), new state, weights (batch, src_len)."""
        query = state.hidden[0][-1].unsqueeze(1)  # (batch, 1, hidden): the top layer's last state
        context, weights = self.attention(query, state.memory, state.memory, mask=state.src_mask,
                                          prepared_keys=state.prepared_keys)
        rnn_in = torch.cat((context, emb.unsqueeze(1)), dim=-1)  # (batch, 1, hidden + embed)
        output, hidden = self.rnn(rnn_in, state.hidden)
        return output.squeeze(1), DecoderState(state.memory, state.prepared_keys, state.src_mask,
                                               hidden), weights.squeeze(1)

    def forward(self, tgt_in: torch.Tensor, state: DecoderState, tgt_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """Teacher-forced run: tgt_in (batch, tgt_len) -> logits (batch, tgt_len, vocab),
        final state, attention weights (batch, tgt_len, src_len).

        With a (batch, tgt_len) bool `tgt_mask`, logits come only for the True positions, as
        (num_true, vocab): padding never reaches the large output projection and softmax.
        """
        emb = self.embedding(tgt_in)  # (batch, tgt_len, embed), looked up once for all steps
        outputs, weights = [], []
        for t in range(tgt_in.shape[1]):
            output, state, step_weights = self.step(emb[:, t], state)
            outputs.append(output)
            weights.append(step_weights)
        hidden = torch.stack(outputs, dim=1)  # (batch, tgt_len, hidden)
        # The output projection, the largest matrix product, runs once over all steps.
        logits = self.out(hidden if tgt_mask is None else hidden[tgt_mask])
        return logits, state, torch.stack(weights, dim=1)

    def decode_step(self, prev_ids: torch.Tensor, state: DecoderState
                    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """prev_ids (batch,) -> logits (batch, vocab), new state, weights (batch, src_len)."""
        output, state, weights = self.step(self.embedding(prev_ids), state)
        return self.out(output), state, weights
