"""Checkpoints: atomic writes, safe loads, and finding the checkpoint a command should use.

A checkpoint is a plain dict of tensors, numbers, strings and lists, so it loads with
`torch.load(weights_only=True)`: a checkpoint from a stranger cannot run code.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import torch

from nmt.config import Config, apply_overrides, config_from_dict
from nmt.data.tokenizer import Tokenizer, load_tokenizer
from nmt.data.vocab import Vocab
from nmt.errors import CheckpointError, ConfigError, NmtError
from nmt.model import Seq2Seq, build_model
from nmt.model.moving_average import load_averaged

logger = logging.getLogger(__name__)

RUNS_DIR = Path("runs")
BEST, LAST = "best.pt", "last.pt"


def atomic_save(obj: Any, path: Path) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over `path`.

    A crash or a full disk mid-save leaves the previous file at `path` untouched.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def checkpoint_state(model: Seq2Seq, optimizer: torch.optim.Optimizer | None, cfg: Config,
                     src_vocab: Vocab, tgt_vocab: Vocab, progress: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "config": cfg.to_dict(),
        "src_vocab": src_vocab.itos,
        "tgt_vocab": tgt_vocab.itos,
        "progress": progress,  # step, epoch, data position, RNG states, best validation record
    }


def save_checkpoint(path: Path, model: Seq2Seq, optimizer: torch.optim.Optimizer | None, cfg: Config,
                    src_vocab: Vocab, tgt_vocab: Vocab, progress: dict[str, Any]) -> None:
    atomic_save(checkpoint_state(model, optimizer, cfg, src_vocab, tgt_vocab, progress), path)


def rotating_name(step: int) -> str:
    return f"ckpt-{step:08d}.pt"


def publish(source: Path, dest: Path) -> None:
    """Atomically make `dest` the same file as `source`: a hard link, so nothing is written twice
    (a copy where links are not supported). Deleting `source` later leaves `dest` intact."""
    tmp = dest.with_name(f".{dest.name}.link")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, dest)


def save_rotating(run_dir: Path, state: dict[str, Any], step: int, keep_last: int) -> Path:
    """Write ckpt-<step>.pt atomically, point last.pt at it, and delete all but the newest `keep_last`."""
    path = run_dir / rotating_name(step)
    atomic_save(state, path)
    publish(path, run_dir / LAST)
    for old in sorted(run_dir.glob("ckpt-*.pt"))[:-keep_last]:
        old.unlink(missing_ok=True)
    return path


def newest_good_checkpoint(run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """The newest checkpoint of a run that loads, newest step first; corrupt ones are skipped with
    a warning, so a crash in the middle of a save costs at most the steps since the one before."""
    candidates = sorted(run_dir.glob("ckpt-*.pt"), reverse=True) + [run_dir / LAST]
    skipped = []
    for path in candidates:
        if not path.is_file():
            continue
        try:
            state = read_checkpoint(path)
        except CheckpointError as e:
            skipped.append(str(e))
            continue
        if "progress" not in state or "rng" not in state["progress"]:
            skipped.append(f"{path}: holds no training progress")
            continue
        for message in skipped:
            logger.warning("skipping %s", message)
        if skipped:
            logger.warning("resuming from the newest good checkpoint, %s", path)
        return path, state
    detail = f" ({'; '.join(skipped)})" if skipped else ""
    raise CheckpointError(f"{run_dir}: no checkpoint to resume from{detail}")


@dataclass
class LoadedModel:
    model: Seq2Seq
    cfg: Config
    src_vocab: Vocab
    tgt_vocab: Vocab
    path: Path
    state: dict[str, Any]
    tokenizer: Tokenizer


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


def read_checkpoint(path: Path) -> dict[str, Any]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "unsafe content"
        raise CheckpointError(f"{path}: refused to load: not a plain nmt checkpoint ({first[:200]})") from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as e:
        raise CheckpointError(f"{path}: corrupt or truncated checkpoint ({str(e).strip()[:200]})") from None
    required = {"model", "config", "src_vocab", "tgt_vocab"}
    if not isinstance(state, dict) or not required <= set(state):
        raise CheckpointError(f"{path}: not an nmt checkpoint (expected keys {sorted(required)})")
    return state


def load_model(checkpoint: str | Path | None, device: torch.device = torch.device("cpu")) -> LoadedModel:
    """Rebuild the model from the checkpoint (its config and vocabularies travel inside it) and,
    for a subword model, the SentencePiece models beside it in its run directory."""
    path = resolve_checkpoint(checkpoint)
    state = read_checkpoint(path)
    try:
        cfg = config_from_dict(state["config"])
        src_vocab, tgt_vocab = Vocab(state["src_vocab"]), Vocab(state["tgt_vocab"])
    except (ConfigError, ValueError) as e:
        raise CheckpointError(f"{path}: its config or vocabulary is invalid ({e})") from None
    tokenizer = load_tokenizer(cfg.data, path.parent, src_vocab, tgt_vocab)
    model = build_model(cfg.model, src_vocab, tgt_vocab)
    try:
        model.load_state_dict(state["model"])
        if state.get("ema"):  # trained with train.ema_decay: translate with the averaged weights
            load_averaged(model, state["ema"])
    except (RuntimeError, KeyError) as e:
        detail = str(e).strip().splitlines()
        raise CheckpointError(f"{path}: weights do not fit the model in its config "
                              f"({detail[1].strip() if len(detail) > 1 else detail[0]})") from None
    model.to(device).eval()
    return LoadedModel(model, cfg, src_vocab, tgt_vocab, path, state, tokenizer)


def resume_target(run: Path | None, overrides: list[str]) -> tuple[Config, Path, dict[str, Any]]:
    """The run `nmt train --resume` continues (default: the newest run with a last.pt), its config
    with `overrides` applied (train.* and decode.* only), and its newest good checkpoint."""
    run_dir = run if run is not None else newest_run(holding=LAST)
    if not run_dir.is_dir():
        raise NmtError(f"--resume: {run_dir} is not a run directory")
    path, state = newest_good_checkpoint(run_dir)
    fixed = [o for o in overrides if o.split(".", 1)[0] in ("data", "model")]
    if fixed:
        raise NmtError(f"--resume: {fixed[0]!r} would change the data or the model of a run; "
                       f"only train.* and decode.* can change when resuming")
    try:
        cfg = config_from_dict(apply_overrides(state["config"], overrides))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    return cfg, run_dir, state


def truncate_metrics(path: Path, step: int) -> None:
    """On resume, forget validation records written after the checkpoint we resume from."""
    if path.is_file():
        lines = [x for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        kept = [x for x in lines if json.loads(x)["step"] <= step]
        if len(kept) != len(lines):
            path.write_text("".join(x + "\n" for x in kept), encoding="utf-8")
