"""Learning-rate schedules: constant, decay on a validation plateau, or linear decay to the end
of the training budget; each with an optional linear warm-up."""

from __future__ import annotations

import logging

from nmt.config import TrainConfig

logger = logging.getLogger(__name__)


class LRSchedule:
    """The learning rate for a step, from `train.lr_schedule`:

    - constant: `lr` throughout;
    - plateau: multiplied by `lr_decay_factor` after `lr_decay_patience` validations without a
      better BLEU (independent of early stopping's `patience`);
    - linear: falls linearly from `lr` to `min_lr` over the budget. `progress` is the budget's
      used share (steps, minutes or epochs, whichever runs out first), so a 12-minute run
      decays over 12 minutes and a 30-minute one over 30.
    """

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        self.scale = 1.0  # the plateau schedule's accumulated decay
        self.stale = 0  # validations without improvement since the last decay

    def lr(self, step: int, progress: float) -> float:
        cfg = self.cfg
        if cfg.lr_schedule == "linear":
            lr = cfg.min_lr + (cfg.lr - cfg.min_lr) * max(0.0, 1.0 - progress)
        else:
            lr = max(cfg.lr * self.scale, cfg.min_lr)
        if cfg.warmup_steps and step < cfg.warmup_steps:
            lr *= (step + 1) / cfg.warmup_steps
        return lr

    def on_validation(self, improved: bool) -> None:
        if self.cfg.lr_schedule != "plateau":
            return
        self.stale = 0 if improved else self.stale + 1
        if self.stale >= self.cfg.lr_decay_patience:
            self.scale *= self.cfg.lr_decay_factor
            self.stale = 0
            logger.info("validation BLEU plateaued: learning rate now %.2e", max(self.cfg.lr * self.scale, self.cfg.min_lr))

    def state_dict(self) -> dict:
        return {"scale": self.scale, "stale": self.stale}

    def load_state_dict(self, state: dict) -> None:
        self.scale, self.stale = state["scale"], state["stale"]
