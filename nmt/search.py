"""Decoding: batched greedy search over many sentences at once."""

from __future__ import annotations

import torch

from nmt.model import Seq2Seq


@torch.inference_mode()
def greedy(model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor, bos_id: int, eos_id: int,
           max_lens: torch.Tensor, return_attention: bool = False
           ) -> tuple[list[list[int]], list[torch.Tensor] | None]:
    """Pick the most likely token at each step until <eos> or the row's length cap.

    src (batch, src_len), src_lens (batch,), max_lens (batch,) output caps, <eos> excluded.
    Returns the token ids of each row (no <bos>/<eos>) and, if asked, each row's attention
    weights (out_len, src_len). Finished rows leave the batch so they cost nothing.
    """
    batch = src.shape[0]
    state = model.encode(src, src_lens)
    prev = torch.full((batch,), bos_id, dtype=torch.long, device=src.device)
    alive = torch.arange(batch, device=src.device)  # original row of each live row
    outputs: list[list[int]] = [[] for _ in range(batch)]
    attention: list[list[torch.Tensor]] = [[] for _ in range(batch)]
    max_lens = max_lens.to(src.device)
    for t in range(int(max_lens.max().item()) + 1):
        logits, state, weights = model.decode_step(prev, state)
        prev = logits.argmax(dim=-1)
        # A row stops at <eos>, or when it has produced its cap (the cap-th step may still say <eos>).
        done = (prev == eos_id) | (max_lens[alive] <= t)
        rows, tokens, done_list = alive.tolist(), prev.tolist(), done.tolist()
        for i, (row, token, finished) in enumerate(zip(rows, tokens, done_list)):
            if return_attention and not (finished and token != eos_id):
                attention[row].append(weights[i, : src_lens[i]].float().cpu())
            if not finished:
                outputs[row].append(token)
        if all(done_list):
            break
        if any(done_list):
            keep = (~done).nonzero().squeeze(1)
            state, prev, alive, src_lens = state.select(keep), prev[keep], alive[keep], src_lens[keep]
    if not return_attention:
        return outputs, None
    return outputs, [torch.stack(rows) if rows else torch.zeros(0, 0) for rows in attention]
