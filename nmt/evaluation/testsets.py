"""Test sets from outside the training corpus, read whole (nothing is filtered by length or
dropped): a source file with reference files (sacreBLEU's layout: one file a reference stream,
line-aligned, an empty line meaning no reference there), a corpus in any form `--data` reads
(all translations of one source are its references, as in the split), or a test set of
sacreBLEU's own registry (`sacrebleu -t wmt14 -l en-fr`)."""

from __future__ import annotations

import contextlib
import io
import logging
from dataclasses import dataclass
from pathlib import Path

from nmt.config import DataConfig
from nmt.data.corpus import Pair, whole_pairs
from nmt.data.tokenizer import TOKENIZER
from nmt.errors import DataError
from nmt.evaluation.metrics import References, group_references

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TestSet:
    name: str  # what the result line and the hypotheses file are named after
    references: References  # the sources to translate, each with all of its references
    pairs: list[Pair]  # every (source, reference), for the loss


def read_lines(path: Path) -> list[str]:
    """A text file's lines as sacreBLEU reads them (split at newlines, a final newline ending the
    last line); a missing or non-UTF-8 file is an error naming it."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise DataError(f"{path}: line {line} is not valid UTF-8") from None
    lines = [line.rstrip("\r") for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def file_name(path: Path) -> str:
    """How hypotheses of a test set file are named: its file name, never a split's ("test")."""
    return f"{path.name}-file" if path.name in ("test", "valid") else path.name


def _pair(src: str, ref: str) -> Pair:
    return Pair(TOKENIZER.preprocess(src).split(), TOKENIZER.tokenize(ref), src.strip(), ref.strip())


def from_files(src: Path, refs: list[Path]) -> TestSet:
    """Sources with one or more line-aligned reference streams; each line is its own segment."""
    if not refs:
        raise DataError("--src needs at least one --ref FILE (a reference translation a line)")
    sources = read_lines(src)
    if not sources:
        raise DataError(f"{src} is empty: a test set needs at least one source line")
    streams = [read_lines(ref) for ref in refs]
    for ref, stream in zip(refs, streams):
        if len(stream) != len(sources):
            raise DataError(f"{src} has {len(sources):,} lines but {ref} has {len(stream):,}; "
                            f"a reference file holds one line per source line (empty where it has none)")
    references, legacy, pairs = [], [], []
    for number, (source, *translations) in enumerate(zip(sources, *streams), start=1):
        given = [t.strip() for t in translations if t.strip()]
        if not given:
            raise DataError(f"line {number} of {src} has no reference in any of "
                            f"{', '.join(map(str, refs))}; give every source at least one")
        references.append(given)
        legacy.append([" ".join(TOKENIZER.tokenize(t)) for t in given])
        pairs.extend(_pair(source, t) for t in given)
    refs_ = References([s.strip() for s in sources], [TOKENIZER.preprocess(s).split() for s in sources],
                       references, legacy)
    return TestSet(file_name(src), refs_, pairs)


def from_corpus(path: Path, cfg: DataConfig) -> TestSet:
    """Every line of a corpus (zip, TSV, PREFIX.<lang> pairs) in the direction `cfg` gives; the
    lines of one source sentence are grouped into its references, as the split groups them."""
    pairs = whole_pairs(path, cfg)
    return TestSet(file_name(path), group_references(pairs), pairs)


def from_sacrebleu(name: str, langpair: str) -> TestSet:
    """A test set of sacreBLEU's registry, from its download folder ($SACREBLEU, ~/.sacrebleu),
    downloaded there first if it is not (which needs the internet)."""
    from sacrebleu.dataset import DATASETS

    if name not in DATASETS:
        raise DataError(f"sacreBLEU knows no test set {name!r}; `sacrebleu --list` lists them (e.g. wmt14)")
    dataset = DATASETS[name]
    if langpair not in dataset.langpairs:
        raise DataError(f"sacreBLEU's {name} has no language pair {langpair!r}; it has "
                        f"{', '.join(sorted(dataset.langpairs))}")
    try:
        # sacreBLEU reports a failed download on its logger or stdout and may exit: keep that quiet
        # and say it in one line instead.
        with contextlib.redirect_stdout(io.StringIO()), _quiet("sacrebleu"):
            src, refs = dataset.get_source_file(langpair), dataset.get_reference_files(langpair)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - urllib, tarfile, or sacreBLEU's own exit
        raise DataError(f"could not get sacreBLEU's test set {name} ({langpair}): "
                        f"{str(e).strip() or type(e).__name__}; it downloads into $SACREBLEU (default "
                        f"~/.sacrebleu), which needs the internet: download it there elsewhere, or give "
                        f"its files with --src/--ref") from None
    test = from_files(Path(src), [Path(r) for r in refs])
    return TestSet(f"sacrebleu-{name.replace('/', '_')}.{langpair}", test.references, test.pairs)


@contextlib.contextmanager
def _quiet(name: str):
    log = logging.getLogger(name)
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)
