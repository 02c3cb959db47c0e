"""The rules a training pair is judged by, each named, each a `data.drop_*` key of the config
(0 or false takes it off), in the order a pair meets them: the first that holds drops it.

- `empty`: a side with no letter or digit (punctuation, symbols, spaces only);
- `junk`: markup tags or HTML entities, mojibake (UTF-8 read as another encoding: ftfy's test), or
  a side that is a bare web address;
- `copies`: the target repeats the source (case, spaces and punctuation aside): left untranslated;
- `language`: a side whose language py3langid gives a probability below `data.drop_language`;
- `ratio`: a pair whose length ratio, in characters, lies further than `data.drop_ratio` times from
  the corpus's own mean ratio;
- `duplicates` (in `nmt.data.cleaning.duplicates`): the same pair again, case, spaces and punctuation aside.

The first four read a pair alone, so the prepare's worker processes judge them; `ratio` and
`duplicates` need what came before, so the process that writes the stores judges them in order.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re

import numpy as np
from ftfy.badness import is_bad

from nmt.config import DataConfig
from nmt.errors import DataError

logger = logging.getLogger(__name__)

RULES = ("empty", "junk", "copies", "language", "ratio", "duplicates")
_WORD_CHARACTER = re.compile(r"[^\W_]")
_NOT_WORD = re.compile(r"[\W_]+")
_MARKUP = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>|&(?:#\d+|#x[0-9A-Fa-f]+|[A-Za-z]+);")
_ADDRESS = re.compile(r"(?:[a-z][a-z0-9+.-]*://|www\.)\S+", re.IGNORECASE)
_SHORTEST_JUDGED = 12  # characters of the longer side: below, a ratio says nothing ("Hi." / "Salut !")
# Language identification is most of the pair rules' cost (docs/data.md): the rule judges the first
# LANGUAGE_SAMPLE lines of a corpus, and the rest only where it dropped at least LANGUAGE_RARE of their
# training pairs, so that a corpus of millions without wrong-language pairs is not identified line by line.
LANGUAGE_SAMPLE = 1_000_000
LANGUAGE_RARE = 0.001


def normalised(text: str) -> str:
    """What two sentences that differ in case, spaces and punctuation alone share."""
    return _NOT_WORD.sub("", text.casefold())


def pair_key(src: str, tgt: str) -> int:
    """A pair's normalised form as a signed 64-bit number: what the duplicates rule compares."""
    digest = hashlib.blake2b(f"{normalised(src)}\t{normalised(tgt)}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


class Languages:
    """py3langid (langid.py's model of 97 languages, shipped in the package): the probability that a
    text is in the language it should be."""

    def __init__(self, languages: tuple[str, str]):
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
        self.identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        known = set(self.identifier.labels)
        self.codes = tuple(lang.split("-")[0].lower() for lang in languages)
        for lang, code in zip(languages, self.codes):
            if code not in known:
                raise DataError(f"the language identifier (py3langid) does not know {lang!r}, so it cannot tell a "
                                f"pair in the wrong language: --set data.drop_language=0 prepares without that rule")

    def probability(self, text: str, side: int) -> float:
        code = self.codes[side]
        found, confidence = self.identifier.classify(text)
        if found == code:
            return confidence
        return dict(self.identifier.rank(text)).get(code, 0.0)


class PairRules:
    """The rules that read a pair alone (`empty`, `junk`, `copies`, `language`): the first that holds."""

    def __init__(self, cfg: DataConfig):
        self.cfg = cfg
        self.languages = Languages((cfg.source_lang, cfg.target_lang)) if cfg.drop_language else None

    def broken(self, src: str, tgt: str, language: bool = True) -> str | None:
        """The name of the first rule that drops (src, tgt), or None (`language`: whether the
        language rule judges this pair: `LanguageSample.judges`)."""
        sides = (src, tgt)
        if self.cfg.drop_empty and not all(_WORD_CHARACTER.search(side) for side in sides):
            return "empty"
        if self.cfg.drop_junk and any(_junk(side) for side in sides):
            return "junk"
        if self.cfg.drop_copies and normalised(src) == normalised(tgt):
            return "copies"
        if language and self.languages and any(self.languages.probability(side, i) < self.cfg.drop_language
                                               for i, side in enumerate(sides)):
            return "language"
        return None


def _junk(text: str) -> bool:
    return bool(_MARKUP.search(text) or _ADDRESS.fullmatch(text.strip())
                or not text.isascii() and ("\ufffd" in text or is_bad(text)))


class LanguageSample:
    """Whether the language rule judges the pair at a corpus line: the first LANGUAGE_SAMPLE lines,
    then the rest only if it dropped at least LANGUAGE_RARE of their training pairs (decided once,
    said in the log). Both the one-process pass and the workers' ask it, in the corpus's order."""

    def __init__(self, on: bool):
        self.on, self.decided, self.pairs, self.dropped = on, False, 0, 0
        self.size = LANGUAGE_SAMPLE  # (a multiple of the prepare's chunk of lines, so the workers decide as one process)

    def count(self, line: int, rule: str | None) -> None:
        """One training pair judged at a corpus line: `rule` is what dropped it (past the sample: not counted)."""
        if line <= self.size:
            self.pairs += 1
            self.dropped += rule == "language"

    def judges(self, line: int) -> bool:
        if self.on and line > self.size and not self.decided:
            self.decided, self.on = True, self.dropped >= LANGUAGE_RARE * self.pairs
            logger.info("cleaning: the language rule dropped %s of the first %s lines' %s training pairs (%.2f%%): %s",
                        f"{self.dropped:,}", f"{self.size:,}", f"{self.pairs:,}",
                        100 * self.dropped / max(1, self.pairs),
                        "it judges the rest of the corpus too" if self.on else
                        f"under {100 * LANGUAGE_RARE:g}%, so it leaves the rest of the corpus alone")
        return self.on


class Ratio:
    """The `ratio` rule: the corpus's mean log length ratio, kept over the pairs judged so far (a
    chunk's own pairs counted before it is judged, so the first chunk has a mean too), and the pairs
    that lie beyond `data.drop_ratio` times from it."""

    def __init__(self, times: float):
        self.width, self.total, self.count = math.log(times) if times else 0.0, 0.0, 0

    def outliers(self, src_chars: np.ndarray, tgt_chars: np.ndarray) -> np.ndarray:
        judged = np.maximum(src_chars, tgt_chars) >= _SHORTEST_JUDGED
        if not self.width or not judged.any():
            return np.zeros(len(src_chars), bool)
        logs = np.log(np.maximum(tgt_chars, 1) / np.maximum(src_chars, 1))
        self.total += float(logs[judged].sum())
        self.count += int(judged.sum())
        return judged & (np.abs(logs - self.total / self.count) > self.width)


class InOrder:
    """The rules that read the pairs before a pair (`ratio`, `duplicates`), judged a chunk at a time, in
    the corpus's order, by the process that writes the stores."""

    def __init__(self, cfg: DataConfig, corpus_bytes: int):
        from nmt.data.cleaning.duplicates import SeenPairs
        self.ratio = Ratio(cfg.drop_ratio)
        self.seen = SeenPairs(corpus_bytes) if cfg.drop_duplicates else None

    def judge(self, candidates: list[tuple[str, str, int]]) -> list[str | None]:
        """For each (source, target, pair_key) that the pair rules kept: the rule that drops it, or None."""
        if not candidates:
            return []
        chars = np.array([(len(src), len(tgt)) for src, tgt, _ in candidates], np.int64)
        outliers = self.ratio.outliers(chars[:, 0], chars[:, 1])
        repeated = self.seen.repeated(np.array([key for _, _, key in candidates], np.int64)) if self.seen \
            else np.zeros(len(candidates), bool)
        return ["ratio" if out else "duplicates" if again else None for out, again in zip(outliers, repeated)]
