"""The `nmt` command line: train, translate, eval. Each command calls one library function."""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from tqdm.contrib.logging import logging_redirect_tqdm

from nmt.errors import NmtError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and run an English→French LSTM encoder–decoder with attention.")
logger = logging.getLogger("nmt")

DEFAULT_CONFIG = Path("configs/default.yaml")
CheckpointOpt = Annotated[Optional[str], typer.Option(
    "--checkpoint", "-c", help="A checkpoint file or a run directory (default: the newest run's best.pt).")]
DeviceOpt = Annotated[str, typer.Option(help="auto, cpu or cuda (auto takes CUDA when present).")]
BeamOpt = Annotated[Optional[int], typer.Option(
    "--beam", "-k", min=1, help="Beam size (default: the checkpoint's decode.beam_size; 1 is greedy).")]
DataOpt = Annotated[Optional[str], typer.Option(
    "--data", help="fra-eng.zip or fra.txt (default: data.path, $NMT_CORPUS, data/fra-eng.zip, download).")]


def _setup_logging(quiet: bool = False) -> None:
    """INFO to stderr (WARNING with --quiet); the root stays at INFO so train.log gets everything."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr, force=True)
    logging.getLogger().handlers[0].setLevel(logging.WARNING if quiet else logging.INFO)


@app.callback()
def _startup() -> None:
    from nmt import runtime

    runtime.keep_freed_memory()  # decoding and training both allocate large per-step tensors


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the library's NmtError into one line on stderr and exit code 1, with no traceback."""
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except NmtError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(code=1) from None
    return wrapper


@app.command()
@user_errors
def train(
    config: Annotated[Path, typer.Argument(help="YAML config.")] = DEFAULT_CONFIG,
    set_: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Override a config value: --set train.lr=0.0005 (repeatable).")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Run directory (default: a new one under runs/).")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto, cpu or cuda (default: train.device).")] = None,
    max_minutes: Annotated[Optional[float], typer.Option(
        help="Stop cleanly after this many minutes, keeping the best checkpoint.")] = None,
    data: DataOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or log lines.")] = False,
) -> None:
    """Train a model; writes config.yaml, vocabularies, metrics.jsonl, last.pt and best.pt."""
    from nmt.config import load_config
    from nmt.train import prepare_run_dir, train as run_training

    overrides = list(set_ or [])
    if device is not None:
        overrides.append(f"train.device={device}")
    if max_minutes is not None:
        overrides.append(f"train.max_minutes={max_minutes}")
    cfg = load_config(config, overrides)
    _setup_logging(quiet)
    out_dir = prepare_run_dir(out, config)
    file_log = logging.FileHandler(out_dir / "train.log", encoding="utf-8")
    file_log.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logging.getLogger().addHandler(file_log)
    logger.info("run directory: %s", out_dir)
    try:
        # The redirect keeps log lines from breaking the bar; it does not copy handler levels,
        # so --quiet (no bar) goes without it.
        with contextlib.nullcontext() if quiet else logging_redirect_tqdm():
            run_training(cfg, out_dir, data, quiet)
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: checkpoints saved so far are in {out_dir}", err=True)
        raise typer.Exit(code=130) from None
    finally:
        logging.getLogger().removeHandler(file_log)
        file_log.close()


@app.command()
@user_errors
def translate(
    text: Annotated[Optional[list[str]], typer.Argument(help="Sentence(s) to translate.")] = None,
    input_: Annotated[Optional[str], typer.Option(
        "--input", "-i", help="Translate a file, one sentence per line ('-' for stdin).")] = None,
    checkpoint: CheckpointOpt = None,
    device: DeviceOpt = "auto",
    beam: BeamOpt = None,
    nbest: Annotated[int, typer.Option(
        min=1, help="Print the N best translations per input as 'index<TAB>score<TAB>text'.")] = 1,
) -> None:
    """Translate English sentences to French; one output line per input line."""
    from nmt.checkpoint import load_model
    from nmt.corpus import read_text_file
    from nmt.tokenizer import TOKENIZER
    from nmt.train import resolve_device
    from nmt.translator import Translator

    _setup_logging()
    if text and input_:
        raise NmtError("give sentences as arguments or --input FILE, not both")
    if text:
        if any(not t.strip() for t in text):
            raise NmtError("an input sentence is empty; pass some English text, e.g. nmt translate \"Go .\"")
        lines = list(text)
    elif input_ == "-" or (input_ is None and not sys.stdin.isatty()):
        lines = sys.stdin.read().splitlines()
    elif input_ is not None:
        lines = read_text_file(Path(input_))
    else:
        raise NmtError("nothing to translate: pass a sentence, --input FILE, or pipe text on stdin")
    dev = resolve_device(device)
    translator = Translator.from_loaded(load_model(checkpoint, dev), dev)
    if nbest == 1:
        for line in translator.translate(lines, beam):
            typer.echo(line)
        return
    sources = [TOKENIZER.tokenize(line) for line in lines]
    for index, hyps in enumerate(translator.translate_nbest(sources, beam, nbest)):
        for hyp in hyps or [None]:  # an empty input still gets its line
            text = TOKENIZER.detokenize(translator.tgt_vocab.decode(hyp.tokens)) if hyp else ""
            typer.echo(f"{index}\t{hyp.normalized:.4f}\t{text}" if hyp else f"{index}\t\t")


@app.command("eval")
@user_errors
def eval_cmd(
    bleu: Annotated[bool, typer.Option("--bleu", help="Decode the split and score BLEU and chrF.")] = False,
    split: Annotated[str, typer.Option(help="test or valid.")] = "test",
    checkpoint: CheckpointOpt = None,
    device: DeviceOpt = "auto",
    data: DataOpt = None,
    beam: BeamOpt = None,
) -> None:
    """Evaluate on a held-out split: loss and perplexity; with --bleu, BLEU, chrF and the signature."""
    from nmt.evaluate import evaluate_checkpoint

    _setup_logging()
    if split not in ("test", "valid"):
        raise NmtError(f"--split must be test or valid (got {split!r})")
    for line in evaluate_checkpoint(checkpoint, split, bleu, device, data, beam):
        typer.echo(line)


def main() -> None:
    app()
