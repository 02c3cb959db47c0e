"""TensorBoard curves of a run (train.tensorboard): the training loss, learning rate and tok/s at
every log line, the validation loss, BLEU and chrF at every validation, in RUN/tensorboard/.
`tensorboard --logdir runs` shows them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nmt.errors import ConfigError

INSTALL = 'pip install -e ".[tensorboard]"'


class Board:
    """Scalars to TensorBoard, or nothing when it is off (every caller writes unconditionally)."""

    def __init__(self, out_dir: Path | None, first_step: int = 0):
        self.writer: Any = None
        if out_dir is None:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # torch's writer needs the tensorboard package
            raise ConfigError(f"train.tensorboard=true needs the tensorboard package: {INSTALL}") from None
        # A resumed run drops what the interrupted one wrote after its checkpoint, as metrics.jsonl
        # does; a flush every 10 s keeps what an interrupted run had shown.
        self.writer = SummaryWriter(str(out_dir / "tensorboard"), purge_step=first_step or None, flush_secs=10)

    def scalars(self, step: int, values: dict[str, float]) -> None:
        if self.writer is not None:
            for name, value in values.items():
                self.writer.add_scalar(name, value, step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
