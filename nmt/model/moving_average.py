"""Averaged weights: an exponential moving average of the parameters kept during training
(Marian's exponential smoothing). Validation, best.pt and translation use the average; the raw
weights go on training, and a checkpoint keeps both, so resuming stays exact."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


class ExponentialAverage:
    def __init__(self, model: nn.Module, decay: float):
        self.decay = decay
        self.params = [p.detach().clone() for p in model.parameters()]

    @torch.no_grad()
    def update(self, model: nn.Module, step: int) -> None:
        """Move the average towards the weights after `step`. Early on its memory is shorter
        (TensorFlow's num_updates rule), so the random initial weights fade within a few steps."""
        decay = min(self.decay, (1 + step) / (10 + step))
        torch._foreach_lerp_(self.params, [p.detach() for p in model.parameters()], 1 - decay)

    @contextlib.contextmanager
    @torch.no_grad()
    def applied(self, model: nn.Module) -> Iterator[None]:
        """The model holds the averaged weights inside the block, its own again after it."""
        raw = [p.detach().clone() for p in model.parameters()]
        torch._foreach_copy_(list(model.parameters()), self.params)
        try:
            yield
        finally:
            torch._foreach_copy_(list(model.parameters()), raw)

    def state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """The averaged weights by parameter name (tied weights once, as named_parameters gives them)."""
        return {name: avg for (name, _), avg in zip(model.named_parameters(), self.params)}

    def load_state_dict(self, model: nn.Module, state: dict[str, torch.Tensor]) -> None:
        self.params = [state[name].to(p.device).clone() for name, p in model.named_parameters()]


@torch.no_grad()
def load_averaged(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Put a checkpoint's averaged weights (`ExponentialAverage.state_dict`) into `model`."""
    for name, param in model.named_parameters():
        param.copy_(state[name])
