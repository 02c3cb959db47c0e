"""`nmt distill`: a student trained on its teacher's translations."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nmt.cli.app import app, setup_logging, user_errors
from nmt.cli.options import DataOpt, QuietOpt, SetOpt
from nmt.cli.train import run_job


@app.command()
@user_errors
def distill(
    teacher: Annotated[str, typer.Argument(
        help="The teacher: a run directory, a checkpoint, or runs joined by '+' (an ensemble).",
        show_default=False)],
    out: Annotated[Path, typer.Option(help="The student's run directory.")],
    config: Annotated[Optional[Path], typer.Option(
        help="The student's model and training (default: configs/student.yaml).")] = None,
    set_: SetOpt = None,
    beam: Annotated[int, typer.Option("--beam", "-k", min=1, help="The teacher's beam.")] = 5,
    engine: Annotated[str, typer.Option(
        help="auto (int8 ONNX Runtime where the teacher has a current `nmt export` and decodes on the CPU, torch "
             "elsewhere), torch, onnx or onnx-fp32.")] = "auto",
    data: DataOpt = None,
    max_minutes: Annotated[Optional[float], typer.Option(
        help="The student's training budget (default: its config's train.max_minutes).")] = None,
    quiet: QuietOpt = False,
) -> None:
    """Sequence-level distillation: the teacher translates its training sources (kept, and resumed
    after an interruption), then a student trains on them in the teacher's vocabularies."""
    from nmt.training import job
    from nmt.training.distill import distilled_corpus, load_teacher

    setup_logging(quiet)
    found = load_teacher(teacher, data)
    overrides = list(set_ or []) + ([f"train.max_minutes={max_minutes}"] if max_minutes is not None else [])
    job.job_config(config, False, overrides, teacher=found)  # a bad student config fails before any translating
    corpus = distilled_corpus(found, beam, engine, quiet=quiet)
    run_job(job.start_job(config, False, overrides, out, str(corpus), teacher=found), quiet)
