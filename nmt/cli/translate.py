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
    GlossaryOpt,
    InputOpt,
    LooseNumbersOpt,
    MarkupOpt,
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
              top_k: TopKOpt = 0, top_p: TopPOpt = 1.0, temperature: TemperatureOpt = 1.0, seed: SeedOpt = 0,
              glossary: GlossaryOpt = None, markup: MarkupOpt = None) -> None:
    """Translate: sentences given here, a file, piped stdin, or an interactive prompt."""
    from nmt.inference.translator import Options
    from nmt.inference.text.glossary import Glossary
    from nmt.inference.translator import Translator

    setup_logging()
    terms = Glossary.of(glossary)  # a bad file fails before the model loads
    if text and input_:
        raise NmtError("give sentences as arguments or --input FILE, not both")
    if text and any(not t.strip() for t in text):
        raise NmtError('an input sentence is empty; pass some text, e.g. nmt translate "Go."')
    if (plot or show_attention) and not (text and (len(text) == 1 or not plot)):
        raise NmtError("--plot takes exactly one sentence and --show-attention sentences given as arguments, "
                       'e.g. nmt translate "I am cold." --plot attention.png')
    if (scores or align) and nbest > 1:
        raise NmtError("--scores and --align annotate the best translation; leave out --nbest")
    if markup and (nbest > 1 or tokenized):
        raise NmtError("--markup keeps the tags in the best translation's text: leave out --nbest and --tokenized")
    sampling = _sampling(sample, beam, top_k, top_p, temperature, seed)
    translator = Translator.load(checkpoint, device, engine=engine, strict_numbers=False if loose_numbers else None)
    if plot or show_attention:
        _translate_with_attention(translator, text, plot, show_attention, beam, terms)
        return
    printer = Printer(translator, tokenized, scores, align, nbest)
    marked = markup if nbest == 1 and not tokenized else False  # (--markup with those is refused above)
    options = Options(beam=beam, n=nbest, prefix=prefix, sample=sampling, glossary=terms, markup=marked)
    stream = translator.stream
    if text:
        printer.print_all(stream(text, options))
    elif input_ is not None:
        _translate_file(stream, input_, printer, options)
    else:  # a prompt, or a pipe: each line answered as it arrives, so a program can talk to nmt line by line
        lines = _prompted_lines(translator.tokenizer.source_lang) if sys.stdin.isatty() else _stdin_lines()
        printer.print_all(stream(lines, options, chunk_size=1), flush=True)


class Printer:
    """The one output form the flags choose, for every input: the best translation (its text or
    --tokenized form, with --scores its mean and word scores, with --align its alignment, tab-
    separated), or with --nbest N the lines 'index<TAB>score<TAB>text' of each input's N best."""

    def __init__(self, translator, tokenized: bool, scores: bool, align: bool, nbest: int):
        self.translator, self.tokenized, self.scores, self.align, self.nbest = translator, tokenized, scores, align, nbest
        self.index = 0  # of the next input, counted over the whole stream

    def print_all(self, chunks, flush: bool = False) -> None:
        for texts, results in chunks:
            self.print(texts, results)
            if flush:
                sys.stdout.flush()

    def print(self, texts: list[str], results: list) -> None:
        from nmt.inference.translator import alignments, best_of
        from nmt.inference.text.words import pharaoh

        if self.nbest > 1:
            for offset, translations in enumerate(results):
                if not translations:  # an empty input still gets its line
                    typer.echo(f"{self.index + offset}\t\t")
                for t in translations:
                    typer.echo(f"{self.index + offset}\t{t.score:.4f}\t{self._text(t)}")
        else:
            best = [best_of(hyps) for hyps in results]
            aligned = alignments(self.translator, texts, best) if self.align else None
            for offset, t in enumerate(best):
                fields = [self._text(t)]
                if self.scores:
                    fields += [f"{t.mean_score:.4f}", " ".join(f"{s:.4f}" for s in t.word_scores)]
                if aligned is not None:
                    fields.append(pharaoh(aligned[offset]))
                typer.echo("\t".join(fields))
        self.index += len(texts)

    def _text(self, t) -> str:
        return t.tokenized if self.tokenized else t.text


def _sampling(sample: bool, beam: Optional[int], top_k: int, top_p: float, temperature: float, seed: int):
    """--sample's draw, or None; its options without it, or with --beam, are a mistake said in one line."""
    from nmt.inference.decoding.sampling import Sampling

    given = [name for name, on in (("--top-k", top_k), ("--top-p", top_p != 1.0),
                                   ("--temperature", temperature != 1.0), ("--seed", seed)) if on]
    if not sample:
        if given:
            raise NmtError(f"{given[0]} shapes sampling: add --sample (or leave it out)")
        return None
    if beam is not None:
        raise NmtError("--sample draws translations instead of searching: leave out --beam")
    return Sampling(top_k, top_p, temperature, seed)


def _translate_file(stream, input_: str, printer: Printer, options) -> None:
    """A file (or `-`, stdin) in chunks to stdout, with a progress bar on stderr (a plain line
    every 10 s off a terminal) and the speed at the end: back-translating a large file takes a while."""
    import time

    from nmt.data.corpus import iter_text_lines
    from nmt.progress_bar import Meter

    total = None if input_ == "-" else _count_lines(Path(input_))
    with _open_input(input_) as f, Meter(total, "translate", "sentences") as meter:
        for texts, results in stream(iter_text_lines(f, input_), options):
            printer.print(texts, results)
            meter.update(len(texts))
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


def _stdin_lines():
    from nmt.data.corpus import iter_text_lines

    return iter_text_lines(sys.stdin.buffer, "stdin")


def _prompted_lines(language: str):
    """Lines typed at a prompt ("en> " for an English source), until an empty line, Ctrl-D or Ctrl-C."""
    typer.echo("Type a sentence, get its translation; an empty line or Ctrl-D ends.", err=True)
    while True:
        try:
            line = input(f"{language}> ")
        except (EOFError, KeyboardInterrupt):
            typer.echo("", err=True)
            return
        if not line.strip():
            return
        yield line


def _translate_with_attention(translator, sentences: list[str], plot: Optional[Path], show: bool,
                              beam: Optional[int], glossary=None) -> None:
    from nmt.evaluation.visualize import attention_table, plot_attention

    for sentence in sentences:
        best = translator.translations([sentence], beam, glossary=glossary)[0]
        src_tokens, out_tokens, weights = translator.attention(sentence, best)
        typer.echo(best.text)
        if show:
            typer.echo(attention_table(src_tokens, out_tokens, weights))
        if plot:
            languages = translator.tokenizer.source_lang, translator.tokenizer.target_lang
            plot_attention(src_tokens, out_tokens, weights, plot, title=sentence, languages=languages)
            typer.echo(f"attention heatmap written to {plot}", err=True)


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
