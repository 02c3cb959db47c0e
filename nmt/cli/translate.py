"""`nmt translate` (arguments, a file, a pipe or a prompt; n-best, scores, alignments, attention) and `nmt score`."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from nmt.cli.app import app, logger, setup_logging, user_errors
from nmt.cli.options import (
    AlignOpt,
    BeamOpt,
    CheckpointOpt,
    DeviceOpt,
    EngineOpt,
    InputOpt,
    LooseNumbersOpt,
    NbestOpt,
    PlotOpt,
    PrefixOpt,
    SampleOpt,
    ScoresOpt,
    SeedOpt,
    ShowAttentionOpt,
    TemperatureOpt,
    TextArg,
    TokenizedOpt,
    TopKOpt,
    TopPOpt,
)
from nmt.errors import NmtError


@app.command()
@user_errors
def translate(text: TextArg = None, input_: InputOpt = None, checkpoint: CheckpointOpt = None,
              device: DeviceOpt = "auto", beam: BeamOpt = None, nbest: NbestOpt = 1, plot: PlotOpt = None,
              show_attention: ShowAttentionOpt = False, tokenized: TokenizedOpt = False,
              engine: EngineOpt = "torch", scores: ScoresOpt = False, align: AlignOpt = False,
              prefix: PrefixOpt = None, loose_numbers: LooseNumbersOpt = False, sample: SampleOpt = False,
              top_k: TopKOpt = 0, top_p: TopPOpt = 1.0, temperature: TemperatureOpt = 1.0, seed: SeedOpt = 0) -> None:
    """Translate: sentences given here, a file, piped stdin, or an interactive prompt."""
    from nmt.data.corpus import iter_text_lines
    from nmt.inference.translator import Translator

    setup_logging()
    if text and input_:
        raise NmtError("give sentences as arguments or --input FILE, not both")
    if text and any(not t.strip() for t in text):
        raise NmtError('an input sentence is empty; pass some text, e.g. nmt translate "Go."')
    if (plot or show_attention) and not (text and (len(text) == 1 or not plot)):
        raise NmtError("--plot takes exactly one sentence and --show-attention sentences given as arguments, "
                       'e.g. nmt translate "I am cold." --plot attention.png')
    if (scores or align) and nbest > 1:
        raise NmtError("--scores and --align annotate the best translation; leave out --nbest")
    sampling = _sampling(sample, beam, top_k, top_p, temperature, seed)
    translator = Translator.load(checkpoint, device, engine=engine, strict_numbers=False if loose_numbers else None)
    translator.sampling = sampling
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
        _translate_file(translator, input_, beam, tokenized)
    elif sys.stdin.isatty():
        _interactive(translator, beam, tokenized)
    else:  # a pipe: answer each line as it arrives, so a program can talk to nmt line by line
        for line in iter_text_lines(sys.stdin.buffer, "stdin"):
            typer.echo(translator.translate(line, beam, tokenized))
            sys.stdout.flush()


def _sampling(sample: bool, beam: Optional[int], top_k: int, top_p: float, temperature: float, seed: int):
    """--sample's draw, or None; its options without it, or with --beam, are a mistake said in one line."""
    from nmt.inference.sampling import Sampling

    given = [name for name, on in (("--top-k", top_k), ("--top-p", top_p != 1.0),
                                   ("--temperature", temperature != 1.0), ("--seed", seed)) if on]
    if not sample:
        if given:
            raise NmtError(f"{given[0]} shapes sampling: add --sample (or leave it out)")
        return None
    if beam is not None:
        raise NmtError("--sample draws translations instead of searching: leave out --beam")
    return Sampling(top_k, top_p, temperature, seed)


def _translate_file(translator, input_: str, beam: Optional[int], tokenized: bool) -> None:
    """A file (or `-`, stdin) line by line to stdout, with a progress bar on stderr (a plain line
    every 10 s off a terminal) and the speed at the end: back-translating a large file takes a while."""
    import time

    from nmt.data.corpus import iter_text_lines
    from nmt.progress_bar import Meter

    total = None if input_ == "-" else _count_lines(Path(input_))
    with _open_input(input_) as f, Meter(total, "translate", "sentences") as meter:
        for line in translator.translate_stream(iter_text_lines(f, input_), beam, tokenized=tokenized):
            typer.echo(line)
            meter.update()
    seconds = time.monotonic() - meter.start
    logger.info("translated %s sentences in %.1f s (%.1f sentences/s)", f"{meter.done:,.0f}", seconds,
                meter.done / max(seconds, 1e-9))


def _count_lines(path: Path) -> int | None:
    """Lines of the file, for the bar's total (None where it cannot be read: opening it says why)."""
    try:
        with open(path, "rb") as f:
            return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return None


def _open_input(input_: Optional[str]):
    """The binary stream to read: stdin for None or '-' (left open), else the named file."""
    from nmt.data.corpus import open_text_input

    if input_ is None or input_ == "-":
        return contextlib.nullcontext(sys.stdin.buffer)
    return open_text_input(Path(input_))


def _read_all(input_: Optional[str]) -> list[str]:
    from nmt.data.corpus import iter_text_lines

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
    from nmt.inference.translator import alignments
    from nmt.inference.words import pharaoh

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
    from nmt.evaluation.visualize import attention_table, plot_attention

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
    from nmt.inference.translator import Translator

    setup_logging()
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
