"""`nmt train` and `nmt prepare`."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Optional

import typer
from tqdm.contrib.logging import logging_redirect_tqdm

from nmt.cli.app import app, logger, setup_logging, user_errors
from nmt.cli.options import (DataOpt, InitFromOpt, NprocOpt, QuietOpt, ResumeOpt, SetOpt, TargetArg, TestOpt,
                             ValidOpt)
from nmt.config import CorpusSpec
from nmt.errors import ConfigError


@app.command()
@user_errors
def train(
    target: TargetArg = None,
    resume: ResumeOpt = False,
    set_: SetOpt = None,
    out: Annotated[Optional[Path], typer.Option(help="Run directory (default: a new one under runs/).")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto, cpu or cuda (default: train.device).")] = None,
    max_minutes: Annotated[Optional[float], typer.Option(
        help="Stop cleanly after this many minutes, keeping the best checkpoint.")] = None,
    data: Annotated[Optional[list[str]], typer.Option(
        "--data", help="The corpus (as `nmt prepare --data`), as PATH[:WEIGHT]; repeat it for more training "
                       "corpora, each PATH[:WEIGHT[:TAG]] (data.corpora): the first gives the split and the "
                       "vocabularies.")] = None,
    quiet: QuietOpt = False,
    nproc: NprocOpt = 1,
    valid: ValidOpt = None,
    test: TestOpt = None,
    init_from: InitFromOpt = None,
) -> None:
    """Train a model; writes config.yaml, vocabularies, metrics.jsonl, checkpoints, best.pt and last.pt."""
    from nmt.training import distributed, job

    data_path, corpora = _corpora(data)
    overrides = list(set_ or []) + corpora + ([f"train.device={device}"] if device is not None else []) + (
        [f"train.max_minutes={max_minutes}"] if max_minutes is not None else []) + (
        [f"data.valid={valid}"] if valid is not None else []) + ([f"data.test={test}"] if test is not None else [])
    setup_logging(quiet)  # finding (or downloading) the corpus may log before training starts
    if nproc > 1:  # bad arguments fail here, in one line, not N times inside torchrun's report
        job.check_job(target, resume, overrides, data_path, init_from)
        raise typer.Exit(code=distributed.launch(nproc, sys.argv[1:]))
    run_job(job.start_job(target, resume, overrides, out, data_path, init_from), quiet)


def run_job(started, quiet: bool) -> None:
    """Train a started job, its log in the run directory; an interruption says how to resume."""
    from nmt.training import distributed
    from nmt.training.loop import train as run_training
    from nmt.training.stopping import TrainingInterrupted

    quiet = quiet or not started.world.is_main  # rank 0 speaks for the job
    finished = False
    try:
        with _training_log(started.out_dir, quiet, started.world.is_main):
            run_training(started.cfg, started.out_dir, started.data_path, quiet, resume=started.resume,
                         parent=started.parent)
        finished = True
    except TrainingInterrupted as e:
        if started.world.is_main:
            typer.echo(str(e), err=True)
        raise typer.Exit(code=e.exit_code) from None
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: checkpoints saved so far are in {started.out_dir}; "
                   f"resume with: nmt train --resume {started.out_dir}", err=True)
        raise typer.Exit(code=130) from None
    finally:
        distributed.shutdown(clean=finished)


def _corpora(data: list[str] | None) -> tuple[str | None, list[str]]:
    """The main corpus's path and the overrides the other --data options make (data.weight, data.corpora)."""
    if not data:
        return None, []
    first = CorpusSpec.parse(data[0])
    if first.tag:
        raise ConfigError(f"--data {data[0]}: the first --data is the corpus the split and vocabularies come "
                          f"from, and is not tagged; put the tag on another --data")
    return first.path, ([f"data.weight={first.weight}"] if first.weight != 1 else []) + (
        [f"data.corpora={json.dumps(data[1:])}"] if len(data) > 1 else [])


@contextlib.contextmanager
def _training_log(out_dir: Path, quiet: bool, main: bool) -> Iterator[None]:
    """Log lines to stderr and (from rank 0) to out_dir/train.log, kept from breaking the bar."""
    setup_logging(quiet)
    file_log = logging.FileHandler(out_dir / "train.log", encoding="utf-8") if main else None
    if file_log is not None:
        file_log.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logging.getLogger().addHandler(file_log)
    logger.info("run directory: %s", out_dir)
    try:
        # The redirect does not copy handler levels, so --quiet (no bar) goes without it.
        with contextlib.nullcontext() if quiet else logging_redirect_tqdm():
            yield
    finally:
        if file_log is not None:
            logging.getLogger().removeHandler(file_log)
            file_log.close()


@app.command()
@user_errors
def prepare(
    config: Annotated[Optional[Path], typer.Argument(
        help="YAML config whose data section shapes the prepared corpus (default: configs/default.yaml).",
        show_default=False)] = None,
    data: DataOpt = None,
    set_: SetOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Split, learn the vocabularies and encode a corpus once, into data.prepared_dir (nmt train does it when needed);
    with guided alignment or the alignment head, align its training pairs too, so that training starts warm."""
    from nmt.config import load_config
    from nmt.data.corpus import resolve_corpus
    from nmt.data.prepare import ensure_prepared
    from nmt.training.job import DEFAULT_CONFIG
    from nmt.training.recipe import fit_to_corpus
    from nmt.training.run_data import links_of

    setup_logging(quiet)
    cfg = fit_to_corpus(load_config(config or DEFAULT_CONFIG, list(set_ or [])), data, quiet=quiet)
    folder = ensure_prepared(resolve_corpus(data, cfg.data), cfg.data, quiet=quiet)
    links_of(folder, cfg)
    typer.echo(folder)
