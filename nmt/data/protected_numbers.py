"""Protected spans (data.protect): numbers the model moves but never rewrites.

A network writes the digit pieces it has seen, not the ones it was given ("12 years" comes out
"21 ans"). So, as OpenNMT's Tokenizer (its ⦅...⦆ placeholders) and Marian pipelines (@NUM@) do,
numbers never reach it: each digit run of the source, with its inner separators (3.5, 1,000,
7:45, 2021-08-07), becomes a numbered placeholder ⦅N1⦆, ⦅N2⦆, ... (one SentencePiece piece each,
the same on both sides) before tokenization, and the translator puts the source's number back in
its place after every search, written as the target language writes it where that is
unambiguous (English 3.5, 30,000, 7:45 are French 3,5, 30 000, 7h45). In the training data a
target number takes the placeholder of the source number of the same value; a pair whose numbers
do not match one to one (12 translated as "douze") keeps its text, so number words are still learnt.

Search lets each output use a placeholder of its source at most once (`SpanRule`), so no number
that is not in the source is ever printed from a placeholder; strict (decode.strict_numbers), it
also writes each of them exactly once and no digit of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

MAX_SPANS = 9  # placeholders ⦅N1⦆ ... ⦅N9⦆; a sentence with more numbers keeps them all as text
PLACEHOLDERS = tuple(f"⦅N{i}⦆" for i in range(1, MAX_SPANS + 1))
_PLACEHOLDER = re.compile(r"⦅N(\d+)⦆")
_SPACES = re.compile(r" {2,}")
# a placeholder written right after another, a letter or a sentence's punctuation: a space goes between
_GLUED = re.compile(r"(⦅N\d+⦆|[^\W\d_]|[.,;:!?])(?=⦅N\d+⦆)")


@dataclass(frozen=True)
class Convention:
    """How a language writes numbers: the marks it reads (any of each string) and those it writes."""
    decimal: str  # the decimal mark written
    group: str  # the thousands separator written
    time: str  # between hours and minutes
    reads_decimal: str
    reads_group: str  # before a group of exactly three digits
    reads_time: str

    def pattern(self) -> re.Pattern[str]:
        """A number as this language writes it: digit runs joined by single separators (its group
        separators only before three digits, its time mark with optional spaces around)."""
        group = f"[{re.escape(self.reads_group)}](?=\\d{{3}}(?!\\d))" if self.reads_group else "(?!)"
        time = f"\\s?[{re.escape(self.reads_time)}]\\s?(?=\\d{{2}}(?!\\d))" if self.reads_time else "(?!)"
        return re.compile(f"\\d+(?:(?:{group}|{time}|[.,:/-])\\d+)*")


CONVENTIONS = {
    "en": Convention(decimal=".", group=",", time=":", reads_decimal=".", reads_group=",", reads_time=":"),
    # fra-eng's French (measured by scripts/tools/number_forms.py): 7h45 more often than 7 h 45,
    # groups of thousands set apart by a space, the decimal comma.
    "fr": Convention(decimal=",", group=" ", time="h", reads_decimal=",", reads_group=" \u00a0\u202f.",
                     reads_time=":h"),
}
# A language without a convention here reads digit runs joined by . , : / - and writes them verbatim.
VERBATIM = Convention(decimal="", group="", time="", reads_decimal="", reads_group="", reads_time="")


@dataclass(frozen=True)
class Number:
    """A number as written, cut into digit runs and the marks between them, each mark read as
    "G" (thousands), "D" (decimal), "T" (time) or kept as it is."""
    text: str
    parts: tuple[str, ...]  # digits, mark, digits, ...
    marks: tuple[str, ...]  # per mark: G, D, T or the mark itself

    @property
    def value(self) -> str:
        """What two languages' forms of one number share: its digits, decimal and time marks."""
        out = [self.parts[0]]
        for mark, digits in zip(self.marks, self.parts[2::2]):
            out.append(("" if mark == "G" else mark) + digits)
        return "".join(out)

    def written(self, convention: Convention | None) -> str:
        """This number as a language of `convention` writes it (verbatim without one)."""
        if convention is None:
            return self.text
        out = [self.parts[0]]
        for mark, written, digits in zip(self.marks, self.parts[1::2], self.parts[2::2]):
            out.append({"G": convention.group, "D": convention.decimal, "T": convention.time}.get(mark, written)
                       + digits)
        return "".join(out)


def read_number(text: str, convention: Convention) -> Number:
    parts = tuple(re.split(r"(\d+)", text)[1:-1])  # digits, mark, digits, ...
    marks = []
    for mark, after in zip(parts[1::2], parts[2::2]):
        bare = mark.strip()
        if bare and bare in convention.reads_time and len(after) == 2:
            marks.append("T")
        elif mark in convention.reads_group and len(after) == 3 and mark not in convention.reads_decimal:
            marks.append("G")
        elif mark in convention.reads_decimal:
            marks.append("D")
        else:
            marks.append(mark)
    if sum(m in "DT" for m in marks) > 1 or ("G" in marks and "T" in marks):  # 1.2.3, 10:30:15: not one value
        marks = list(parts[1::2])
    return Number(text, parts, tuple(marks))


def convention(lang: str) -> Convention | None:
    return CONVENTIONS.get(lang.split("-")[0].lower())


