"""Finding, downloading and reading a parallel corpus, and the canonical split.

A corpus is one of:
- a zip holding one text file of tab-separated pairs (Tatoeba's packaging by manythings.org:
  `fra-eng.zip` holds `fra.txt`, `deu-eng.zip` holds `deu.txt`);
- such a text file itself: `<src_lang text><TAB><tgt_lang text>[<TAB>anything]` a line;
- PREFIX naming two line-aligned plain text files, `PREFIX.<src_lang>` and `PREFIX.<tgt_lang>`
  (Joey NMT's and fairseq's layout).
`data.reverse` trains from the second language into the first.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from nmt.config import DataConfig
from nmt.data.tokenizer import TOKENIZER
from nmt.errors import DataError
from nmt.progress_bar import Meter

logger = logging.getLogger(__name__)

ENV_VAR = "NMT_CORPUS"
CACHE_DIR = Path("data")
FORMS = "a zip, a tab-separated file, or PREFIX of PREFIX.<src_lang> and PREFIX.<tgt_lang>"


def cache_path(cfg: DataConfig) -> Path:
    """Where a download of `data.url` is kept: data/<its file name> (data/fra-eng.zip by default)."""
    return CACHE_DIR / (Path(urllib.parse.urlparse(cfg.url).path).name or "corpus.zip")


def language_files(base: Path, cfg: DataConfig) -> tuple[Path, Path]:
    return base.with_name(f"{base.name}.{cfg.src_lang}"), base.with_name(f"{base.name}.{cfg.tgt_lang}")


def corpus_exists(path: Path, cfg: DataConfig) -> bool:
    return path.is_file() or all(p.is_file() for p in language_files(path, cfg))


def recorded_corpus(state: dict | None, cfg: DataConfig) -> str | None:
    """The corpus a run's checkpoint records it trained on (`nmt train --data`), where it still is:
    so a run's own corpus is found without --data again."""
    recorded = (state or {}).get("corpus")
    return recorded["path"] if recorded and corpus_exists(Path(recorded["path"]), cfg) else None


def require_corpus(path: Path, cfg: DataConfig, what: str, origin: str = "") -> None:
    """One line saying that `what` is not at `path` (named by `origin`), and the forms a corpus takes."""
    if not corpus_exists(path, cfg):
        raise DataError(f"{what} not found: {path}{origin}; give a tab-separated file such as fra.txt, a zip holding "
                        f"one such as fra-eng.zip, or PREFIX of PREFIX.{cfg.src_lang} and PREFIX.{cfg.tgt_lang}")


def resolve_corpus(cli_path: str | None, cfg: DataConfig, cache: Path | None = None) -> Path:
    """Find the corpus: --data, then data.path, then $NMT_CORPUS, then the cache, then download.
    The dev and test sets the config names (data.valid, data.test) must exist too."""
    check_held_out(cfg)
    cache = cache if cache is not None else cache_path(cfg)
    candidates = [("--data", cli_path), ("data.path in the config", cfg.path),
                  (f"${ENV_VAR}", os.environ.get(ENV_VAR) or None)]
    for origin, value in candidates:
        if value is not None:
            path = Path(value).expanduser()
            require_corpus(path, cfg, "corpus", f" (from {origin})")
            return path
    if cache.is_file():
        return cache
    logger.info("corpus not found locally; downloading %s into %s", cfg.url, cache)
    try:
        download(cfg.url, cache, cfg.sha1)
    except DataError as e:
        raise DataError(f"{e}. Looked for the corpus in --data, data.path, ${ENV_VAR} and {cache}; "
                        f"download it by hand and pass --data PATH or set {ENV_VAR}") from None
    return cache


