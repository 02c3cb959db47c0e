"""The attention decoder (seed 002's Seq2SeqAttentionDecoder).

At each step the query is the top LSTM layer's previous hidden state; the context is attention
over the encoder outputs (padding masked); the LSTM reads [context; embedding]; a linear layer
maps the LSTM output to the target vocabulary.

Options a user of OpenNMT-py or Joey NMT expects, all off in the seed design:
- input feeding: an attentional output tanh(W [LSTM output; context]) feeds the projection and
  is also read by the next step's LSTM, so each step knows what the last one attended to;
- tied embeddings: the output projection reuses the target embedding matrix (Press & Wolf, 2017).

`AttentionDecoder` holds what every arrangement of the decoder shares (embedding, attention,
attentional layer, output projection); `Decoder` is this stepwise arrangement,
`nmt.model.parallel_decoder` the one whose training runs each layer once over the whole target.

One function, three arrangements of the stepwise LSTM (tests hold them equal): `step` calls
nn.LSTM for one position (oneDNN on the CPU) or fused LSTM cells (CUDA, and small decoding steps
on the CPU); teacher forcing on the CPU in fp32 runs `unrolled`, which measured faster there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from nmt.config import ModelConfig
from nmt.model.attention import ATTENTION
from nmt.model.encoder import LSTMState, between_layers
from nmt.model.unrolled import unrolled

# The projection's row count is padded to a multiple of this: oneDNN keeps state per matrix
# shape, and a different token count every batch grew training memory by ~1 MB a step (bf16).
PROJECTION_ROWS_MULTIPLE = 64

# Decoding steps of at most this many rows take the fused-cell path on the CPU too. There a
# one-step nn.LSTM call's set-up dominates small steps: greedy decoding of 1 sentence ran 1.7x,
# of 8 1.2x faster with cells; at 32 rows both took the same time, from 64 on nn.LSTM wins
# (AMD EPYC, 2 threads; same outputs). Serving at low concurrency decodes such steps.
CPU_CELLS_MAX_ROWS = 32


@dataclass
class DecoderState:
    memory: torch.Tensor  # (batch, src_len, hidden) encoder outputs: attention keys and values
    prepared_keys: torch.Tensor  # (batch, src_len, units) keys projected once per batch
    src_mask: torch.Tensor  # (batch, src_len) True on real source tokens
    hidden: LSTMState  # (h, c), each (layers, batch, hidden)
    feed: torch.Tensor | None = None  # (batch, hidden) last attentional output, with input feeding

    def select(self, index: torch.Tensor, same_sources: bool = False) -> DecoderState:
        """Keep (and repeat) batch rows by `index`, as beam search and finished-row pruning need.
        `same_sources`: each row's source is the one row `index` names already holds (beams moving
        within their sentence's rows), so only the decoder's own state is gathered, not the
        encoder's outputs (at beam 5 and 128 sentences, a 20 MB copy a step)."""
        h, c = self.hidden
        feed = None if self.feed is None else self.feed[index]
        if same_sources:
            return replace(self, hidden=(h[:, index], c[:, index]), feed=feed)
        return DecoderState(self.memory[index], self.prepared_keys[index], self.src_mask[index],
                            (h[:, index], c[:, index]), feed)

    def reading(self, src_mask: torch.Tensor) -> DecoderState:
        """The state with attention over the source positions `src_mask` (rows, src_len) holds True."""
        return replace(self, src_mask=src_mask)


def lstm_cells_step(rnn: nn.LSTM, x: torch.Tensor, state: LSTMState) -> tuple[torch.Tensor, LSTMState]:
    """One time step of a multi-layer `rnn` (its own weights), layer by layer with fused LSTM cells.

    The same function as rnn(x.unsqueeze(1), state), inter-layer dropout included, for the
    decoder's loop of one-step calls: on CUDA, a one-step cuDNN call spent ~0.9 ms of host time
    forward and ~1.5 ms backward on its set-up (measured on an H100, half of each training step),
    far more than the step's arithmetic. x (batch, input) -> top output (batch, hidden), (h, c).
    """
    h0, c0 = state
    hs, cs = [], []
    for layer in range(rnn.num_layers):
        h, c = torch.lstm_cell(x, (h0[layer], c0[layer]), getattr(rnn, f"weight_ih_l{layer}"),
                               getattr(rnn, f"weight_hh_l{layer}"), getattr(rnn, f"bias_ih_l{layer}"),
                               getattr(rnn, f"bias_hh_l{layer}"))
        hs.append(h)
        cs.append(c)
        x = h if layer == rnn.num_layers - 1 else between_layers(h, rnn.dropout, rnn.training)
    return x, (torch.stack(hs), torch.stack(cs))


