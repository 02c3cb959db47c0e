"""Seed 002's design, re-implemented faithfully as the benchmark's reference (not used by nmt).

What makes it the seed design: a time-major encoder LSTM over padded batches (no packing); a
decoder that calls nn.LSTM once per time step and, inside MLPAttention, re-projects every key
at every step; masked softmax by writing -1e6 into a flattened copy (SequenceMask with lengths
repeated through NumPy); d2l's Xavier initialisation and MaskedSoftmaxCELoss; Adam with d2l's
gradient clipping; and d2l.predict_s2s_ch9, which translates one sentence at a time.
"""

from __future__ import annotations

import torch
from torch import nn


def sequence_mask(X: torch.Tensor, X_len: torch.Tensor, value: float = -1e6) -> torch.Tensor:
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float, device=X.device)[None, :] >= X_len[:, None]
    X[mask] = value
    return X


def masked_softmax(X: torch.Tensor, valid_length: torch.Tensor | None) -> torch.Tensor:
    if valid_length is None:
        return X.softmax(dim=-1)
    shape = X.shape
    if valid_length.dim() == 1:
        valid_length = torch.FloatTensor(valid_length.cpu().numpy().repeat(shape[1], axis=0)).to(X.device)
    else:
        valid_length = valid_length.reshape((-1,))
    X = sequence_mask(X.reshape((-1, shape[-1])), valid_length)
    return X.softmax(dim=-1).reshape(shape)


class MLPAttention(nn.Module):
    def __init__(self, units: int, ipt_dim: int, dropout: float):
        super().__init__()
        self.W_k = nn.Linear(ipt_dim, units, bias=False)
        self.W_q = nn.Linear(ipt_dim, units, bias=False)
        self.v = nn.Linear(units, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, valid_length):
        query, key = self.W_k(query), self.W_q(key)  # the seed's own (swapped) names
        features = query.unsqueeze(2) + key.unsqueeze(1)
        scores = self.v(features).squeeze(-1)  # as seed 002's code has it: no tanh (its formula has one)
        attention_weights = self.dropout(masked_softmax(scores, valid_length))
        return torch.bmm(attention_weights, value)


class Seq2SeqEncoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.LSTM(embed_size, num_hiddens, num_layers, dropout=dropout)

    def forward(self, X, *args):
        X = self.embedding(X).transpose(0, 1)  # time-major
        return self.rnn(X)


class Seq2SeqAttentionDecoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.attention_cell = MLPAttention(num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.LSTM(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_len, *args):
        outputs, hidden_state = enc_outputs
        return outputs.permute(1, 0, 2), hidden_state, enc_valid_len

    def forward(self, X, state):
        enc_outputs, hidden_state, enc_valid_len = state
        X = self.embedding(X).transpose(0, 1)
        outputs = []
        for x in X:
            query = hidden_state[0][-1].unsqueeze(1)
            context = self.attention_cell(query, enc_outputs, enc_outputs, enc_valid_len)
            x = torch.cat((context, x.unsqueeze(1)), dim=-1)
            out, hidden_state = self.rnn(x.transpose(0, 1), hidden_state)
            outputs.append(out)
        outputs = self.dense(torch.cat(outputs, dim=0))
        return outputs.transpose(0, 1), [enc_outputs, hidden_state, enc_valid_len]


class EncoderDecoder(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, enc_X, dec_X, *args):
        enc_outputs = self.encoder(enc_X, *args)
        dec_state = self.decoder.init_state(enc_outputs, *args)
        return self.decoder(dec_X, dec_state)


def xavier_init_weights(m: nn.Module) -> None:
    if type(m) is nn.Linear:
        nn.init.xavier_uniform_(m.weight)
    if type(m) is nn.LSTM:
        for name, param in m.named_parameters():
            if "weight" in name:
                nn.init.xavier_uniform_(param)


class MaskedSoftmaxCELoss(nn.CrossEntropyLoss):
    def forward(self, pred, label, valid_len):
        weights = torch.ones_like(label)
        weights = sequence_mask(weights, valid_len, value=0)
        self.reduction = "none"
        unweighted_loss = super().forward(pred.permute(0, 2, 1), label)
        return (unweighted_loss * weights).mean(dim=1)


def build(src_vocab_size: int, tgt_vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int,
          dropout: float) -> EncoderDecoder:
    model = EncoderDecoder(Seq2SeqEncoder(src_vocab_size, embed_size, num_hiddens, num_layers, dropout),
                           Seq2SeqAttentionDecoder(tgt_vocab_size, embed_size, num_hiddens, num_layers, dropout))
    model.apply(xavier_init_weights)
    return model


def grad_clipping(model: nn.Module, theta: float) -> None:
    params = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in params))
    if norm > theta:
        for p in params:
            p.grad[:] *= theta / norm


def train_step(model, optimizer, loss_fn, X, X_vlen, Y, Y_vlen) -> None:
    """train_s2s_ch9's inner loop: Y holds <bos> ... <eos> padded; the label is Y shifted left."""
    Y_input, Y_label, Y_vlen = Y[:, :-1], Y[:, 1:], Y_vlen - 1
    Y_hat, _ = model(X, Y_input, X_vlen, Y_vlen)
    l = loss_fn(Y_hat, Y_label, Y_vlen)
    optimizer.zero_grad()
    l.sum().backward()
    grad_clipping(model, 1)
    optimizer.step()


@torch.no_grad()
def predict(model, src_ids: list[int], bos_id: int, eos_id: int, num_steps: int) -> list[int]:
    """d2l.predict_s2s_ch9 on token ids: one sentence, one step at a time."""
    enc_X = torch.tensor(src_ids, dtype=torch.long).unsqueeze(0)
    enc_valid_length = torch.tensor([len(src_ids)])
    enc_outputs = model.encoder(enc_X, enc_valid_length)
    dec_state = model.decoder.init_state(enc_outputs, enc_valid_length)
    dec_X = torch.tensor([bos_id]).unsqueeze(0)
    predict_tokens = []
    for _ in range(num_steps):
        Y, dec_state = model.decoder(dec_X, dec_state)
        dec_X = Y.argmax(dim=2)
        py = dec_X.squeeze(0).int().item()
        if py == eos_id:
            break
        predict_tokens.append(py)
    return predict_tokens
