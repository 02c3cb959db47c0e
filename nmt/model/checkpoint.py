"""Checkpoints: atomic writes, safe loads, and the model (or ensemble) a checkpoint holds.

A checkpoint is a plain dict of tensors, numbers, strings and lists, so it loads with
`torch.load(weights_only=True)`: a checkpoint from a stranger cannot run code.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from nmt.config import Config, saved_config
from nmt.data.tokenizer import Tokenizer, load_tokenizer
from nmt.data.vocab import Vocab
from nmt.errors import CheckpointError, ConfigError
from nmt.files import write_atomically
from nmt.model import Seq2Seq, build_model
from nmt.model.runs import LAST, ensemble_members, resolve_checkpoint

logger = logging.getLogger(__name__)


def atomic_save(obj: Any, path: Path) -> None:
    """A crash or a full disk mid-save leaves the previous file at `path` untouched."""
    write_atomically(path, lambda f: torch.save(obj, f), durable=True)


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
    # An ensemble (`-c A+B`): every member (the fields above are the first's) and their weights.
    members: list[LoadedModel] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)

    @property
    def name(self) -> str:
        """How results name it: the checkpoint, or an ensemble's members joined by '+'."""
        if not self.members:
            return str(self.path)
        weighted = len(set(self.weights)) > 1
        return "+".join(f"{m.path}:{w:g}" if weighted else str(m.path) for m, w in zip(self.members, self.weights))


def read_checkpoint(path: Path, mmap: bool = False) -> dict[str, Any]:
    """A checkpoint's dict; with `mmap`, its tensors are read from the file only where used."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
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
        cfg = saved_config(state["config"])
        src_vocab, tgt_vocab = Vocab(state["src_vocab"]), Vocab(state["tgt_vocab"])
    except (ConfigError, ValueError) as e:
        raise CheckpointError(f"{path}: its config or vocabulary is invalid ({e})") from None
    tokenizer = load_tokenizer(cfg.data, path.parent, src_vocab, tgt_vocab)
    model = build_model(cfg.model, src_vocab, tgt_vocab)
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError) as e:
        detail = str(e).strip().splitlines()
        raise CheckpointError(f"{path}: weights do not fit the model in its config "
                              f"({detail[1].strip() if len(detail) > 1 else detail[0]})") from None
    model.to(device).eval()
    return LoadedModel(model, cfg, src_vocab, tgt_vocab, path, state, tokenizer)


def load_models(spec: str | Path | None, device: torch.device = torch.device("cpu")) -> LoadedModel:
    """`load_model` of one checkpoint, or of every member of an ensemble (`-c A+B`), checked to
    share the tokenizer and vocabularies; members may differ in anything else."""
    members = ensemble_members(spec)
    if members is None:
        return load_model(spec, device)
    loaded = [load_model(path, device) for path, _ in members]
    for other in loaded[1:]:
        if difference := vocabulary_difference(loaded[0], other):
            raise CheckpointError(f"{loaded[0].path} and {other.path} cannot decode as one ensemble: {difference}")
    for member in loaded:  # their weights are in the models now: keep only what describes them
        member.state = {key: value for key, value in member.state.items() if key not in ("model", "optimizer")}
    weights = [1.0 if weight is None else weight for _, weight in members]
    return replace(loaded[0], members=loaded, weights=weights)


def vocabulary_difference(a: LoadedModel, b: LoadedModel) -> str:
    """What keeps two models from sharing one search: a difference in direction, tokenizer or
    vocabularies ('' when there is none)."""
    for what, x, y in (("translation direction", (a.tokenizer.source_lang, a.tokenizer.target_lang),
                        (b.tokenizer.source_lang, b.tokenizer.target_lang)),
                       ("tokenizer", a.tokenizer.kind, b.tokenizer.kind),
                       ("data.protect", a.cfg.data.protect, b.cfg.data.protect)):
        if x != y:
            return f"their {what} differs ({x} vs {y})"
    for side, x, y in (("source", a.src_vocab, b.src_vocab), ("target", a.tgt_vocab, b.tgt_vocab)):
        if x.itos != y.itos:
            return (f"their {side} vocabularies differ ({len(x.itos):,} vs {len(y.itos):,} entries); an ensemble's "
                    f"models must share the tokenizer and vocabularies (train them on one prepared corpus)")
    if getattr(a.tokenizer, "models", None) != getattr(b.tokenizer, "models", None):
        return "their subword models differ (the same pieces, cut differently); train them on one prepared corpus"
    return ""
