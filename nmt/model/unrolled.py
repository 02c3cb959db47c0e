"""The decoder's teacher-forced loop arranged for a CPU's matrix products (fp32 training).

It computes the same function as calling `Decoder.step` at every position (a test compares the
losses and gradients), with the same weights, but measured faster on an AVX2 CPU:
- the embedding's share of the first LSTM layer's gates does not depend on the previous step,
  so it is one matrix product for all positions, as Marian does;
- each step's remaining gate inputs ([context; feed; h] for layer 0, or [feed; h] when the
  query is the current output, [below; h] above it) meet
  their weights in one product per layer instead of oneDNN's one-step LSTM call, whose set-up
  per call cost about twice its arithmetic;
- activations are kept features-first, (hidden, batch): MKL ran W @ x^T 20-40% faster than
  x @ W^T for these 64-row shapes (2 threads, AMD EPYC).
"""

from __future__ import annotations

import torch
from torch import nn

from nmt.model.encoder import LSTMState, between_layers


def lstm_gates(gates: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An LSTM cell's pointwise half, features first: gates (4 * hidden, batch) in PyTorch's order
    (input, forget, cell, output) and c (hidden, batch) -> the new h and c."""
    i, f, g, o = gates.chunk(4, 0)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def unrolled(decoder: nn.Module, emb: torch.Tensor, memory: torch.Tensor, prepared_keys: torch.Tensor,
             src_mask: torch.Tensor, hidden: LSTMState, feed: torch.Tensor | None
             ) -> tuple[torch.Tensor, LSTMState, torch.Tensor | None, torch.Tensor]:
    """A `Decoder`'s teacher-forced run from its state's tensors: emb (batch, tgt_len, embed) ->
    outputs (batch, tgt_len, hidden), the final (h, c) and feed, and the attention weights
    (batch, tgt_len, src_len), as `Decoder.forward`'s loop of steps gives them."""
    rnn, hidden_size = decoder.rnn, decoder.rnn.hidden_size
    batch, steps, embed = emb.shape
    weight = rnn.weight_ih_l0  # its columns read [context; embedding; feed]
    first = hidden_size
    context_cols, feed_cols = weight[:, :first], weight[:, first + embed:]
    # (4 * hidden, steps, batch): every position's embedding share of layer 0's gates, both biases added.
    emb_gates = torch.addmm((rnn.bias_ih_l0 + rnn.bias_hh_l0)[:, None], weight[:, first:first + embed],
                            emb.transpose(0, 1).reshape(steps * batch, embed).t()).view(-1, steps, batch)
    # Each layer's weights for the inputs that change every step, side by side: one product a step.
    layer_weights = [torch.cat((context_cols, feed_cols, rnn.weight_hh_l0), 1)]
    layer_biases = [None]
    for layer in range(1, rnn.num_layers):
        layer_weights.append(torch.cat((getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"weight_hh_l{layer}")), 1))
        layer_biases.append((getattr(rnn, f"bias_ih_l{layer}") + getattr(rnn, f"bias_hh_l{layer}"))[:, None])
    h = [x.t() for x in hidden[0].unbind(0)]  # per layer (hidden, batch)
    c = [x.t() for x in hidden[1].unbind(0)]
    feed = None if feed is None else feed.t()
    outputs, attention = [], []
    def attend(query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # (hidden, batch) -> context likewise
        context, weights = decoder.attention(query.t().unsqueeze(1), memory, memory, mask=src_mask,
                                             prepared_keys=prepared_keys)
        return context.squeeze(1).t(), weights

    for t in range(steps):
        context, weights = attend(h[-1])
        below = torch.cat((context, h[0]) if feed is None else (context, feed, h[0]), 0)
        h[0], c[0] = lstm_gates(torch.addmm(emb_gates[:, t], layer_weights[0], below), c[0])
        for layer in range(1, rnn.num_layers):
            x = between_layers(h[layer - 1], rnn.dropout, decoder.training)
            gates = torch.addmm(layer_biases[layer], layer_weights[layer], torch.cat((x, h[layer]), 0))
            h[layer], c[layer] = lstm_gates(gates, c[layer])
        output = h[-1]
        if decoder.attentional is not None:  # the decoder's `combine`, features first
            output = feed = torch.tanh(decoder.attentional.weight @ torch.cat((output, context), 0))
        outputs.append(output)
        attention.append(weights.squeeze(1))
    final = (torch.stack([x.t() for x in h]), torch.stack([x.t() for x in c]))
    return (torch.stack(outputs).permute(2, 0, 1), final, None if feed is None else feed.t(),
            torch.stack(attention, dim=1))
