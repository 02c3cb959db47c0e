"""The `nmt` command line: prepare, train, translate, eval, plot, serve, export. Each command parses its arguments
and calls the library; `NmtError` becomes one `error:` line and exit code 1."""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from tqdm.contrib.logging import logging_redirect_tqdm

from nmt.errors import NmtError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and run an LSTM encoder–decoder with attention (English→French by default).")
logger = logging.getLogger("nmt")

CheckpointOpt = Annotated[Optional[str], typer.Option(
    "--checkpoint", "-c", help="A checkpoint file or a run directory (default: the newest run's best.pt).")]
DeviceOpt = Annotated[str, typer.Option(help="auto, cpu or cuda (auto takes CUDA when present).")]
BeamOpt = Annotated[Optional[int], typer.Option(
    "--beam", "-k", min=1, help="Beam size (default: the checkpoint's decode.beam_size; 1 is greedy).")]
DataOpt = Annotated[Optional[str], typer.Option(
    "--data", help="The corpus: a zip, a tab-separated file, or PREFIX of PREFIX.<src_lang> and "
                   "PREFIX.<tgt_lang> (default: data.path, $NMT_CORPUS, the data/ cache, download).")]
TextArg = Annotated[Optional[list[str]], typer.Argument(help="Sentence(s) to translate.")]
InputOpt = Annotated[Optional[str], typer.Option(
    "--input", "-i", help="Translate a file ('-' for stdin) in batches, one output line per input line.")]
NbestOpt = Annotated[int, typer.Option(
    min=1, help="Print the N best translations per input as 'index<TAB>score<TAB>text'.")]
PlotOpt = Annotated[Optional[Path], typer.Option(
    help="Write a heatmap of the attention weights of the (one) sentence to this PNG.")]
ShowAttentionOpt = Annotated[bool, typer.Option(
    "--show-attention", help="Print each sentence's attention weights as a table.")]
TokenizedOpt = Annotated[bool, typer.Option(
    "--tokenized", help="Print the old lowercased, tokenized form ('va !') instead of plain text.")]
ScoresOpt = Annotated[bool, typer.Option(
    "--scores", help="After each translation, a tab, its mean token log-probability (natural log, <eos> "
                     "counted), a tab and each word's (the lowest of its pieces'), space-separated.")]
AlignOpt = Annotated[bool, typer.Option(
    "--align", help="After each translation, a tab and its word alignment to the source from the attention, "
                    "Pharaoh format: 'source-output' word indices from 0.")]
PrefixOpt = Annotated[Optional[str], typer.Option(
    "--prefix", help="Every translation starts with this text (tokenized as the output is); the search "
                     "completes it, e.g. --prefix 'Je ne'.")]
TargetArg = Annotated[Optional[Path], typer.Argument(
    help="YAML config (default: configs/default.yaml); with --resume, a run directory "
         "(default: the newest run under runs/).", show_default=False)]
ResumeOpt = Annotated[bool, typer.Option(
    "--resume", help="Continue a run exactly where its newest good checkpoint left it.")]
SetOpt = Annotated[Optional[list[str]], typer.Option(
    "--set", help="Override a config value: --set train.lr=0.0005 (repeatable).")]
EngineOpt = Annotated[str, typer.Option(
    help="torch (PyTorch, fp32), onnx (ONNX Runtime, int8) or onnx-fp32; the onnx ones need "
         "`nmt export` first and run on the CPU.")]
NprocOpt = Annotated[int, typer.Option(
    min=1, help="Data-parallel processes on this machine (runs torchrun --standalone; "
                "global batch = N x train.batch_size).")]

ValidOpt = Annotated[Optional[str], typer.Option(
    "--valid", help="Your dev set (any form --data takes): validation, early stopping and best.pt follow it "
                    "(data.valid).")]
TestOpt = Annotated[Optional[str], typer.Option(
    "--test", help="Your test set (any form --data takes): the run's test split (data.test).")]
