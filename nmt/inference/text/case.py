"""The case stage: a source in capitals or in Title Case is read in sentence case (each word as the
training corpus usually writes it: `CasedWords`), and its translation written back in the source's
style (`write`); a part of a sentence that starts small has a translation that starts small."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from nmt.data.prepared_corpus import CASED_WORDS, SENTENCE_END, WORD_ENDS, read_cased_words
from nmt.data.protected_numbers import Found, untranslated_spans
from nmt.inference.text.records import SENTENCE

_CASED = re.compile(r"[^\W\d_]")
UPPER, TITLE = "upper", "title"  # a source's case styles besides SENTENCE (as written)


def read(text: str, cased: CasedWords) -> tuple[str, str]:
    """A text's case style and the text as the model reads it: in sentence case where it was in
    capitals or Title Case (links, addresses and the like found once: the rule reads around them)."""
    spans = untranslated_spans(text)
    style = case_style(text, spans)
    return style, (cased.sentence_case(text, spans) if style != SENTENCE else text)


def case_style(text: str, spans: Sequence[Found] | None = None) -> str:
    """UPPER where every cased letter is a capital (two words at least); TITLE where every word of
    three or more starts with a capital and some letter is small; else SENTENCE. Links, addresses
    and the like (`spans`, default `untranslated_spans`) do not count."""
    for found in reversed(untranslated_spans(text) if spans is None else spans):
        text = text[: found.start] + " " + text[found.end:]
    words = [w for w in text.split() if _CASED.search(w)]
    letters = "".join(_CASED.findall(text))
    if len(words) >= 2 and letters.isupper():
        return UPPER
    if len(words) >= 3 and all(_first_letter(w).isupper() for w in words) and not letters.isupper():
        return TITLE
    return SENTENCE


def _first_letter(word: str) -> str:
    match = _CASED.search(word)
    return match.group() if match else ""


class CasedWords:
    """How the training corpus writes a word where no sentence starts: {lowercase: form} for the
    words it writes with capitals more often than not ("tom": "Tom", "i": "I", "usa": "USA")."""

    def __init__(self, forms: dict[str, str]):
        self.forms = forms

    @classmethod
    def load(cls, run: Path) -> CasedWords:
        """A run directory's table; an empty one where the run has none (trained before it was kept)."""
        return cls(read_cased_words(run / CASED_WORDS) if (run / CASED_WORDS).is_file() else {})

    def sentence_case(self, text: str, spans: Sequence[Found] | None = None) -> str:
        """`text` as the corpus writes it: each word in small letters or in its usual form, each
        sentence's first capitalized; links, addresses and the like (`spans`, default
        `untranslated_spans`) as they are."""
        out, cursor, starts = [], 0, True
        for found in [*(untranslated_spans(text) if spans is None else spans), None]:
            end = found.start if found else len(text)
            for token in re.split(r"(\s+)", text[cursor:end]):
                word = token.strip().strip(WORD_ENDS)
                if word:
                    written = self.forms.get(word.lower(), word.lower())
                    token = token.replace(word, _capitalized(written) if starts else written, 1)
                    starts = False
                starts = starts or bool(SENTENCE_END.search(token))
                out.append(token)
            if found:
                out.append(text[found.start: found.end])
                cursor, starts = found.end, False
        return "".join(out)


def write(text: str, style: str) -> str:
    """A translation written in its source's case style."""
    if style == UPPER:
        return text.upper()
    if style == TITLE:
        return " ".join(_capitalized(word) for word in text.split(" "))
    return text


def _capitalized(word: str) -> str:
    match = _CASED.search(word)
    return word[: match.start()] + match.group().upper() + word[match.end():] if match else word


def starts_small(source: str) -> bool:
    """A part of a sentence that starts with a small letter: its translation does too."""
    letter = _first_letter(source)
    return bool(letter) and letter.islower()


def small_first(text: str) -> str:
    match = _CASED.search(text)
    return text[: match.start()] + match.group().lower() + text[match.end():] if match else text