def download(url: str, dest: Path, sha1: str | None) -> None:
    """Download `url` to `dest` with a progress bar; the file appears only if its SHA-1 matches."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".part")
    digest = hashlib.sha1()
    try:
        with urllib.request.urlopen(url, timeout=30) as response, open(partial, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            with Meter(total, f"download {dest.name}", "B", unit_scale=True) as bar:
                while chunk := response.read(1 << 16):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
    except (urllib.error.URLError, OSError, ValueError) as e:
        partial.unlink(missing_ok=True)
        raise DataError(f"could not download {url}: {getattr(e, 'reason', e)}") from None
    if sha1 is not None and digest.hexdigest() != sha1:
        partial.unlink(missing_ok=True)
        raise DataError(f"checksum mismatch for {url}: sha1 {digest.hexdigest()}, expected {sha1} "
                        f"(for another corpus than d2l's, set data.sha1 to its checksum or to null)")
    os.replace(partial, dest)


def _decode(raw: bytes, name: object, line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{name}: line {line} is not valid UTF-8") from None


def _zip_member(path: Path, archive: zipfile.ZipFile) -> str:
    """The one text file of pairs in a zip: a .txt that is not macOS metadata or _about.txt."""
    members = [n for n in archive.namelist() if n.endswith(".txt") and not n.startswith("__MACOSX/")
               and not Path(n).name.startswith(("_", "."))]
    if not members:
        raise DataError(f"{path}: the zip holds no text file of sentence pairs (*.txt)")
    if len(members) > 1:
        raise DataError(f"{path}: the zip holds several text files ({', '.join(members)}); "
                        f"extract the one to train on and pass it with --data")
    return members[0]


class LineReader:
    """The lines of one text file, or of the one text file in a zip, decoded one at a time (the
    whole corpus is never in memory), numbered as str.splitlines() numbers them. `bytes_read`
    and `total_bytes` (uncompressed) let a progress bar follow."""

    def __init__(self, path: Path):
        self.path, self.name, self.bytes_read = path, str(path), 0
        if path.suffix == ".zip" and path.is_file() and not zipfile.is_zipfile(path):
            raise DataError(f"{path}: not a valid zip file; delete it or pass a good copy with --data")
        try:
            if zipfile.is_zipfile(path):
                with zipfile.ZipFile(path) as archive:
                    member = _zip_member(path, archive)
                    self.member: str | None = member
                    self.total_bytes = archive.getinfo(member).file_size
                    self.name = f"{path}:{member}"
            else:
                self.member, self.total_bytes = None, path.stat().st_size
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as e:
            raise DataError(f"{path}: cannot read the corpus ({e})") from None

    def __iter__(self) -> Iterator[str]:
        try:
            with contextlib.ExitStack() as stack:
                if self.member is not None:
                    archive = stack.enter_context(zipfile.ZipFile(self.path))
                    stream = stack.enter_context(archive.open(self.member))
                else:
                    stream = stack.enter_context(open(self.path, "rb"))
                number = 0
                for raw in stream:
                    self.bytes_read += len(raw)
                    # One physical line may hold several str.splitlines() lines (\r, \u2028, ...).
                    for line in _decode(raw, self.name, number + 1).splitlines() or [""]:
                        number += 1
                        yield line
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as e:
            raise DataError(f"{self.path}: cannot read the corpus ({e})") from None


def count_pairs(path: Path, cfg: DataConfig, at_most: int) -> int:
    """The lines of the corpus that hold a pair (within data.num_pairs), counted no further than
    `at_most`: what the recipe sizes a run by, read before the corpus is prepared."""
    lines = itertools.islice(PairReader(path, cfg), min(at_most, cfg.num_pairs or at_most))
    return sum(first is not None for _, first, _ in lines)


def read_lines(path: Path) -> list[str]:
    """The lines of a tab-separated corpus, read from its zip (see `_zip_member`) or a text file."""
    return list(LineReader(path))


class PairReader:
    """The corpus as (line number, first language's text, second language's text), one line at a
    time; a line of a tab-separated file that holds no pair (no tab) comes as (number, None, None)."""

    def __init__(self, path: Path, cfg: DataConfig):
        self.path = path
        if path.is_file():
            self.readers = [LineReader(path)]
        else:
            files = language_files(path, cfg)
            for file in files:
                if not file.is_file():
                    raise DataError(f"cannot read {file}: no such file")
            self.readers = [LineReader(file) for file in files]

    @property
    def bytes_read(self) -> int:
        return sum(r.bytes_read for r in self.readers)

    @property
    def total_bytes(self) -> int:
        return sum(r.total_bytes for r in self.readers)

    def __iter__(self) -> Iterator[tuple[int, str | None, str | None]]:
        if len(self.readers) == 1:
            for number, line in enumerate(self.readers[0], start=1):
                parts = line.split("\t")
                yield (number, parts[0], parts[1]) if len(parts) >= 2 else (number, None, None)
            return
        lines = [0, 0]
        for a, b in itertools.zip_longest(*self.readers):
            lines[0] += a is not None
            lines[1] += b is not None
            if lines[0] == lines[1]:
                yield lines[0], a, b
        if lines[0] != lines[1]:  # found at the end of the longer file
            names = [r.path for r in self.readers]
            raise DataError(f"{names[0]} has {lines[0]:,} lines but {names[1]} has {lines[1]:,}; "
                            f"the two files must be line-aligned translations")


@dataclass(frozen=True)
class Pair:
    src: list[str]  # word tokens: d2l's lowercased, punctuation-split form
    tgt: list[str]
    src_text: str = ""  # the corpus's own text, cased and untokenized
    tgt_text: str = ""
    line: int = 0  # its line in the corpus (0: a given dev or test set's)

    @property
    def raw(self) -> tuple[str, str]:
        """The sentences as the corpus writes them (rebuilt from the tokens if not kept)."""
        return self.src_text or " ".join(self.src), self.tgt_text or " ".join(self.tgt)


def source_hash(src_key: str) -> int:
    """md5 of the preprocessed source sentence: the split's key, shared by all its translations."""
    return int(hashlib.md5(src_key.encode("utf-8")).hexdigest(), 16)


