"""Writing a file so that it is never half there: checkpoints, caches and records alike."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def write_atomically(path: Path, write: Callable[[BinaryIO], object], durable: bool = False) -> None:
    """`write` into a temporary file beside `path`, then rename it over `path`: a crash, a kill or
    a full disk mid-write leaves the previous file (or none), never part of one. `durable`: on
    disk (fsync) before the rename, for what a user cannot make again (checkpoints)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomically(path: Path, text: str) -> None:
    write_atomically(path, lambda f: f.write(text.encode("utf-8")))
