"""`nmt eval` and `nmt plot`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nmt.cli.app import app, setup_logging, user_errors
from nmt.cli.options import BeamOpt, DeviceOpt, EngineOpt, GlossaryOpt, LooseNumbersOpt


@app.command()
@user_errors
def plot(
    run: Annotated[Path, typer.Argument(help="A run directory (holding metrics.jsonl).")],
    out: Annotated[Optional[Path], typer.Option(help="PNG to write (default: RUN/curves.png).")] = None,
) -> None:
    """Draw a run's training and validation curves as a PNG."""
    from nmt.evaluation.visualize import plot_curves

    typer.echo(plot_curves(run, out))


@app.command("eval")
@user_errors
def eval_cmd(
    bleu: Annotated[bool, typer.Option("--bleu", help="Decode the test set and score BLEU and chrF.")] = False,
    split: Annotated[str, typer.Option(help="test or valid: the split of the run's corpus (or of --data) to score.")
                     ] = "test",
    checkpoints: Annotated[Optional[list[str]], typer.Option(
        "--checkpoint", "-c", help="A checkpoint file or a run directory (default: the newest run's best.pt); "
                                   "repeat it to compare models on one test set (paired bootstrap); runs joined by "
                                   "'+' are one ensemble (-c runs/a+runs/b -c runs/a compares the ensemble with a).")
                  ] = None,
    device: DeviceOpt = "auto",
    data: Annotated[Optional[str], typer.Option(
        "--data", help="Another corpus whose own --split is scored (its md5 split, as training cuts it); "
                       "for a test set of your own, use --test or --src/--ref.")] = None,
    test: Annotated[Optional[str], typer.Option(
        "--test", help="A test set in any form --data reads (TSV, zip, PREFIX of PREFIX.<lang> files), "
                       "scored whole; a source's lines are its references.")] = None,
    src: Annotated[Optional[str], typer.Option("--src", help="A file of source sentences, one a line.")] = None,
    ref: Annotated[Optional[list[str]], typer.Option(
        "--ref", help="A reference file line-aligned with --src (repeat for more references; an empty "
                      "line means no reference there).")] = None,
    testset: Annotated[Optional[str], typer.Option(
        "--testset", help="A test set of sacreBLEU's registry, e.g. wmt14 (downloaded into $SACREBLEU).")] = None,
    langpair: Annotated[Optional[str], typer.Option(
        "--langpair", help="With --testset: e.g. en-fr (default: the model's direction).")] = None,
    out: Annotated[Optional[str], typer.Option(
        "--out", help="Write the hypotheses here (default: beside the checkpoint, named after the test set).")
                   ] = None,
    beam: BeamOpt = None,
    engine: EngineOpt = "torch",
    loose_numbers: LooseNumbersOpt = False,
    glossary: GlossaryOpt = None,
) -> None:
    """Evaluate on a held-out split or a test set: loss and perplexity; with --bleu, BLEU, chrF and the signature."""
    from nmt.evaluation.report import Decoding, TestSpec, evaluate
    from nmt.inference.text.glossary import Glossary

    setup_logging()
    terms = Glossary.of(glossary)
    spec = TestSpec(split, data, test, src, list(ref or []), testset, langpair)
    decoding = Decoding(beam, engine, False if loose_numbers else None, terms)
    for line in evaluate(list(checkpoints or []), spec, bleu, device, decoding, out):
        typer.echo(line)