InitFromOpt = Annotated[Optional[str], typer.Option(
    "--init-from", help="Start a new run from this run's (or checkpoint's) weights, tokenizer and vocabularies, "
                        "with a fresh optimizer, schedule and budget: fine-tuning on --data.")]


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
    target: TargetArg = None,
    resume: ResumeOpt = False,
    set_: SetOpt = None,
    out: Annotated[Optional[Path], typer.Option(help="Run directory (default: a new one under runs/).")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto, cpu or cuda (default: train.device).")] = None,
    max_minutes: Annotated[Optional[float], typer.Option(
        help="Stop cleanly after this many minutes, keeping the best checkpoint.")] = None,
    data: DataOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or log lines.")] = False,
    nproc: NprocOpt = 1,
    valid: ValidOpt = None,
    test: TestOpt = None,
    init_from: InitFromOpt = None,
) -> None:
    """Train a model; writes config.yaml, vocabularies, metrics.jsonl, checkpoints, best.pt and last.pt."""
    from nmt import distributed, job
    from nmt.stopping import TrainingInterrupted
    from nmt.train import train as run_training

    overrides = list(set_ or []) + ([f"train.device={device}"] if device is not None else []) + (
        [f"train.max_minutes={max_minutes}"] if max_minutes is not None else []) + (
        [f"data.valid={valid}"] if valid is not None else []) + ([f"data.test={test}"] if test is not None else [])
    _setup_logging(quiet)  # finding (or downloading) the corpus may log before training starts
    if nproc > 1:  # bad arguments fail here, in one line, not N times inside torchrun's report
        job.check_job(target, resume, overrides, data, init_from)
        raise typer.Exit(code=distributed.launch(nproc, sys.argv[1:]))
    started = job.start_job(target, resume, overrides, out, data, init_from)
    quiet = quiet or not started.world.is_main  # rank 0 speaks for the job
    finished = False
    try:
        with _training_log(started.out_dir, quiet, started.world.is_main):
            run_training(started.cfg, started.out_dir, started.data_path, quiet, resume=started.resume,
                         world=started.world, parent=started.parent)
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


@contextlib.contextmanager
def _training_log(out_dir: Path, quiet: bool, main: bool) -> Iterator[None]:
    """Log lines to stderr and (from rank 0) to out_dir/train.log, kept from breaking the bar."""
    _setup_logging(quiet)
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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or log lines.")] = False,
) -> None:
    """Split, learn the vocabularies and encode a corpus once, into data.prepared_dir (nmt train does it when needed)."""
    from nmt.config import load_config
    from nmt.corpus import resolve_corpus
    from nmt.job import DEFAULT_CONFIG
    from nmt.prepare import ensure_prepared

    _setup_logging(quiet)
    cfg = load_config(config or DEFAULT_CONFIG, list(set_ or []))
    typer.echo(ensure_prepared(resolve_corpus(data, cfg.data), cfg.data, quiet=quiet))


@app.command()
@user_errors
def translate(text: TextArg = None, input_: InputOpt = None, checkpoint: CheckpointOpt = None,
              device: DeviceOpt = "auto", beam: BeamOpt = None, nbest: NbestOpt = 1, plot: PlotOpt = None,
              show_attention: ShowAttentionOpt = False, tokenized: TokenizedOpt = False,
              engine: EngineOpt = "torch", scores: ScoresOpt = False, align: AlignOpt = False,
              prefix: PrefixOpt = None) -> None:
    """Translate: sentences given here, a file, piped stdin, or an interactive prompt."""
    from nmt.corpus import iter_text_lines
    from nmt.translator import Translator

    _setup_logging()
    if text and input_:
        raise NmtError("give sentences as arguments or --input FILE, not both")
    if text and any(not t.strip() for t in text):
        raise NmtError('an input sentence is empty; pass some text, e.g. nmt translate "Go."')
    if (plot or show_attention) and not (text and (len(text) == 1 or not plot)):
        raise NmtError("--plot takes exactly one sentence and --show-attention sentences given as arguments, "
                       'e.g. nmt translate "I am cold." --plot attention.png')
    if (scores or align) and nbest > 1:
        raise NmtError("--scores and --align annotate the best translation; leave out --nbest")
    translator = Translator.load(checkpoint, device, engine=engine)
    if plot or show_attention:
        _translate_with_attention(translator, text, plot, show_attention, beam)
    elif scores or align or prefix:
        _print_checked(translator, text if text else _read_all(input_), beam, scores, align, tokenized, prefix, nbest)
    elif nbest > 1:
        _print_nbest(translator, text if text else _read_all(input_), beam, nbest, tokenized)
    elif text:
        for line in translator.translate(text, beam, tokenized):
            typer.echo(line)
    elif input_ is not None:
        with _open_input(input_) as f:
            for line in translator.translate_stream(iter_text_lines(f, input_), beam, tokenized=tokenized):
                typer.echo(line)
    elif sys.stdin.isatty():
        _interactive(translator, beam, tokenized)
    else:  # a pipe: answer each line as it arrives, so a program can talk to nmt line by line
        for line in iter_text_lines(sys.stdin.buffer, "stdin"):
            typer.echo(translator.translate(line, beam, tokenized))
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


