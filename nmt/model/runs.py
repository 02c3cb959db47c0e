"""Run directories: where a new run is made, which checkpoint a command means (a file, a run's
best.pt, the newest run, or an ensemble's members joined by '+'), and a run's metrics cut back to
the checkpoint it resumes from. Reading and writing the checkpoints is nmt.model.checkpoint's job.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

from nmt.errors import CheckpointError, NmtError

RUNS_DIR = Path("runs")
BEST, LAST = "best.pt", "last.pt"


def prepare_run_dir(out: Path | None, config_path: Path, runs_dir: Path = RUNS_DIR) -> Path:
    """The run directory: `out`, or a new time-stamped one under runs/. Never reuse a non-empty one."""
    if out is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        out = runs_dir / f"{stamp}-{config_path.stem}"
        suffix = 1
        while out.exists():
            suffix += 1
            out = runs_dir / f"{stamp}-{config_path.stem}-{suffix}"
    elif out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise NmtError(f"run directory {out} already exists and is not empty; "
                       f"choose another --out (nothing was overwritten)")
    out.mkdir(parents=True, exist_ok=True)
    return out


def newest_run(runs_dir: Path = RUNS_DIR, holding: str = BEST) -> Path:
    """The most recently written run directory under `runs_dir` that holds `holding`."""
    runs = sorted((p for p in runs_dir.glob(f"*/{holding}")), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise CheckpointError(f"no trained model found under {runs_dir}/: train first "
                              f"(nmt train) or pass --checkpoint PATH")
    return runs[-1].parent


def resolve_checkpoint(checkpoint: str | Path | None, runs_dir: Path = RUNS_DIR) -> Path:
    """A checkpoint file, a run directory (its best.pt), or by default the newest run's best.pt."""
    if checkpoint is None:
        return newest_run(runs_dir) / BEST
    path = Path(checkpoint)
    if path.is_dir():
        for name in (BEST, LAST):
            if (path / name).is_file():
                return path / name
        raise CheckpointError(f"{path}: no {BEST} or {LAST} in this run directory: train first")
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}: train first or pass an existing "
                              f"checkpoint file or run directory")
    return path


def ensemble_members(spec: str | Path | None) -> list[tuple[str, float | None]] | None:
    """`-c A+B` (an ensemble; `A:2+B:1` weighs its members) as [(A, None), (B, None)]; None for one
    checkpoint (a path that exists is one, whatever its name holds)."""
    if spec is None or "+" not in str(spec) or Path(spec).exists():
        return None
    members = []
    for part in str(spec).split("+"):
        path, _, weight = part.rpartition(":")
        if not path or Path(part).exists():  # no weight given (or a path with a colon in it)
            members.append((part, None))
            continue
        try:
            value = float(weight)
        except ValueError:
            raise NmtError(f"ensemble member {part!r}: the weight after ':' must be a positive number "
                           f"(e.g. -c runs/a:2+runs/b:1)") from None
        if not (value > 0 and math.isfinite(value)):
            raise NmtError(f"ensemble member {part!r}: the weight must be a positive number (got {weight})")
        members.append((path, value))
    if not all(path for path, _ in members):
        raise NmtError(f"-c {spec}: an ensemble is runs or checkpoints joined by '+', e.g. -c runs/a+runs/b")
    if len({weight is None for _, weight in members}) > 1:
        raise NmtError(f"-c {spec}: give every member of the ensemble a weight, or none (e.g. runs/a:2+runs/b:1)")
    return members


def truncate_metrics(path: Path, step: int) -> None:
    """On resume, forget validation records written after the checkpoint we resume from."""
    if path.is_file():
        lines = [x for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        kept = [x for x in lines if json.loads(x)["step"] <= step]
        if len(kept) != len(lines):
            path.write_text("".join(x + "\n" for x in kept), encoding="utf-8")
