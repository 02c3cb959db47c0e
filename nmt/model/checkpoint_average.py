"""Checkpoint averaging (`nmt average`): the element-wise mean of the weights of several
checkpoints of one run (or of runs with one architecture and vocabularies), written as a
checkpoint every command reads. It streams: the running sum and the one checkpoint being read are
all it holds, whatever their number (each is memory-mapped, so its optimizer state is never read)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from nmt.data.manifest import file_sha256
from nmt.data.prepared_corpus import CASED_WORDS, TARGET_WORDS, TRAINING_WORDS
from nmt.data.tokenizer import SUBWORD_FILES
from nmt.errors import CheckpointError, NmtError
from nmt.model.checkpoint import atomic_save, read_checkpoint
from nmt.model.runs import BEST, LAST, resolve_checkpoint

AVERAGED = "averaged.pt"
# What a checkpoint needs beside it to translate and to be evaluated: copied along when the
# average is written outside the run directory.
RUN_FILES = (*SUBWORD_FILES, "src_vocab.txt", "tgt_vocab.txt", TRAINING_WORDS, TARGET_WORDS, CASED_WORDS, "config.yaml")


def last_checkpoints(run: Path, count: int) -> list[Path]:
    """The newest `count` rotating checkpoints of `run` (ckpt-<step>.pt), oldest first."""
    if not run.is_dir():
        raise CheckpointError(f"run directory not found: {run}")
    kept = sorted(run.glob("ckpt-*.pt"))
    if count > len(kept):
        raise NmtError(f"--last {count}: {run} keeps {len(kept)} checkpoint(s) ({', '.join(p.name for p in kept)}); "
                       f"ask for at most {len(kept)}, or train with a larger train.keep_last")
    return kept[len(kept) - count:]


def _difference(first: dict[str, Any], other: dict[str, Any]) -> str:
    if first["config"]["model"] != other["config"]["model"]:
        keys = sorted(k for k in first["config"]["model"] if first["config"]["model"][k] != other["config"]["model"].get(k))
        return f"their architectures differ (model.{keys[0] if keys else '?'})"
    for side in ("src_vocab", "tgt_vocab"):
        if first[side] != other[side]:
            return f"their {'source' if side == 'src_vocab' else 'target'} vocabularies differ"
    return ""


def average_checkpoints(paths: list[Path], out: Path) -> dict[str, Any]:
    """Write the average of `paths` to `out` (atomically) and return what it records."""
    if len(paths) < 2:
        raise NmtError("averaging needs at least two checkpoints")
    if out.resolve() in {p.resolve() for p in paths} or out.name in (BEST, LAST):
        raise NmtError(f"--out {out} would overwrite a checkpoint of the run; name another file")
    sums: dict[str, dict[str, torch.Tensor]] = {}
    first: dict[str, Any] | None = None
    record = []
    for path in paths:
        state = read_checkpoint(path, mmap=True)
        if first is None:
            first = {"config": state["config"], "src_vocab": state["src_vocab"], "tgt_vocab": state["tgt_vocab"]}
        elif difference := _difference(first, state):
            raise CheckpointError(f"cannot average {paths[0]} with {path}: {difference}")
        for part in ("model",):
            total = sums.setdefault(part, {})
            for name, tensor in state[part].items():
                if not tensor.is_floating_point():
                    total[name] = tensor.clone()  # a count or an id: the newest one's
                elif name in total:
                    total[name] += tensor
                else:
                    total[name] = tensor.float().clone()
        record.append({"checkpoint": str(path), "step": (state.get("progress") or {}).get("step"),
                       "sha256": file_sha256(path)})
        del state  # the next one replaces it
    averaged = {part: {name: (t / len(paths) if t.is_floating_point() else t) for name, t in total.items()}
                for part, total in sums.items()}
    last = read_checkpoint(paths[-1], mmap=True)
    state = {**averaged, "optimizer": None, "config": last["config"], "src_vocab": last["src_vocab"],
             "tgt_vocab": last["tgt_vocab"], "progress": {"step": record[-1]["step"]},
             "corpus": last.get("corpus"), "averaged": record}
    out.parent.mkdir(parents=True, exist_ok=True)
    _copy_run_files(paths[-1].parent, out.parent)
    atomic_save(state, out)
    return state


def _copy_run_files(run: Path, folder: Path) -> None:
    """The tokenizer, vocabularies and training words a checkpoint needs beside it."""
    if run.resolve() == folder.resolve():
        return
    for name in RUN_FILES:
        if (run / name).is_file() and not (folder / name).exists():
            shutil.copyfile(run / name, folder / name)


def resolve_inputs(targets: list[str], last: int | None) -> list[Path]:
    """`nmt average`'s arguments: one run with --last N, or checkpoint files and run directories
    (a run directory counts as its best.pt)."""
    if last is not None:
        if len(targets) != 1:
            raise NmtError("--last N takes one run directory (list checkpoints yourself to average across runs)")
        if last < 2:
            raise NmtError(f"--last {last}: average at least two checkpoints")
        return last_checkpoints(Path(targets[0]), last)
    return [resolve_checkpoint(target) for target in targets]
