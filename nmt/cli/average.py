"""`nmt average`: the mean of several checkpoints' weights, as one checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nmt.cli.app import app, setup_logging, user_errors


@app.command()
@user_errors
def average(
    targets: Annotated[list[str], typer.Argument(
        help="A run directory with --last N, or checkpoint files and run directories (each its best.pt).",
        show_default=False)],
    last: Annotated[Optional[int], typer.Option(
        "--last", help="Average the run's newest N rotating checkpoints (ckpt-<step>.pt).")] = None,
    out: Annotated[Optional[Path], typer.Option(
        help="The checkpoint to write (default: averaged.pt in the run directory of the newest input).")] = None,
) -> None:
    """Average checkpoints of one run (or of runs with one architecture and vocabularies) into a
    checkpoint every command reads; it records what it averaged."""
    from nmt.model.checkpoint_average import AVERAGED, average_checkpoints, resolve_inputs

    setup_logging()
    paths = resolve_inputs(targets, last)
    out = out or paths[-1].parent / AVERAGED
    state = average_checkpoints(paths, out)
    steps = ", ".join(str(r["step"]) for r in state["averaged"])
    typer.echo(f"{out}: the average of {len(paths)} checkpoints (steps {steps})")