class SpanProtector:
    """Numbers to placeholders and back, for one translation direction; `target_ids` maps the
    placeholders' ids in the target vocabulary to their index (⦅N1⦆ -> 0), for search."""

    def __init__(self, source_lang: str, target_lang: str, target_ids: dict[int, int] | None = None,
                 digit_ids: frozenset[int] = frozenset()):
        self.source, self.target = convention(source_lang), convention(target_lang)
        self.target_ids = target_ids or {}
        self.digit_ids = digit_ids  # target pieces holding a digit, placeholders aside
        self._source_pattern = (self.source or VERBATIM).pattern()
        self._target_pattern = (self.target or VERBATIM).pattern()

    def numbers(self, text: str) -> list[Number]:
        """The source numbers of `text`, in order."""
        return [read_number(m.group(), self.source or VERBATIM) for m in self._source_pattern.finditer(text)]

    def protect_source(self, text: str) -> tuple[str, list[Number]]:
        """`text` with its numbers as ⦅N1⦆, ⦅N2⦆, ... and the numbers (none when there are more than
        MAX_SPANS: then all stay text, as in training)."""
        found = list(self._source_pattern.finditer(text))
        if not found or len(found) > MAX_SPANS:
            return text, []
        numbers = [read_number(m.group(), self.source or VERBATIM) for m in found]
        return _replaced(text, found, range(len(found))), numbers

    def protect_pair(self, src: str, tgt: str) -> tuple[str, str]:
        """A training pair with its numbers as placeholders, a target number taking the placeholder
        of the source number of the same value; as it is unless they match one to one."""
        protected, numbers = self.protect_source(src)
        if not numbers:
            return src, tgt
        found = list(self._target_pattern.finditer(tgt))
        if len(found) != len(numbers):
            return src, tgt
        unused = [n.value for n in numbers]
        order = []
        for match in found:
            value = read_number(match.group(), self.target or VERBATIM).value
            if value not in unused:
                return src, tgt
            index = unused.index(value)
            unused[index] = None  # type: ignore[call-overload]
            order.append(index)
        return protected, _replaced(tgt, found, order)

    def protect_sources(self, texts: Sequence[str]) -> tuple[list[str], list[list[Number]]]:
        protected = [self.protect_source(text) for text in texts]
        return [p[0] for p in protected], [p[1] for p in protected]

    def rule(self, numbers: Sequence[Sequence[Number]], strict: bool = False) -> SpanRule:
        """What search may write for sentences with these numbers: their own placeholders, at most
        once each; `strict`, each exactly once and no digit outside them."""
        return SpanRule(self.target_ids, [len(n) for n in numbers], self.digit_ids if strict else frozenset(), strict)

    def protect_pairs(self, src: Sequence[str], tgt: Sequence[str]) -> tuple[list[str], list[str]]:
        pairs = [self.protect_pair(s, t) for s, t in zip(src, tgt)]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def restore(self, text: str, numbers: Sequence[Number]) -> str:
        """Each placeholder of `text` as the source number it stands for, in the target's
        convention; a placeholder with no number (never chosen by search) is dropped. A number the
        output writes right after another number, a letter or a sentence's punctuation is spaced
        from it, so that two never read as one and none as part of a word."""
        return _SPACES.sub(" ", self.target_piece(_GLUED.sub(r"\1 ", text), numbers)).strip(" ")

    def source_piece(self, piece: str, numbers: Sequence[Number]) -> str:
        """A source piece (or text) for display: each placeholder as the number it stands for."""
        return _PLACEHOLDER.sub(lambda m: _nth(numbers, m).text if _nth(numbers, m) else "", piece)

    def target_piece(self, piece: str, numbers: Sequence[Number]) -> str:
        """An output piece (or text): each placeholder as its number in the target's convention."""
        return _PLACEHOLDER.sub(lambda m: _nth(numbers, m).written(self.target) if _nth(numbers, m) else "", piece)


def _nth(numbers: Sequence[Number], match: re.Match[str]) -> Number | None:
    index = int(match.group(1)) - 1
    return numbers[index] if 0 <= index < len(numbers) else None


def _replaced(text: str, found: Sequence[re.Match[str]], indices: Sequence[int]) -> str:
    out, end = [], 0
    for match, index in zip(found, indices):
        out.append(text[end: match.start()])
        out.append(PLACEHOLDERS[index])
        end = match.end()
    out.append(text[end:])
    return "".join(out)


@dataclass(frozen=True)
class SpanRule:
    """What search may write for a batch of sentences with numbers: each sentence's own
    placeholders, at most once each. `ids` maps a placeholder's target id to its index (⦅N1⦆ -> 0).
    Strict (the default with data.protect), a sentence also writes every one of its placeholders
    (`nmt.inference.constraints.number_rules` makes each a term it must write) and no digit of its
    own: the target pieces holding a digit (`digits`) are never written."""
    ids: dict[int, int]
    counts: list[int]  # per sentence of the batch: how many numbers its source holds
    digits: frozenset[int] = frozenset()
    strict: bool = False

    def own(self, sentence: int) -> list[int]:
        """The placeholder ids `sentence` may write, in the source's order."""
        return sorted((t for t, index in self.ids.items() if index < self.counts[sentence]), key=self.ids.__getitem__)