def _print_nbest(translator, lines: list[str], beam: Optional[int], nbest: int, tokenized: bool,
                 prefix: Optional[str] = None) -> None:
    for index, translations in enumerate(translator.nbest(lines, nbest, beam, prefix=prefix)):
        if not translations:  # an empty input still gets its line
            typer.echo(f"{index}\t\t")
        for t in translations:
            typer.echo(f"{index}\t{t.score:.4f}\t{t.tokenized if tokenized else t.text}")


def _print_checked(translator, lines: list[str], beam: Optional[int], scores: bool, align: bool,
                   tokenized: bool, prefix: Optional[str], nbest: int) -> None:
    from nmt.translator import alignments
    from nmt.words import pharaoh

    if nbest > 1:  # with --prefix only: n-best lists that all start with it
        _print_nbest(translator, lines, beam, nbest, tokenized, prefix)
        return
    best = translator.translations(lines, beam, prefix=prefix)
    aligned = alignments(translator, lines, best) if align else None
    for index, t in enumerate(best):
        fields = [t.tokenized if tokenized else t.text]
        if scores:
            fields += [f"{t.mean_score:.4f}", " ".join(f"{s:.4f}" for s in t.word_scores)]
        if aligned is not None:
            fields.append(pharaoh(aligned[index]))
        typer.echo("\t".join(fields))


def _translate_with_attention(translator, sentences: list[str], plot: Optional[Path], show: bool,
                              beam: Optional[int]) -> None:
    from nmt.visualize import attention_table, plot_attention

    for sentence in sentences:
        best = translator.translations([sentence], beam)[0]
        src_tokens, out_tokens, weights = translator.attention(sentence, best.tokens)
        typer.echo(best.text)
        if show:
            typer.echo(attention_table(src_tokens, out_tokens, weights))
        if plot:
            languages = translator.tokenizer.source_lang, translator.tokenizer.target_lang
            plot_attention(src_tokens, out_tokens, weights, plot, title=sentence, languages=languages)
            typer.echo(f"attention heatmap written to {plot}", err=True)


def _interactive(translator, beam: Optional[int], tokenized: bool) -> None:
    typer.echo("Type a sentence, get its translation; an empty line or Ctrl-D ends.", err=True)
    prompt = f"{translator.tokenizer.source_lang}> "  # "en> " for an English source
    while True:
        try:
            line = input(prompt)
        except (EOFError, KeyboardInterrupt):
            typer.echo("", err=True)
            return
        if not line.strip():
            return
        typer.echo(translator.translate(line, beam, tokenized))


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
    bleu: Annotated[bool, typer.Option("--bleu", help="Decode the test set and score BLEU and chrF.")] = False,
    split: Annotated[str, typer.Option(help="test or valid: the split of the run's corpus (or of --data) to score.")
                     ] = "test",
    checkpoints: Annotated[Optional[list[str]], typer.Option(
        "--checkpoint", "-c", help="A checkpoint file or a run directory (default: the newest run's best.pt); "
                                   "repeat it to compare models on one test set (paired bootstrap).")] = None,
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
) -> None:
    """Evaluate on a held-out split or a test set: loss and perplexity; with --bleu, BLEU, chrF and the signature."""
    from nmt.evaluate import TestSpec, evaluate

    _setup_logging()
    spec = TestSpec(split, data, test, src, list(ref or []), testset, langpair)
    for line in evaluate(list(checkpoints or []), spec, bleu, device, beam, engine, out):
        typer.echo(line)


