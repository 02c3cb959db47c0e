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
    target: Annotated[Optional[Path], typer.Argument(
        help="YAML config (default: configs/default.yaml); with --resume, a run directory "
             "(default: the newest run under runs/).", show_default=False)] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue a run exactly where its newest good checkpoint left it.")] = False,
    set_: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Override a config value: --set train.lr=0.0005 (repeatable).")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Run directory (default: a new one under runs/).")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto, cpu or cuda (default: train.device).")] = None,
    max_minutes: Annotated[Optional[float], typer.Option(
        help="Stop cleanly after this many minutes, keeping the best checkpoint.")] = None,
    data: DataOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or log lines.")] = False,
    nproc: Annotated[int, typer.Option(
        min=1, help="Data-parallel processes on this machine (runs torchrun --standalone; "
                    "global batch = N x train.batch_size).")] = 1,
) -> None:
    """Train a model; writes config.yaml, vocabularies, metrics.jsonl, checkpoints, best.pt and last.pt."""
    from nmt import distributed
    from nmt.config import load_config
    from nmt.corpus import resolve_corpus
    from nmt.stopping import TrainingInterrupted
    from nmt.train import train as run_training

    overrides = list(set_ or [])
    if device is not None:
        overrides.append(f"train.device={device}")
    if max_minutes is not None:
        overrides.append(f"train.max_minutes={max_minutes}")
    if nproc > 1:
        # Bad arguments fail here, in one line, not N times inside torchrun's report.
        cfg = _resume_target(target, overrides)[0] if resume else load_config(target or DEFAULT_CONFIG, overrides)
        _check_precision(cfg.train)
        resolve_corpus(data, cfg.data)  # finds or downloads the corpus once, before N processes look
        raise typer.Exit(code=_launch_torchrun(nproc))
    if resume:
        if out is not None:
            raise NmtError("--resume continues a run in its own directory; drop --out")
        cfg, out_dir, state = _resume_target(target, overrides)
        _check_precision(cfg.train)
        world = distributed.init(cfg.train.device)
    else:
        from nmt.train import prepare_run_dir

        config = target or DEFAULT_CONFIG
        cfg, state = load_config(config, overrides), None
        _check_precision(cfg.train)
        world = distributed.init(cfg.train.device)
        # Under torchrun rank 0 makes the (time-stamped) directory and tells the others its name.
        out_dir = distributed.from_main(prepare_run_dir(out, config) if world.is_main else None, world)
    quiet = quiet or not world.is_main  # rank 0 speaks for the job
    _setup_logging(quiet)
    file_log = logging.FileHandler(out_dir / "train.log", encoding="utf-8") if world.is_main else None
    if file_log is not None:
        file_log.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logging.getLogger().addHandler(file_log)
    logger.info("run directory: %s", out_dir)
    finished = False
    try:
        # The redirect keeps log lines from breaking the bar; it does not copy handler levels,
        # so --quiet (no bar) goes without it.
        with contextlib.nullcontext() if quiet else logging_redirect_tqdm():
            run_training(cfg, out_dir, data, quiet, resume=state, world=world)
        finished = True
    except TrainingInterrupted as e:
        if world.is_main:
            typer.echo(str(e), err=True)
        raise typer.Exit(code=e.exit_code) from None
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: checkpoints saved so far are in {out_dir}; "
                   f"resume with: nmt train --resume {out_dir}", err=True)
        raise typer.Exit(code=130) from None
    finally:
        if file_log is not None:
            logging.getLogger().removeHandler(file_log)
            file_log.close()
        distributed.shutdown(clean=finished)


def _check_precision(train_cfg: Any) -> None:
    """An explicit bf16 where it is not native fails here, before a run directory or a process exists."""
    from nmt import runtime

    runtime.resolve_precision(train_cfg.precision, runtime.resolve_device(train_cfg.device))


