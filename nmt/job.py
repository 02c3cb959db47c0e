"""A training job as `nmt train` starts it: the config (or the run `--resume` continues), the
checks that must pass before anything is written, this process's place in a torchrun world, and
the run directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nmt import distributed
from nmt.checkpoint import prepare_run_dir, resume_target
from nmt.config import Config, load_config
from nmt.corpus import resolve_corpus
from nmt.errors import NmtError
from nmt.train import resolve_runtime

DEFAULT_CONFIG = Path("configs/default.yaml")


@dataclass(frozen=True)
class Job:
    cfg: Config
    out_dir: Path
    resume: dict | None  # the checkpoint to continue from
    world: distributed.World


def job_config(target: Path | None, resume: bool, overrides: list[str]) -> tuple[Config, Path | None, dict | None]:
    """The config to train (from `target`, or the run `--resume` continues), the run directory
    when resuming, and the checkpoint to resume from. The device and precision are checked here,
    so that `--device cuda` without CUDA or a bf16 that cannot run fail before anything is written."""
    if resume:
        cfg, run_dir, state = resume_target(target, overrides)
    else:
        cfg, run_dir, state = load_config(target or DEFAULT_CONFIG, overrides), None, None
    resolve_runtime(cfg)
    return cfg, run_dir, state


def check_job(target: Path | None, resume: bool, overrides: list[str], data_path: str | None) -> None:
    """Fail in one line before torchrun starts N processes that would each fail; find (or
    download) the corpus once, before they all look for it."""
    cfg = job_config(target, resume, overrides)[0]
    resolve_corpus(data_path, cfg.data)


def start_job(target: Path | None, resume: bool, overrides: list[str], out: Path | None,
              data_path: str | None = None) -> Job:
    """The config, this process's place in a torchrun world, and the run directory: made by rank 0
    once the config, the device, the precision and the corpus's whereabouts have been checked, so
    such a mistake leaves nothing behind."""
    if resume and out is not None:
        raise NmtError("--resume continues a run in its own directory; drop --out")
    cfg, run_dir, state = job_config(target, resume, overrides)
    world = distributed.init(cfg.train.device)
    if world.is_main:
        resolve_corpus(data_path, cfg.data)  # found (or downloaded) before a directory is made for it
    if run_dir is None:
        made = prepare_run_dir(out, target or DEFAULT_CONFIG) if world.is_main else None
        run_dir = distributed.from_main(made, world)  # the others learn rank 0's directory
    return Job(cfg, run_dir, state, world)
