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

import hashlib
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from nmt.config import DataConfig
from nmt.errors import DataError
from nmt.tokenizer import TOKENIZER

logger = logging.getLogger(__name__)

ENV_VAR = "NMT_CORPUS"
CACHE_DIR = Path("data")
FORMS = "a zip, a tab-separated file, or PREFIX of PREFIX.<src_lang> and PREFIX.<tgt_lang>"


def cache_path(cfg: DataConfig) -> Path:
    """Where a download of `data.url` is kept: data/<its file name> (data/fra-eng.zip by default)."""
    return CACHE_DIR / (Path(urllib.parse.urlparse(cfg.url).path).name or "corpus.zip")


def language_files(prefix: Path, cfg: DataConfig) -> tuple[Path, Path]:
    return prefix.with_name(f"{prefix.name}.{cfg.src_lang}"), prefix.with_name(f"{prefix.name}.{cfg.tgt_lang}")


def corpus_exists(path: Path, cfg: DataConfig) -> bool:
    return path.is_file() or all(p.is_file() for p in language_files(path, cfg))


def resolve_corpus(cli_path: str | None, cfg: DataConfig, cache: Path | None = None) -> Path:
    """Find the corpus: --data, then data.path, then $NMT_CORPUS, then the cache, then download."""
    cache = cache if cache is not None else cache_path(cfg)
    candidates = [("--data", cli_path), ("data.path in the config", cfg.path),
                  (f"${ENV_VAR}", os.environ.get(ENV_VAR) or None)]
    for origin, value in candidates:
        if value is not None:
            path = Path(value).expanduser()
            if not corpus_exists(path, cfg):
                raise DataError(f"corpus not found: {path} (from {origin}); give a zip such as fra-eng.zip, "
                                f"a tab-separated file such as fra.txt, or PREFIX of PREFIX.{cfg.src_lang} "
                                f"and PREFIX.{cfg.tgt_lang}")
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
            with tqdm(total=total, unit="B", unit_scale=True, desc=f"download {dest.name}") as bar:
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


def _decode(raw: bytes, name: object) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
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


def read_lines(path: Path) -> list[str]:
    """The lines of a tab-separated corpus, read from its zip (see `_zip_member`) or a text file."""
    if path.suffix == ".zip" and path.is_file() and not zipfile.is_zipfile(path):
        raise DataError(f"{path}: not a valid zip file; delete it or pass a good copy with --data")
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                member = _zip_member(path, archive)
                return _decode(archive.read(member), f"{path}:{member}").splitlines()
        raw = path.read_bytes()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as e:
        raise DataError(f"{path}: cannot read the corpus ({e})") from None
    return _decode(raw, path).splitlines()


def read_pairs(path: Path, cfg: DataConfig) -> tuple[list[tuple[int, str, str]], list[int]]:
    """The corpus as (line number, first language's text, second language's text), and the
    numbers of the lines that hold no pair (no tab, in a tab-separated file)."""
    if not path.is_file():
        first, second = language_files(path, cfg)
        columns = []
        for file in (first, second):
            try:
                columns.append(_decode(file.read_bytes(), file).splitlines())
            except OSError as e:
                raise DataError(f"cannot read {file}: {e.strerror}") from None
        if len(columns[0]) != len(columns[1]):
            raise DataError(f"{first} has {len(columns[0]):,} lines but {second} has {len(columns[1]):,}; "
                            f"the two files must be line-aligned translations")
        return [(n, a, b) for n, (a, b) in enumerate(zip(*columns), start=1)], []
    pairs, no_tab = [], []
    for number, line in enumerate(read_lines(path), start=1):
        parts = line.split("\t")
        if len(parts) < 2:
            no_tab.append(number)
        else:
            pairs.append((number, parts[0], parts[1]))
    return pairs, no_tab


@dataclass(frozen=True)
class Pair:
    src: list[str]  # word tokens: d2l's lowercased, punctuation-split form
    tgt: list[str]
    src_text: str = ""  # the corpus's own text, cased and untokenized
    tgt_text: str = ""

    @property
    def raw(self) -> tuple[str, str]:
        """The sentences as the corpus writes them (rebuilt from the tokens if not kept)."""
        return self.src_text or " ".join(self.src), self.tgt_text or " ".join(self.tgt)


def split_of(src_key: str) -> str:
    """The canonical split: md5 of the preprocessed source sentence, mod 100."""
    bucket = int(hashlib.md5(src_key.encode("utf-8")).hexdigest(), 16) % 100
    return "test" if bucket in (0, 1) else "valid" if bucket == 2 else "train"


@dataclass
class Splits:
    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]
    skipped: int = 0

    def sizes(self) -> str:
        return f"train {len(self.train):,} | valid {len(self.valid):,} | test {len(self.test):,} pairs"


def load_splits(path: Path, num_pairs: int | None = None, cfg: DataConfig | None = None) -> Splits:
    """Read, preprocess and split the corpus in the direction `cfg` gives (English to French by
    default). Every translation of one source sentence lands in the same split. Lines without a
    tab or with an empty side are skipped with a warning; a corpus with no pair is an error."""
    cfg = cfg or DataConfig()
    pairs, no_tab = read_pairs(path, cfg)
    if not pairs:
        where = f" (line {no_tab[0]} has no tab)" if no_tab else " (it is empty)"
        raise DataError(f"{path}: no usable 'source<TAB>target' lines{where}; expected {FORMS}")
    if num_pairs is not None:
        pairs, no_tab = [p for p in pairs if p[0] <= num_pairs], [n for n in no_tab if n <= num_pairs]
    splits = Splits([], [], [], skipped=len(no_tab))
    for _, first, second in pairs:
        src_text, tgt_text = (second, first) if cfg.reverse else (first, second)
        src_key = TOKENIZER.preprocess(src_text)
        src, tgt = src_key.split(), TOKENIZER.tokenize(tgt_text)
        if not src or not tgt:
            splits.skipped += 1
            continue
        getattr(splits, split_of(src_key)).append(Pair(src, tgt, src_text.strip(), tgt_text.strip()))
    if splits.skipped:
        first_no_tab = f" (the first without a tab: line {no_tab[0]})" if no_tab else ""
        logger.warning("%s: skipped %d line(s) without a tab or with an empty side%s", path, splits.skipped,
                       first_no_tab)
    if not splits.train:
        raise DataError(f"{path}: no usable 'source<TAB>target' lines in the training split")
    return splits


def load_corpus(cli_path: str | None, cfg: DataConfig) -> tuple[Path, Splits]:
    """Find the corpus as `resolve_corpus` does and split it as the config says."""
    path = resolve_corpus(cli_path, cfg)
    return path, load_splits(path, cfg.num_pairs, cfg)


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