class AttentionDecoder(nn.Module):
    """What every arrangement of the decoder shares: the target embedding, the attention, the
    attentional layer tanh(W [top output; context]) and the output projection (tied or not); the
    teacher-forced run's projection and the one-position decoding step.
    A subclass owns its LSTM layers, made by `layers()` between the attention and the output layers
    (the order the weights are drawn in, so a seed gives the stepwise decoder the weights it always
    had): `step` (one position) and `teacher_forced` (every position)."""

    def __init__(self, vocab_size: int, cfg: ModelConfig, pad_id: int, attentional: bool):
        super().__init__()
        hidden_size = cfg.hidden_size
        self.embedding = nn.Embedding(vocab_size, cfg.embed_size, padding_idx=pad_id)
        self.embed_dropout = nn.Dropout(cfg.embed_dropout)
        self.output_dropout = nn.Dropout(cfg.output_dropout)  # on what the output projection reads, in training
        self.attention = ATTENTION[cfg.attention](hidden_size, hidden_size, hidden_size)
        self.layers(cfg)
        self.attentional = nn.Linear(2 * hidden_size, hidden_size, bias=False) if attentional else None
        self.input_feeding = cfg.input_feeding  # the state carries the last attentional output (`feed`)
        self.out = nn.Linear(hidden_size, vocab_size)
        if cfg.tie_embeddings:
            assert cfg.embed_size == hidden_size, "model.tie_embeddings' rule, checked with the config"
            self.out.weight = self.embedding.weight
        self.use_cells: bool | None = None  # None: cells on CUDA and for small inference steps (see above)

    def layers(self, cfg: ModelConfig) -> None:
        """Make the LSTM layers of `cfg` (after the embedding and attention: the order weights are drawn in)."""
        raise NotImplementedError

    def init_state(self, memory: torch.Tensor, hidden: LSTMState, src_mask: torch.Tensor) -> DecoderState:
        feed = memory.new_zeros(memory.shape[0], self.out.in_features) if self.input_feeding else None
        return DecoderState(memory, self.attention.prepare_keys(memory), src_mask, hidden, feed)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Target ids -> embeddings, with model.embed_dropout in training (teacher forcing and decoding alike)."""
        return self.embed_dropout(self.embedding(ids))

    def combine(self, output: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """The attentional layer: tanh(W [top LSTM output; context]) (`nmt.model.unrolled` computes
        it features first)."""
        return torch.tanh(self.attentional(torch.cat((output, context), dim=-1)))

    def attend(self, queries: torch.Tensor, state: DecoderState) -> tuple[torch.Tensor, torch.Tensor]:
        """queries (batch, steps, hidden) -> contexts (batch, steps, hidden), weights (batch, steps, src_len)."""
        return self.attention(queries, state.memory, state.memory, mask=state.src_mask,
                              prepared_keys=state.prepared_keys)

    def cells_for(self, x: torch.Tensor) -> bool:
        """Whether a step of rows `x` runs fused cells rather than a one-step nn.LSTM call (see above)."""
        if self.use_cells is not None:
            return self.use_cells
        return x.is_cuda or (x.shape[0] <= CPU_CELLS_MAX_ROWS and not torch.is_grad_enabled())

    def step(self, emb: torch.Tensor, state: DecoderState) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """One step: emb (batch, embed) -> output (batch, hidden), new state, weights (batch, src_len)."""
        raise NotImplementedError

    def teacher_forced(self, emb: torch.Tensor, state: DecoderState
                       ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """emb (batch, tgt_len, embed) -> outputs (batch, tgt_len, hidden), the final state and the
        attention weights (batch, tgt_len, src_len), as a loop of `step` gives them."""
        raise NotImplementedError

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        """(rows, hidden) -> (rows, vocab) logits, computed for a padded row count (see above)."""
        rows = hidden.shape[0]
        padded = -rows % PROJECTION_ROWS_MULTIPLE
        if not padded:
            return self.out(hidden)
        return self.out(F.pad(hidden, (0, 0, 0, padded)))[:rows]

    def scored(self, hidden: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """The teacher-forced run's outputs `hidden` (batch, tgt_len, hidden) -> the logits
        `forward` returns (see there)."""
        flat = hidden.flatten(0, 1)
        outputs = self.output_dropout(flat if positions is None else flat.index_select(0, positions))
        logits = self.project(outputs)  # the output projection, the largest matrix product: once for all steps
        if positions is None:
            logits = logits.unflatten(0, hidden.shape[:2])
        return logits

    def decode_step(self, prev_ids: torch.Tensor, state: DecoderState
                    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """prev_ids (batch,) -> logits (batch, vocab), new state, weights (batch, src_len)."""
        emb = self.embed(prev_ids)
        output, state, weights = self.step(emb, state)
        return self.out(output), state, weights


class Decoder(AttentionDecoder):
    """The stepwise arrangement (seed 002's): one multi-layer LSTM that reads, at each position,
    the context (Bahdanau's order) and, with input feeding, the last attentional output, so
    teacher forcing walks the target one position at a time."""

    def __init__(self, vocab_size: int, cfg: ModelConfig, pad_id: int = 0):
        super().__init__(vocab_size, cfg, pad_id, attentional=cfg.input_feeding)

    def layers(self, cfg: ModelConfig) -> None:
        feed_size = cfg.hidden_size if cfg.input_feeding else 0
        self.rnn = nn.LSTM(cfg.hidden_size + cfg.embed_size + feed_size, cfg.hidden_size, cfg.num_layers,
                           batch_first=True, dropout=cfg.dropout if cfg.num_layers > 1 else 0.0)

    def step(self, emb: torch.Tensor, state: DecoderState
             ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        context, weights = self.attend(state.hidden[0][-1][:, None], state)  # from the top layer's last state
        context = context.squeeze(1)
        parts = (context, emb) if state.feed is None else (context, emb, state.feed)
        rnn_input = torch.cat(parts, dim=-1)  # (batch, context + embed [+ feed])
        if self.cells_for(rnn_input):
            output, hidden = lstm_cells_step(self.rnn, rnn_input, state.hidden)
        else:
            output, hidden = self.rnn(rnn_input.unsqueeze(1), state.hidden)
            output = output.squeeze(1)
        feed = None
        if self.attentional is not None:
            output = feed = self.combine(output, context)
        return output, replace(state, hidden=hidden, feed=feed), weights.squeeze(1)

    def teacher_forced(self, emb: torch.Tensor, state: DecoderState
                       ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        if self.unrolled_on(emb):
            hidden, final, feed, weights = unrolled(self, emb, state.memory, state.prepared_keys, state.src_mask,
                                                    state.hidden, state.feed)
            return hidden, replace(state, hidden=final, feed=feed), weights
        outputs, step_weights = [], []
        for t in range(emb.shape[1]):
            output, state, step_weight = self.step(emb[:, t], state)
            outputs.append(output)
            step_weights.append(step_weight)
        return torch.stack(outputs, dim=1), state, torch.stack(step_weights, dim=1)  # (batch, tgt_len, ...)

    def unrolled_on(self, emb: torch.Tensor) -> bool:
        """Whether teacher forcing takes `unrolled`: on the CPU in fp32, unless `use_cells` pins the
        step path. CUDA keeps its fused cells, and bf16 autocast oneDNN's bf16 LSTM (not measured
        against the unrolled loop: no bf16 CPU was at hand)."""
        return (self.use_cells is None and emb.device.type == "cpu"
                and not torch.is_autocast_enabled("cpu"))