def _launch_torchrun(nproc: int) -> int:
    """`nmt train ... --nproc N` is `torchrun --standalone --nproc_per_node N -m nmt train ...`."""
    import os
    import signal
    import subprocess

    if "WORLD_SIZE" in os.environ:
        raise NmtError("--nproc starts torchrun itself; under torchrun, leave it out")
    args, skip = [], False
    for arg in sys.argv[1:]:
        if skip or arg.startswith("--nproc="):
            skip = False
            continue
        if arg == "--nproc":
            skip = True
            continue
        args.append(arg)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "nmt", *args]
    launcher = subprocess.Popen(command)
    forwarded: list[int] = []

    def forward(signum: int, frame: object) -> None:
        # SIGTERM or SIGINT sent to this process must reach torchrun, which passes it to the
        # workers: they save and stop together. Without this they would train on, orphaned.
        forwarded.append(signum)
        launcher.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = launcher.wait()
        return 128 + forwarded[0] if forwarded else code  # torchrun itself exits 1 on a signal
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _resume_target(run: Optional[Path], overrides: list[str]):
    """The run to resume, its config (train.* and decode.* may be overridden) and its newest good checkpoint."""
    from nmt.checkpoint import LAST, newest_good_checkpoint, newest_run
    from nmt.config import apply_overrides, config_from_dict
    from nmt.errors import ConfigError

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


@app.command()
@user_errors
def translate(
    text: Annotated[Optional[list[str]], typer.Argument(help="Sentence(s) to translate.")] = None,
    input_: Annotated[Optional[str], typer.Option(
        "--input", "-i", help="Translate a file ('-' for stdin) in batches, one output line per input line.")] = None,
    checkpoint: CheckpointOpt = None,
    device: DeviceOpt = "auto",
    beam: BeamOpt = None,
    nbest: Annotated[int, typer.Option(
        min=1, help="Print the N best translations per input as 'index<TAB>score<TAB>text'.")] = 1,
    plot: Annotated[Optional[Path], typer.Option(
        help="Write a heatmap of the attention weights of the (one) sentence to this PNG.")] = None,
    show_attention: Annotated[bool, typer.Option(
        "--show-attention", help="Print each sentence's attention weights as a table.")] = False,
    tokenized: Annotated[bool, typer.Option(
        "--tokenized", help="Print the old lowercased, tokenized form ('va !') instead of plain French.")] = False,
) -> None:
    """Translate English to French: sentences given here, a file, piped stdin, or an interactive prompt."""
    from nmt.checkpoint import load_model
    from nmt.corpus import iter_text_lines
    from nmt.runtime import resolve_device
    from nmt.translator import Translator

    _setup_logging()
    if text and input_:
        raise NmtError("give sentences as arguments or --input FILE, not both")
    if text and any(not t.strip() for t in text):
        raise NmtError('an input sentence is empty; pass some English text, e.g. nmt translate "Go ."')
    if (plot or show_attention) and not (text and (len(text) == 1 or not plot)):
        raise NmtError("--plot takes exactly one sentence and --show-attention sentences given as arguments, "
                       'e.g. nmt translate "I am cold ." --plot attention.png')
    dev = resolve_device(device)
    translator = Translator.from_loaded(load_model(checkpoint, dev), dev)
    if plot or show_attention:
        _translate_with_attention(translator, text, plot, show_attention)
    elif nbest > 1:
        lines = text if text else _read_all(input_)
        _print_nbest(translator, lines, beam, nbest, tokenized)
    elif text:
        for line in translator.translate(text, beam, tokenized=tokenized):
            typer.echo(line)
    elif input_ is not None:
        with _open_input(input_) as f:
            for line in translator.translate_stream(iter_text_lines(f, input_), beam, tokenized=tokenized):
                typer.echo(line)
    elif sys.stdin.isatty():
        _interactive(translator, beam, tokenized)
    else:  # a pipe: answer each line as it arrives, so a program can talk to nmt line by line
        for line in iter_text_lines(sys.stdin.buffer, "stdin"):
            typer.echo(translator.translate([line], beam, tokenized=tokenized)[0])
            sys.stdout.flush()


def _open_input(input_: Optional[str]):
    """The binary stream to read: stdin for None or '-' (left open), else the named file."""
    from nmt.corpus import open_text_input

    if input_ is None or input_ == "-":
        return contextlib.nullcontext(sys.stdin.buffer)
    return open_text_input(Path(input_))