def split_of(src_key: str) -> str:
    """The canonical split: md5 of the preprocessed source sentence, mod 100."""
    bucket = source_hash(src_key) % 100
    return "test" if bucket in (0, 1) else "valid" if bucket == 2 else "train"


HELD_OUT_MAX = 5_000  # pairs, about, an md5 split (valid, test) keeps at most: the rest of a large corpus trains


def held_out_stride(split: str, pairs: int, cfg: DataConfig) -> int:
    """Every how-many-th source (by its hash) of the md5 held-out `split` of `pairs` pairs stays held
    out: all of them up to HELD_OUT_MAX pairs; beyond, about HELD_OUT_MAX pairs stay and the others
    train, so a corpus of 36 million pairs validates and tests on thousands, as WMT's sets do. A
    split the user gave as a file (data.valid, data.test) is kept whole: 1."""
    return 1 if split in held_out_files(cfg) else max(1, -(-pairs // HELD_OUT_MAX))


def stays_held_out(src_text: str, stride: int) -> bool:
    """Whether a held-out pair stays in a split thinned to every `stride`-th source: all the
    translations of a source together, by hash digits `PreparedCorpus.pairs`'s subset does not read."""
    return stride == 1 or source_hash(TOKENIZER.preprocess(src_text)) // 10_000 % stride == 0


@dataclass
class Splits:
    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]
    skipped: int = 0

    def sizes(self) -> str:
        return f"train {len(self.train):,} | valid {len(self.valid):,} | test {len(self.test):,} pairs"


def directed(first: str, second: str, cfg: DataConfig) -> tuple[str, str]:
    """A corpus line's two sides as (source, target), in the direction `cfg` gives."""
    return (second, first) if cfg.reverse else (first, second)


def split_pair(first: str | None, second: str | None, cfg: DataConfig, line: int = 0) -> tuple[str, Pair] | None:
    """The split a corpus line belongs to and its pair, in the direction `cfg` gives; None for a
    line without a tab (no second side) or with an empty side."""
    if first is None or second is None:
        return None
    src_text, tgt_text = directed(first, second, cfg)
    src_key = TOKENIZER.preprocess(src_text)
    src, tgt = src_key.split(), TOKENIZER.tokenize(tgt_text)
    if not src or not tgt:
        return None
    return split_of(src_key), Pair(src, tgt, src_text.strip(), tgt_text.strip(), line)


class SplitCounter:
    """The lines a split skips and the errors an unusable corpus gets, for every reader of the split."""

    def __init__(self, path: Path):
        self.path, self.pairs, self.skipped, self.first_no_tab = path, 0, 0, None

    def usable(self, number: int, first: str | None, second: str | None, cfg: DataConfig) -> tuple[str, Pair] | None:
        found = split_pair(first, second, cfg, number)
        self.tally(number, first is not None and second is not None, found is not None)
        return found

    def tally(self, number: int, has_tab: bool, usable: bool) -> None:
        """Count one line: a pair, or a line skipped (no tab, or an empty side)."""
        if not has_tab:
            self.first_no_tab = self.first_no_tab or number
        self.pairs += has_tab
        self.skipped += not usable

    def finish(self, train_pairs: int) -> None:
        """Warn of skipped lines; raise if the corpus held no pair, or none for training."""
        if not self.pairs:
            where = f" (line {self.first_no_tab} has no tab)" if self.first_no_tab else " (it is empty)"
            raise DataError(f"{self.path}: no usable 'source<TAB>target' lines{where}; expected {FORMS}")
        if self.skipped:
            first_no_tab = f" (the first without a tab: line {self.first_no_tab})" if self.first_no_tab else ""
            logger.warning("%s: skipped %d line(s) without a tab or with an empty side%s", self.path, self.skipped,
                           first_no_tab)
        if not train_pairs:
            raise DataError(f"{self.path}: no usable 'source<TAB>target' lines in the training split")


@dataclass
class Overlap:
    """Training pairs whose source is also in a given dev or test set (data.valid, data.test)."""
    pairs: int = 0
    sources: set[str] = field(default_factory=set)


def split_pairs(reader: PairReader, cfg: DataConfig, counter: SplitCounter, overlap: Overlap,
                num_pairs: int | None = None) -> Iterator[tuple[str, Pair]]:
    """Every usable pair of the corpus with its split: the one rule by which training (through
    `nmt.data.prepare`) and `load_splits` split a corpus. The md5 rule puts every translation of one
    source in the same split; a dev or test set the config gives replaces its split (the md5 rule's
    pairs of that split train instead), and with data.drop_overlap a training pair whose source is
    in it is dropped (counted in `overlap`). The given sets' pairs come last."""
    held_out = {split: whole_pairs(path, cfg, f"data.{split}") for split, path in held_out_files(cfg).items()}
    held_sources = {" ".join(pair.src) for pairs in held_out.values() for pair in pairs}
    for number, first, second in reader:
        if num_pairs is not None and number > num_pairs:
            break
        found = counter.usable(number, first, second, cfg)
        if found is None:
            continue
        split, pair = found
        if split in held_out:
            split = "train"
        if split == "train" and held_sources and (key := " ".join(pair.src)) in held_sources:
            overlap.pairs += 1
            overlap.sources.add(key)
            if cfg.drop_overlap:  # a dev set must not grade what the model memorised
                continue
        yield split, pair
    for split, pairs in held_out.items():
        yield from ((split, pair) for pair in pairs)


def load_splits(path: Path, num_pairs: int | None = None, cfg: DataConfig | None = None) -> Splits:
    """Read, preprocess and split a corpus in memory, in the direction `cfg` gives (English to French
    by default), for small corpora and tools, as training splits it (`split_pairs`; training reads
    the prepared copy of `nmt.data.prepare`). Lines without a tab or with an empty side are skipped
    with a warning; a corpus with no pair is an error."""
    cfg = cfg or DataConfig()
    splits, counter = Splits([], [], []), SplitCounter(path)
    for split, pair in split_pairs(PairReader(path, cfg), cfg, counter, Overlap(), num_pairs):
        getattr(splits, split).append(pair)
    for split in ("valid", "test"):
        pairs = getattr(splits, split)
        if (stride := held_out_stride(split, len(pairs), cfg)) > 1:
            stays = [stays_held_out(pair.raw[0], stride) for pair in pairs]
            setattr(splits, split, [pair for pair, kept in zip(pairs, stays) if kept])
            splits.train.extend(pair for pair, kept in zip(pairs, stays) if not kept)
    counter.finish(len(splits.train))
    splits.skipped = counter.skipped
    return splits


def whole_pairs(path: Path, cfg: DataConfig, what: str = "a test set") -> list[Pair]:
    """Every line of a small corpus (a dev or test set) as a pair, in the direction `cfg` gives;
    such a set is used whole, so a line that holds no pair is an error naming it."""
    require_corpus(path, cfg, what)
    pairs = []
    for number, first, second in PairReader(path, cfg):
        found = split_pair(first, second, cfg)
        if found is None:
            raise DataError(f"{path}: line {number} holds no pair (no tab, or an empty side); {what} is "
                            f"used whole, so fix or remove that line")
        pairs.append(found[1])
    if not pairs:
        raise DataError(f"{path} is empty: {what} needs at least one pair")
    return pairs


def held_out_files(cfg: DataConfig) -> dict[str, Path]:
    """The dev and test sets the config gives (data.valid, data.test), by split."""
    return {split: Path(value).expanduser() for split in ("valid", "test") if (value := getattr(cfg, split))}


def check_held_out(cfg: DataConfig) -> None:
    for split, path in held_out_files(cfg).items():
        require_corpus(path, cfg, f"data.{split}")


def iter_text_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """Lines of a user's input, decoded one at a time (bounded memory); a line that is not
    UTF-8 is an error naming it."""
    for number, raw in enumerate(stream, start=1):
        try:
            yield raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            raise DataError(f"{name}: line {number} is not valid UTF-8") from None


def open_text_input(path: Path) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror}") from None
