"""The parallel arrangement of the decoder (`model.decoder: parallel`): OpenNMT-py's
StdRNNDecoder, and RNMT+'s decoder (Chen et al. 2018) in its layout.

The bottom LSTM layer reads only the target embeddings; attention is computed from its outputs
(the seed's additive attention, the query being the bottom layer's new output); each layer above
reads [below; context], and the attentional layer tanh(W [top; context]) meets the output
projection. Nothing flows back from one position's output into the next position's input (no
input feeding), so teacher forcing runs each LSTM layer once over the whole target, and attends
for every position in one batched call, where the stepwise decoder makes a few hundred small
calls a batch. Decoding runs the same weights one position at a time through the same code, a
sequence of length one (tests hold the two equal).

RNMT+'s residual connections, layer normalisation and multi-head additive attention lost at 5 and
30 minutes on every seed and were removed (docs/results.md); its embedding dropout
(`model.embed_dropout`) stays, with the embeddings every arrangement shares.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from nmt.config import ModelConfig
from nmt.model.decoder import AttentionDecoder, DecoderState, lstm_cells_step
from nmt.model.encoder import between_layers


class ParallelDecoder(AttentionDecoder):
    def __init__(self, vocab_size: int, cfg: ModelConfig, pad_id: int = 0):
        assert not cfg.input_feeding, "model.decoder: parallel's rule, checked with the config"
        self.dropout = cfg.dropout  # on each layer's output where it enters the layer above, as nn.LSTM's
        super().__init__(vocab_size, cfg, pad_id, attentional=True)

    def layers(self, cfg: ModelConfig) -> None:
        self.lstms = nn.ModuleList(nn.LSTM(cfg.embed_size if layer == 0 else 2 * cfg.hidden_size, cfg.hidden_size,
                                           batch_first=True) for layer in range(cfg.num_layers))

    def run(self, emb: torch.Tensor, state: DecoderState, cells: bool = False
            ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """emb (batch, steps, embed) -> attentional outputs (batch, steps, hidden), the state after
        the last step, attention weights (batch, steps, src_len). `cells`: one step by fused cells."""
        h0, c0 = state.hidden
        finals = []

        def lstm(layer: int, x: torch.Tensor) -> torch.Tensor:
            rnn, begin = self.lstms[layer], (h0[layer:layer + 1], c0[layer:layer + 1])
            if cells:
                output, final = lstm_cells_step(rnn, x.squeeze(1), begin)
                output = output.unsqueeze(1)
            else:
                output, final = rnn(x, begin)
            finals.append(final)
            return output

        below = lstm(0, emb)
        context, weights = self.attend(below, state)  # every position's query in one call
        for layer in range(1, len(self.lstms)):
            inputs = torch.cat((between_layers(below, self.dropout, self.training), context), dim=-1)
            below = lstm(layer, inputs)
        output = self.combine(below, context)
        hidden = (torch.cat([h for h, _ in finals]), torch.cat([c for _, c in finals]))
        return output, replace(state, hidden=hidden), weights

    def step(self, emb: torch.Tensor, state: DecoderState
             ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        output, state, weights = self.run(emb.unsqueeze(1), state, cells=self.cells_for(emb))
        return output.squeeze(1), state, weights.squeeze(1)

    def teacher_forced(self, emb: torch.Tensor, state: DecoderState
                       ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        # Padding after a target's end changes nothing before it: every layer reads left to right.
        return self.run(emb, state)
