"""The budget of a run: when training stops (the step and time budget, and Ctrl-C or SIGTERM turned
into a clean save) and the learning rate that follows it (constant, or linear decay to its end)."""

from __future__ import annotations

import logging
import signal
import threading
import time

from nmt.config import TrainConfig
from nmt.errors import NmtError

logger = logging.getLogger(__name__)


class Budget:
    """Stops training at max_steps or max_minutes, whichever comes first (0 disables either)."""

    def __init__(self, max_steps: int, max_minutes: float, already_elapsed: float = 0.0):
        self.max_steps, self.max_seconds = max_steps, max_minutes * 60
        self.start = time.monotonic() - already_elapsed  # a resumed run continues its clock

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def progress(self, step: int, total_steps: int, elapsed: float | None = None) -> float:
        """The used share of the budget in [0, 1]: steps, minutes or `total_steps` (the
        configured epochs), whichever runs out first. `elapsed` replaces this process's clock
        (under DDP all ranks must agree on it, or their learning rates would differ)."""
        shares = [step / total_steps]
        if self.max_steps:
            shares.append(step / self.max_steps)
        if self.max_seconds:
            shares.append((self.elapsed() if elapsed is None else elapsed) / self.max_seconds)
        return min(1.0, max(shares))

    def exhausted(self, step: int) -> str | None:
        if self.max_steps and step >= self.max_steps:
            return f"train.max_steps={self.max_steps} reached"
        if self.max_seconds and self.elapsed() >= self.max_seconds:
            return f"time budget of {self.max_seconds / 60:g} min reached"
        return None


class LRSchedule:
    """The learning rate for a step, from `train.lr_schedule`:

    - constant: `lr` throughout;
    - linear: falls linearly from `lr` to `min_lr` over the budget. `progress` is the budget's
      used share (steps, minutes or epochs, whichever runs out first: `Budget.progress`), so a
      12-minute run decays over 12 minutes and a 30-minute one over 30.

    Either with an optional linear warm-up (`train.warmup_steps`).
    """

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg

    def lr(self, step: int, progress: float) -> float:
        cfg = self.cfg
        lr = cfg.min_lr + (cfg.lr - cfg.min_lr) * max(0.0, 1.0 - progress) if cfg.lr_schedule == "linear" else cfg.lr
        if cfg.warmup_steps and step < cfg.warmup_steps:
            lr *= (step + 1) / cfg.warmup_steps
        return lr


class TrainingInterrupted(NmtError):
    """Ctrl-C or SIGTERM: a checkpoint was saved; the message says how to resume."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + signum


class StopSignals:
    """While active, SIGINT and SIGTERM only set a flag: the loop saves at the next step boundary."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._caught: set[int] = set()  # the signals this process itself caught, not one a peer reported

    def __enter__(self) -> StopSignals:
        self._previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def from_peer(self, signum: int) -> None:
        """Another rank was signalled: stop as if this one had been. Its own copy of the signal,
        which torchrun may deliver a moment later, is then the same request, not a second one."""
        if self.received is None:
            self.received = signum

    def _handle(self, signum: int, frame: object) -> None:
        if signum in self._caught:  # a second Ctrl-C while saving: give up at once
            raise KeyboardInterrupt
        self._caught.add(signum)
        if self.received is not None:  # torchrun's SIGTERM after the terminal's SIGINT, or a peer's: already saving
            return
        self.received = signum
        logger.warning("%s received: saving a checkpoint at the end of this step",
                       signal.Signals(signum).name)

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
