"""One training update: the loss of its micro-batches under the run's precision, the gradient of
their sum normalised by all their target tokens, the clipped step."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import torch

from nmt.config import Config
from nmt.data.batches import Batch
from nmt.model.alignment_head import translation_and_head_parameters
from nmt.model.loss import batch_loss
from nmt.training import distributed


def train_step(model: torch.nn.Module, batches: Sequence[Batch], optimizer: torch.optim.Optimizer, cfg: Config,
               pad_id: int) -> tuple[torch.Tensor | float, int]:
    """One update over `batches`, the micro-batches of one step (train.accum_steps of them; fewer at an
    epoch's end); returns the mean loss per target token and the target tokens, over all ranks.

    Each micro-batch's summed loss is scaled by the target tokens of every micro-batch on every
    rank (counted before the first forward pass, so each backward can run at once and free its
    activations), so one step's update is the gradient of the mean loss over the whole global
    batch, however it is split into micro-batches and processes (OpenNMT-py's normalisation since
    PR #2275; DDP averages over ranks, hence the x world). Under DDP the gradients are all-reduced
    on the last micro-batch only (`no_sync`, as fairseq's --update-freq). The loss stays a tensor on
    the device where it can (float64): reading it would make the host wait for the GPU every step.
    """
    device, world = batches[0].src.device, distributed.world()
    local_tokens = sum(batch.num_tokens for batch in batches)
    total_tokens = int(distributed.all_sum([local_tokens], device)[0]) if world.distributed else local_tokens
    optimizer.zero_grad(set_to_none=True)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    for i, batch in enumerate(batches):
        last = i == len(batches) - 1
        with model.no_sync() if world.distributed and not last else contextlib.nullcontext():  # type: ignore[operator]
            micro = batch_loss(model, batch, pad_id, cfg.train.precision, cfg.train.label_smoothing,
                               cfg.train.guided_alignment)
            (micro * (world.size / total_tokens)).backward()
        loss_sum += micro.detach().double()
    if world.distributed:
        loss: torch.Tensor | float = distributed.all_sum([loss_sum.item()], device)[0] / total_tokens
    else:
        loss = loss_sum / total_tokens
    if cfg.train.clip_grad > 0:
        for group in translation_and_head_parameters(model):
            torch.nn.utils.clip_grad_norm_(group, cfg.train.clip_grad)
    optimizer.step()
    return loss, total_tokens
