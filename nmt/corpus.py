"""Finding, downloading and reading the Tatoeba fra-eng corpus, and the canonical split."""

from __future__ import annotations

import hashlib
import logging
import os
import urllib.error
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
CACHE_PATH = Path("data") / "fra-eng.zip"
CORPUS_FILE = "fra.txt"


def resolve_corpus(cli_path: str | None, cfg: DataConfig, cache: Path = CACHE_PATH) -> Path:
    """Find the corpus: --data, then data.path, then $NMT_CORPUS, then the cache, then download."""
    candidates = [("--data", cli_path), ("data.path in the config", cfg.path),
                  (f"${ENV_VAR}", os.environ.get(ENV_VAR) or None)]
    for origin, value in candidates:
        if value is not None:
            path = Path(value).expanduser()
            if not path.is_file():
                raise DataError(f"corpus not found: {path} (from {origin}); "
                                f"give the path of fra-eng.zip or fra.txt")
            return path
    if cache.is_file():
        return cache
    logger.info("corpus not found locally; downloading %s into %s", cfg.url, cache)
    try:
        download(cfg.url, cache, cfg.sha1)
    except DataError as e:
        raise DataError(f"{e}. Looked for the corpus in --data, data.path, ${ENV_VAR} and {cache}; "
                        f"download fra-eng.zip by hand and pass --data PATH or set {ENV_VAR}") from None
    return cache


def download(url: str, dest: Path, sha1: str) -> None:
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
    if digest.hexdigest() != sha1:
        partial.unlink(missing_ok=True)
        raise DataError(f"checksum mismatch for {url}: sha1 {digest.hexdigest()}, expected {sha1}")
    os.replace(partial, dest)


def read_lines(path: Path) -> list[str]:
    """The lines of fra.txt, read from the zip (ignoring __MACOSX/) or from a plain text file."""
    if path.suffix == ".zip" and path.is_file() and not zipfile.is_zipfile(path):
        raise DataError(f"{path}: not a valid zip file; delete it or pass a good copy with --data")
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                members = [n for n in archive.namelist()
                           if Path(n).name == CORPUS_FILE and not n.startswith("__MACOSX/")]
                if not members:
                    raise DataError(f"{path}: the zip holds no {CORPUS_FILE}")
                raw = archive.read(members[0])
        else:
            raw = path.read_bytes()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as e:
        raise DataError(f"{path}: cannot read the corpus ({e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(f"{path}: line {line} is not valid UTF-8") from None
    return text.splitlines()


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
    """The canonical split: md5 of the preprocessed English sentence, mod 100."""
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


def load_splits(path: Path, num_pairs: int | None = None) -> Splits:
    """Read, preprocess and split the corpus; lines without a tab or with an empty side are skipped."""
    lines = read_lines(path)
    if num_pairs is not None:
        lines = lines[:num_pairs]
    splits = Splits([], [], [])
    for line in lines:
        parts = line.split("\t")
        src_key = TOKENIZER.preprocess(parts[0]) if len(parts) >= 2 else ""
        tgt = TOKENIZER.tokenize(parts[1]) if len(parts) >= 2 else []
        src = src_key.split()
        if not src or not tgt:
            splits.skipped += 1
            continue
        getattr(splits, split_of(src_key)).append(Pair(src, tgt, parts[0].strip(), parts[1].strip()))
    if splits.skipped:
        logger.warning("%s: skipped %d line(s) without a tab or with an empty side",
                       path, splits.skipped)
    if not splits.train:
        raise DataError(f"{path}: no usable 'English<TAB>French' lines in the training split")
    return splits


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