@app.command()
@user_errors
def score(
    src: Annotated[Optional[str], typer.Option("--src", help="Source sentences, one a line.")] = None,
    hyp: Annotated[Optional[str], typer.Option("--hyp", help="Their translations, line-aligned with --src.")
                   ] = None,
    checkpoint: CheckpointOpt = None,
    device: DeviceOpt = "auto",
    engine: EngineOpt = "torch",
) -> None:
    """Score given translations (forced decoding): per line 'score<TAB>mean<TAB>word scores', on the
    scale translate --nbest and --scores print. Without --src/--hyp: 'source<TAB>translation' lines on stdin."""
    from nmt.translator import Translator

    _setup_logging()
    sources, outputs = _given_pairs(src, hyp)
    translator = Translator.load(checkpoint, device, engine=engine)
    for t in translator.score(sources, outputs):
        typer.echo(f"{t.score:.4f}\t{t.mean_score:.4f}\t" + " ".join(f"{s:.4f}" for s in t.word_scores))


def _given_pairs(src: Optional[str], hyp: Optional[str]) -> tuple[list[str], list[str]]:
    """`nmt score`'s input: two line-aligned files, or tab-separated pairs on stdin."""
    if bool(src) != bool(hyp):
        raise NmtError("--src and --hyp go together (or neither: 'source<TAB>translation' lines on stdin)")
    if src and hyp:
        sources, outputs = _read_all(src), _read_all(hyp)
        if len(sources) != len(outputs):
            raise NmtError(f"--src has {len(sources):,} lines and --hyp {len(outputs):,}; they must be line-aligned")
        return sources, outputs
    pairs = [line.split("\t") for line in _read_all(None)]
    for number, fields in enumerate(pairs, start=1):
        if len(fields) != 2:
            raise NmtError(f"stdin line {number}: expected 'source<TAB>translation' (got {len(fields)} field(s)); "
                           f"or give --src FILE --hyp FILE")
    return [p[0] for p in pairs], [p[1] for p in pairs]


@app.command()
@user_errors
def serve(
    checkpoint: CheckpointOpt = None,
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless you mean to share it.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8000,
    device: DeviceOpt = "auto",
    beam: Annotated[Optional[int], typer.Option("--beam", "-k", min=1, help=(
        "Beam size of requests that name none (default: the checkpoint's decode.beam_size; 1 is greedy)."))] = None,
    max_beam: Annotated[int, typer.Option(min=1, help="Largest beam or n-best a request may ask for.")] = 10,
    max_texts: Annotated[int, typer.Option(min=1, help="Texts in one request.")] = 64,
    max_chars: Annotated[int, typer.Option(min=1, help="Characters in one text.")] = 1000,
    max_body_kb: Annotated[int, typer.Option(min=1, help="Request body size limit, KiB.")] = 256,
    max_batch: Annotated[int, typer.Option(min=1, help="Sentences decoded together.")] = 128,
    max_wait_ms: Annotated[float, typer.Option(min=0, help="How long a request waits for others to batch with.")] = 5.0,
    queue_size: Annotated[int, typer.Option(min=1, help="Texts waiting at most; beyond, 503 + Retry-After.")] = 1024,
    engine: EngineOpt = "torch",
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
    settings = ServeSettings(beam=beam, max_beam=max(max_beam, beam or 1), max_texts=max_texts, max_chars=max_chars,
                             max_body_bytes=max_body_kb * 1024, max_batch=max_batch, max_wait_ms=max_wait_ms,
                             queue_size=queue_size)
    run_server(checkpoint, device, host, port, settings, engine)


@app.command("export")
@user_errors
def export_cmd(run: Annotated[Optional[str], typer.Argument(
        help="A run directory (its best.pt) or a checkpoint file (default: the newest run's best.pt).",
        show_default=False)] = None) -> None:
    """Export a checkpoint for ONNX Runtime (--engine onnx / onnx-fp32): encoder and one-step decoder graphs, fp32 and int8."""
    from nmt.export import export_run

    _setup_logging()
    directory, manifest = export_run(run)
    for name, size in manifest.sizes.items():
        typer.echo(f"{directory / name}  {size / 1e6:.1f} MB")


def main() -> None:
    app()
