"""Progress of a long loop: tqdm's bar on a terminal, and off one (a log file, a cluster job, CI)
a plain log line every few seconds instead of carriage-return redraws, as fairseq's simple format."""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType

from tqdm import tqdm

logger = logging.getLogger(__name__)


def on_terminal() -> bool:
    return sys.stderr.isatty()


class Meter:
    """Counts work done out of `total` (`unit`s); `update(n)` as it goes."""

    def __init__(self, total: float | None, desc: str, unit: str = "it", quiet: bool = False,
                 every_s: float = 10.0, unit_scale: bool = False):
        self.total, self.desc, self.unit, self.every_s, self.done = total, desc, unit, every_s, 0.0
        self.plain = not quiet and not on_terminal()
        self.bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, dynamic_ncols=True,
                        disable=quiet or self.plain, leave=False)
        self.start = self.last = time.monotonic()

    def update(self, n: float = 1) -> None:
        self.done += n
        self.bar.update(n)
        if self.plain and time.monotonic() - self.last >= self.every_s:
            self.last = time.monotonic()
            logger.info("%s: %s", self.desc, self.line())

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        rate = self.done / max(elapsed, 1e-9)
        done = f"{self.done:,.0f}" + (f" of {self.total:,.0f}" if self.total else "")
        share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        eta = f", ETA {(self.total - self.done) / rate:.0f} s" if self.total and rate > 0 else ""
        return f"{done} {self.unit}{share} in {elapsed:.0f} s{eta}"

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
