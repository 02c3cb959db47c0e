"""The loss of a batch, with its precision, and the loss over a whole split.

Training and evaluation both stand on this module; it imports neither of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.autograd.function import once_differentiable

from nmt.data.batches import Batch, Example, iterate_batches
from nmt.model import Seq2Seq


def autocast(device: torch.device, precision: str) -> torch.autocast:
    """bf16 autocast runs the matrix products in bfloat16 (several times the fp32 rate on CPUs
    with avx512_bf16 and on GPUs) while weights, optimizer state and the loss stay fp32.
    `precision` is the one a run decided (`run_setup.resolve_runtime`): fp32 or bf16."""
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be decided, fp32 or bf16 (got {precision!r})")
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


class SummedCrossEntropy(torch.autograd.Function):
    """F.cross_entropy(logits, targets, reduction="sum", label_smoothing=smoothing), whose gradient
    is written straight into one (rows, vocab) tensor: softmax minus the (smoothed) one-hot target.
    Autograd's own builds a zero-filled one-hot gradient and runs the log-softmax's backward over
    it: two more passes over the largest tensor of a training step. (In a profile the log-softmax's
    backward took ~7.5% of a step of configs/default.yaml on 2 CPU cores; the whole-step benchmark
    showed no clear gain at those sizes, docs/speed.md.)"""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, smoothing: float) -> torch.Tensor:
        log_probs = logits.float().log_softmax(-1)
        loss = -(1 - smoothing) * log_probs.gather(1, targets[:, None]).sum()
        if smoothing:
            loss = loss - smoothing / log_probs.shape[1] * log_probs.sum()
        ctx.save_for_backward(log_probs, targets)
        ctx.smoothing, ctx.dtype = smoothing, logits.dtype
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        log_probs, targets = ctx.saved_tensors
        grad_logits = log_probs.exp_()  # in place: the saved log-probabilities are not read again
        if ctx.smoothing:
            grad_logits.sub_(ctx.smoothing / grad_logits.shape[1])
        grad_logits[torch.arange(len(targets), device=targets.device), targets] -= 1 - ctx.smoothing
        return grad_logits.mul_(grad).to(ctx.dtype), None, None


def batch_loss(model: Seq2Seq, batch: Batch, pad_id: int, precision: str = "fp32",
               label_smoothing: float = 0.0, guided_alignment: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over the batch's non-pad target tokens (divide by num_tokens for the mean);
    with a batch that holds the aligner's links, plus `guided_alignment` times the attention's
    cross-entropy against them (`alignment_loss`), and the alignment head's own, where the model
    has one (its inputs detached: it teaches the translation model nothing)."""
    positions = batch.positions  # flat indices of the non-pad targets: logits for these only
    if positions is None:  # a batch made by hand, not by collate()
        positions = (batch.tgt_out.flatten() != pad_id).nonzero().squeeze(1)
    linked = batch.alignment is not None
    with autocast(batch.src.device, precision):
        out = model(batch.src, batch.src_lens, batch.tgt_in, positions, attention=linked,
                    tgt_out=batch.tgt_out if linked else None)
    logits, weights, aligned = out if linked else (out, None, None)  # (num_tokens, vocab), attention, the head's
    targets = batch.tgt_out.flatten()[positions]
    loss = SummedCrossEntropy.apply(logits, targets, label_smoothing)
    if linked and guided_alignment > 0:
        loss = loss + guided_alignment * alignment_loss(weights, batch.alignment)
    if aligned is not None:
        loss = loss + alignment_loss(aligned, batch.alignment)
    return loss


def alignment_loss(weights: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """The cross-entropy of the attention `weights` (batch, tgt_len, src_len) against the aligner's
    `gold` attention (`nmt.data.batches.gold_attention`), summed over the target positions it links
    (Garg et al. 2019; Marian's guided-alignment-cost ce). Summed as the translation loss is, it is
    divided by the same target tokens."""
    return -(gold * weights.float().clamp_min(1e-6).log()).sum()


@torch.inference_mode()
def validation_loss(model: Seq2Seq, examples: Sequence[Example], batch_size: int, pad_id: int, bos_id: int,
                    device: torch.device, precision: str = "fp32") -> float:
    """Mean cross-entropy per target token over `examples` (no label smoothing, no dropout)."""
    total, tokens = torch.zeros((), dtype=torch.float64, device=device), 0  # as exact as summing floats
    for batch in iterate_batches(examples, batch_size, pad_id, bos_id):
        total += batch_loss(model, batch.to(device), pad_id, precision).double()
        tokens += batch.num_tokens
    return total.item() / max(tokens, 1)
