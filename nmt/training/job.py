"""A training job as `nmt train` starts it: the config (or the run `--resume` continues), the
checks that must pass before anything is written, this process's place in a torchrun world, and
the run directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.config import AUTO, Config, apply_overrides, load_config, saved_config
from nmt.data.corpus import recorded_corpus, resolve_corpus
from nmt.data.manifest import corpus_change
from nmt.errors import ConfigError, NmtError
from nmt.model.checkpoint import newest_good_checkpoint
from nmt.model.runs import LAST, newest_run, prepare_run_dir
from nmt.training import distributed
from nmt.training.distill import Teacher
from nmt.training.finetune import Parent, child_config, load_parent, student_config
from nmt.training.run_setup import resolve_runtime

DEFAULT_CONFIG = Path("configs/default.yaml")
STUDENT_CONFIG = Path("configs/student.yaml")


@dataclass(frozen=True)
class Job:
    cfg: Config
    out_dir: Path
    resume: dict | None  # the checkpoint to continue from
    world: distributed.World
    data_path: str | None = None  # the corpus: --data, or the one a resumed run trained on
    parent: Parent | None = None  # --init-from: the checkpoint whose weights the run starts from


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
        cfg = saved_config(apply_overrides(state["config"], overrides))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    return cfg, run_dir, state


def job_config(target: Path | None, resume: bool, overrides: list[str], init_from: str | None = None,
               teacher: Teacher | None = None) -> tuple[Config, Path | None, dict | None, Parent | None]:
    """The config to train (from `target`, the run `--resume` continues, the parent `--init-from`
    names with `target`'s training settings, or a student of `teacher`'s vocabularies), the run
    directory when resuming, the checkpoint to resume from, and the parent (a teacher's
    vocabularies). The device and precision are checked here, so that `--device cuda` without
    CUDA or a bf16 that cannot run fail before anything is written."""
    parent = None
    if resume and init_from:
        raise NmtError("--resume continues a run where it stopped; --init-from starts a new run from another's "
                       "weights: give one of them")
    if resume:
        cfg, run_dir, state = resume_target(target, overrides)
    elif init_from:
        parent = load_parent(init_from)
        cfg, run_dir, state = child_config(parent, target, overrides), None, None
    elif teacher is not None:
        parent = load_parent(str(teacher.vocabulary_checkpoint), weights=False)
        cfg = student_config(parent, target or STUDENT_CONFIG, overrides, (teacher.spec, teacher.sha256))
        run_dir, state = None, None
    else:
        cfg, run_dir, state = load_config(target or DEFAULT_CONFIG, overrides), None, None
        if cfg.model.hidden_size == AUTO:
            raise ConfigError("model.embed_size and model.hidden_size are auto: a student's width, which nmt distill "
                              "sizes to its teacher; to train this config alone give numbers (--set "
                              "model.embed_size=80 --set model.hidden_size=80)")
    resolve_runtime(cfg)
    return cfg, run_dir, state, parent


def find_corpus(data_path: str | None, cfg: Config, state: dict | None) -> tuple[Path, str | None]:
    """The corpus (and the --data to pass on). A resumed run takes the corpus it trained on unless
    --data names one, and refuses another: its vocabularies and its position in the epoch belong
    to that corpus. Checkpoints from before the record resume as they always did."""
    recorded = (state or {}).get("corpus")
    data_path = resumed_corpus(data_path, state, cfg)
    corpus = resolve_corpus(data_path, cfg.data)
    if recorded:
        if recorded["path"] != str(corpus.resolve()):
            change = f"it trained on {recorded['path']}, not {corpus}"
        else:
            change = corpus_change(recorded, corpus, cfg.data)
        if change:
            raise NmtError(f"--resume continues a run on its own corpus, but {change}; to continue training on "
                           f"other data, start a new run from it: nmt train --init-from RUN --data {corpus}")
    return corpus, data_path


def resumed_corpus(data_path: str | None, state: dict | None, cfg: Config) -> str | None:
    """--data, or for a resumed run without it the corpus it trained on, where that still is."""
    return data_path or recorded_corpus(state, cfg.data)


def check_job(target: Path | None, resume: bool, overrides: list[str], data_path: str | None,
              init_from: str | None = None) -> None:
    """Fail in one line before torchrun starts N processes that would each fail; find (or
    download) the corpus once, before they all look for it."""
    cfg, _, state, _ = job_config(target, resume, overrides, init_from)
    find_corpus(data_path, cfg, state)


def start_job(target: Path | None, resume: bool, overrides: list[str], out: Path | None,
              data_path: str | None = None, init_from: str | None = None, teacher: Teacher | None = None) -> Job:
    """The config, this process's place in a torchrun world, and the run directory: made by rank 0
    once the config, the device, the precision and the corpus's whereabouts have been checked, so
    such a mistake leaves nothing behind."""
    if resume and out is not None:
        raise NmtError("--resume continues a run in its own directory; drop --out")
    cfg, run_dir, state, parent = job_config(target, resume, overrides, init_from, teacher)
    world = distributed.init(cfg.train.device)
    data_path = resumed_corpus(data_path, state, cfg)
    if world.is_main:
        find_corpus(data_path, cfg, state)  # found (or downloaded) before a directory is made for it
    if run_dir is None:
        kind = "student" if parent and not parent.weights else "finetuned"
        name = target or (Path(f"{parent.path.parent.name}-{kind}") if parent else DEFAULT_CONFIG)
        made = prepare_run_dir(out, name) if world.is_main else None
        run_dir = distributed.from_main(made)  # the others learn rank 0's directory
    return Job(cfg, run_dir, state, world, data_path, parent)
