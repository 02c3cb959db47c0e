"""Where training stands: the position and records a checkpoint keeps (so a resumed run continues
exactly), the losses not yet checked to be finite, and the running figures of the log line."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from nmt.errors import NmtError

logger = logging.getLogger(__name__)


@dataclass
class Progress:
    step: int = 0
    epoch: int = 1
    batch_in_epoch: int = 0
    best: dict = field(default_factory=dict)  # the best validation record
    stale: int = 0  # validations since one that bettered the best BLEU or the lowest loss, for early stopping
    lowest_loss: float = math.inf  # the lowest validation loss so far
    train_loss_sum: torch.Tensor | float = 0.0  # since the last validation, for metrics.jsonl
    train_tokens: int = 0
    unchecked: list = field(default_factory=list)  # (step, loss) not yet checked to be finite; not saved

    def advance(self, loss: torch.Tensor | float, tokens: int, batches: int = 1) -> None:
        """One optimizer step made of `batches` of the epoch's batches."""
        self.step += 1
        self.batch_in_epoch += batches
        self.train_loss_sum = self.train_loss_sum + loss * tokens
        self.train_tokens += tokens
        self.unchecked.append((self.step, loss))

    def next_epoch(self) -> None:
        self.epoch += 1
        self.batch_in_epoch = 0

    def take_train_loss(self) -> float:
        """The mean training loss since the last call."""
        mean = float(self.train_loss_sum) / max(self.train_tokens, 1)
        self.train_loss_sum, self.train_tokens = 0.0, 0
        return mean

    def record(self, record: dict) -> bool:
        """Note a validation; whether it is the best so far (by BLEU, then loss). Compared as
        recorded (BLEU to 0.01, loss to 1e-4): float noise is not an improvement. Early stopping
        counts validations that better neither the best BLEU nor the lowest loss: a greedy BLEU on
        500 sentences stalls for a few validations while the loss still falls, and the end of a
        decaying learning rate is where a budgeted run gains most (Multi30k de->en stopped at 23 of
        30 minutes on a stalled BLEU with the loss still falling; docs/results.md)."""
        improved = not self.best or (record["val_bleu"], -record["val_loss"]) > (self.best["val_bleu"],
                                                                                -self.best["val_loss"])
        learning = improved or record["val_loss"] < self.lowest_loss
        self.best = record if improved else self.best
        self.lowest_loss = min(self.lowest_loss, record["val_loss"])
        self.stale = 0 if learning else self.stale + 1
        return improved

    def check_losses(self, device: torch.device, out_dir: Path) -> None:
        """Raise if a loss since the last check is not finite. Run before every log line and save
        (one wait for the GPU per check, not per step), so no checkpoint holds a diverged model."""
        if not self.unchecked:
            return
        steps, losses = zip(*self.unchecked)
        self.unchecked = []
        values = torch.stack([torch.as_tensor(x, device=device, dtype=torch.float64) for x in losses]).tolist()
        for step, value in zip(steps, values):
            if not math.isfinite(value):
                raise NmtError(f"the loss became {value} at step {step}; the last good checkpoints are kept in "
                               f"{out_dir}; lower train.lr or train.clip_grad and resume or train again")

    def state_dict(self) -> dict:
        return {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch, "best": self.best,
                "train_loss": [float(self.train_loss_sum), self.train_tokens], "stale": self.stale,
                "lowest_loss": self.lowest_loss, "rng": {}}

    def load_state_dict(self, state: dict) -> None:
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.best, self.stale = state["best"], state["stale"]
        self.lowest_loss = state.get("lowest_loss", self.best.get("val_loss", math.inf))  # runs saved before it
        self.train_loss_sum, self.train_tokens = state["train_loss"]


def clock(seconds: float) -> str:
    """1:02:03, or 2:03 under an hour."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class LossWindow:
    """Mean loss and target tokens/s since the last log line. Losses are summed on the device
    and read only when the log asks, so no step waits for the GPU."""

    def __init__(self) -> None:
        self.loss_sum: torch.Tensor | float = 0.0
        self.tokens, self.start = 0, time.monotonic()

    def add(self, loss: torch.Tensor | float, tokens: int) -> None:
        self.loss_sum = self.loss_sum + loss * tokens
        self.tokens += tokens

    def log(self, bar: tqdm, step: int, epoch: int, lr: float, elapsed: float, used: float
            ) -> tuple[LossWindow, dict[str, float]]:
        """Write the log line (`elapsed` seconds of the run, `used` share of its budget); returns
        the next window and the line's figures."""
        mean = float(self.loss_sum) / max(self.tokens, 1)
        tok_s = self.tokens / max(time.monotonic() - self.start, 1e-9)
        bar.set_postfix(loss=f"{mean:.3f}", tok_s=f"{tok_s:,.0f}", refresh=False)
        eta = clock(elapsed * (1 - used) / used) if used > 0 else "?"
        logger.info("step %d | epoch %d | loss %.3f | ppl %.1f | lr %.1e | %s tok/s | %s elapsed, ETA %s", step, epoch,
                    mean, math.exp(min(mean, 50)), lr, f"{tok_s:,.0f}", clock(elapsed), eta)
        return LossWindow(), {"train/loss": mean, "train/lr": lr, "train/tok_s": tok_s}
