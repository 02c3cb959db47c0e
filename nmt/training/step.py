"""One training update: the loss under the run's precision, its gradient, the clipped step."""

from __future__ import annotations

import torch

from nmt.config import Config
from nmt.data.batches import Batch
from nmt.model.loss import batch_loss
from nmt.training import distributed


def train_step(model: torch.nn.Module, batch: Batch, optimizer: torch.optim.Optimizer, cfg: Config,
               pad_id: int, world: distributed.World = distributed.SINGLE) -> tuple[torch.Tensor | float, int]:
    """One update; returns the mean loss per target token and the target tokens, over all ranks.

    The loss stays a tensor on the device (float64, as exact as Python's floats): reading it
    here would make the host wait for the GPU every step. The loss is normalised by the global
    token count, so N processes compute the gradient a single process would over the union of
    their batches (DDP averages, hence the x world).
    """
    loss_sum = batch_loss(model, batch, pad_id, cfg.train.precision, cfg.train.label_smoothing)
    if world.distributed:
        total_loss, total_tokens = distributed.all_sum([loss_sum.item(), batch.num_tokens], world, batch.src.device)
        loss: torch.Tensor | float = total_loss / total_tokens
    else:
        total_tokens = batch.num_tokens
        loss = loss_sum.detach().double() / total_tokens
    optimizer.zero_grad(set_to_none=True)
    (loss_sum * (world.size / total_tokens)).backward()
    if cfg.train.clip_grad > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip_grad)
    optimizer.step()
    return loss, int(total_tokens)