def _read_all(input_: Optional[str]) -> list[str]:
    from nmt.corpus import iter_text_lines

    with _open_input(input_) as f:
        return list(iter_text_lines(f, input_ or "stdin"))


def _print_nbest(translator, lines: list[str], beam: Optional[int], nbest: int, tokenized: bool) -> None:
    sources = translator.tokenizer.source_tokens(lines)
    for index, hyps in enumerate(translator.translate_nbest(sources, beam, nbest)):
        if not hyps:  # an empty input still gets its line
            typer.echo(f"{index}\t\t")
        for hyp in hyps:
            typer.echo(f"{index}\t{hyp.normalized:.4f}\t{translator.text(hyp.tokens, tokenized)}")


def _translate_with_attention(translator, sentences: list[str], plot: Optional[Path], show: bool) -> None:
    from nmt.visualize import attention_table, plot_attention

    for sentence in sentences:
        src_tokens, out_tokens, weights = translator.attention(sentence)
        typer.echo(translator.tokenizer.target_text([t for t in out_tokens if t != "<eos>"]))
        if show:
            typer.echo(attention_table(src_tokens, out_tokens, weights))
        if plot:
            plot_attention(src_tokens, out_tokens, weights, plot, title=sentence)
            typer.echo(f"attention heatmap written to {plot}", err=True)


def _interactive(translator, beam: Optional[int], tokenized: bool) -> None:
    typer.echo("Type English, get French; an empty line or Ctrl-D ends.", err=True)
    while True:
        try:
            line = input("en> ")
        except (EOFError, KeyboardInterrupt):
            typer.echo("", err=True)
            return
        if not line.strip():
            return
        typer.echo(translator.translate([line], beam, tokenized=tokenized)[0])


@app.command()
@user_errors
def plot(
    run: Annotated[Path, typer.Argument(help="A run directory (holding metrics.jsonl).")],
    out: Annotated[Optional[Path], typer.Option(help="PNG to write (default: RUN/curves.png).")] = None,
) -> None:
    """Draw a run's training and validation curves as a PNG."""
    from nmt.visualize import plot_curves

    typer.echo(plot_curves(run, out))


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


@app.command()
@user_errors
def serve(
    checkpoint: CheckpointOpt = None,
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless you mean to share it.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8000,
    device: DeviceOpt = "auto",
    beam: Annotated[int, typer.Option("--beam", "-k", min=1, help="Beam size of requests that name none.")] = 1,
    max_beam: Annotated[int, typer.Option(min=1, help="Largest beam or n-best a request may ask for.")] = 10,
    max_texts: Annotated[int, typer.Option(min=1, help="Texts in one request.")] = 64,
    max_chars: Annotated[int, typer.Option(min=1, help="Characters in one text.")] = 1000,
    max_body_kb: Annotated[int, typer.Option(min=1, help="Request body size limit, KiB.")] = 256,
    max_batch: Annotated[int, typer.Option(min=1, help="Sentences decoded together.")] = 128,
    max_wait_ms: Annotated[float, typer.Option(min=0, help="How long a request waits for others to batch with.")] = 5.0,
    queue_size: Annotated[int, typer.Option(min=1, help="Texts waiting at most; beyond, 503 + Retry-After.")] = 1024,
) -> None:
    """Serve a model: JSON API (/translate, OpenNMT-py's /translator/translate, /health, /docs) and a page at /."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise NmtError("nmt serve needs FastAPI and uvicorn: pip install -e '.[serve]' "
                       "(bash scripts/setup.sh installs them)") from None
    from nmt.serve import ServeSettings, run_server

    _setup_logging()
    settings = ServeSettings(beam=beam, max_beam=max(max_beam, beam), max_texts=max_texts, max_chars=max_chars,
                             max_body_bytes=max_body_kb * 1024, max_batch=max_batch, max_wait_ms=max_wait_ms,
                             queue_size=queue_size)
    run_server(checkpoint, device, host, port, settings)


def main() -> None:
    app()
