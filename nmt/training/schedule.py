"""Learning-rate schedules: constant, or linear decay to the end of the training budget; each
with an optional linear warm-up."""

from __future__ import annotations

from nmt.config import TrainConfig


class LRSchedule:
    """The learning rate for a step, from `train.lr_schedule`:

    - constant: `lr` throughout;
    - linear: falls linearly from `lr` to `min_lr` over the budget. `progress` is the budget's
      used share (steps, minutes or epochs, whichever runs out first), so a 12-minute run
      decays over 12 minutes and a 30-minute one over 30.
    """

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg

    def lr(self, step: int, progress: float) -> float:
        cfg = self.cfg
        lr = cfg.min_lr + (cfg.lr - cfg.min_lr) * max(0.0, 1.0 - progress) if cfg.lr_schedule == "linear" else cfg.lr
        if cfg.warmup_steps and step < cfg.warmup_steps:
            lr *= (step + 1) / cfg.warmup_steps
        return lr
