"""Protected spans (data.protect): numbers, links and the like, which the model moves but never rewrites.

A network writes the digit pieces it has seen, not the ones it was given ("12 years" comes out
"21 ans"). So, as OpenNMT's Tokenizer (its ⦅...⦆ placeholders) and Marian pipelines (@NUM@) do,
numbers never reach it: each digit run of the source, with its inner separators (3.5, 1,000,
7:45, 2021-08-07), becomes a numbered placeholder ⦅N1⦆, ⦅N2⦆, ... (one SentencePiece piece each,
the same on both sides) before tokenization, and the translator puts the source's number back in
its place after every search, written as the target language writes it where that is
unambiguous (English 3.5, 30,000, 7:45 are French 3,5, 30 000, 7h45 and German 3,5, 30.000, 7:45:
each language's marks are CLDR's, through Babel). In the training data a
target number takes the placeholder of the source number of the same value; a pair whose numbers
do not match one to one (12 translated as "douze") keeps its text, so number words are still learnt.

What must pass untranslated takes the same placeholders, one rule set for both: inline code,
links, e-mail addresses, file paths, @handles, #tags, emoji, and in a source to translate any word
holding a character that the source vocabulary lacks (another script: "東京"), each kept byte for byte
(`verbatim`, found before the numbers, so a link's digits stay in the link). A number written
with spaces between its thousands ("30 000") is one number.

Search lets each output use a placeholder of its source at most once (`SpanRule`), so no number
that is not in the source is ever printed from a placeholder; strict (decode.strict_numbers), it
also writes each of them exactly once and no digit of its own.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import regex

from nmt.data.marks import END_OR_CLOSING

MAX_SPANS = 9  # placeholders ⦅N1⦆ ... ⦅N9⦆; a sentence with more spans keeps its numbers as text
PLACEHOLDERS = tuple(f"⦅N{i}⦆" for i in range(1, MAX_SPANS + 1))
_PLACEHOLDER = re.compile(r"⦅N(\d+)⦆")
_SPACES = re.compile(r" {2,}")
_PLACEHOLDER_THEN_WORD = re.compile(r"⦅N(\d+)⦆(?=\w)")
# a placeholder written right after another, a letter or a sentence's punctuation: a space goes between
_GLUED = re.compile(r"(⦅N\d+⦆|[^\W\d_]|[.,;:!?])(?=⦅N\d+⦆)")
_EMOJI = r"(?:\p{Extended_Pictographic}|\p{Regional_Indicator})(?:[\uFE0F\u200D\u20E3\p{Emoji_Modifier}]" \
         r"|\p{Extended_Pictographic}|\p{Regional_Indicator})*"
_UNTRANSLATED = regex.compile(r"""
      `[^`\n]+`                                      # inline code
    | (?i:https?://|ftp://|www\.)[^\s<>"'`]+         # a link (its closing punctuation given back below)
    | [\w.+-]+@[\w-]+(?:\.[\w-]+)+                    # an e-mail address
    | (?<![\w/~.])(?:~|\.{1,2})/[\w.~-]+(?:/[\w.~-]*)*  # a path from home or here (~/notes.txt, ./run.sh)
    | (?<![\w/])/[\w.~-]+(?:/[\w.~-]*)+             # an absolute path (/usr/bin)
    | (?<!\w)[A-Za-z]:\\\S+                          # a Windows path
    | (?<![\w/])[\w.-]+/[\w./-]*\.[A-Za-z]\w*         # a relative path to a file
    | (?<![\w@./-])(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,63})(?![\w@-])
      (?:/[^\s<>"'`]*)?                             # a domain without a scheme (its suffix a public one)
    | (?<![\w@])@\w+                                 # a handle
    | (?<![\w#&])\#\w*[^\W\d]\w*                     # a tag (a letter in it: #1 is a number)
    | """ + _EMOJI, regex.VERBOSE)
_LINK_END = regex.compile(r"[.,;:!?'\"]+$")
_TAKEN_OUT = "\x00"  # where a kept span was, while its place is read
_GAP = re.compile(r"[ \t]*\x00(?:[ \t]*\x00)*[ \t]*")
_ONLY_CLOSING = re.compile(fr"\s*{END_OR_CLOSING}*\s*")
_DIGIT = re.compile(r"\d")  # every number pattern begins with one
# most sentences hold none of these (a letter after a dot: a domain's): skip the search
_MAYBE_UNTRANSLATED = regex.compile(r"[`/@#:\\~]|[^\x00-\x7f]|\w\.[A-Za-z]")


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
        separators only before three digits, its time mark with optional spaces around); any
        language's thousands set apart by spaces after a lead of one to three digits (30 000)."""
        group = f"[{re.escape(self.reads_group)}](?=\\d{{3}}(?!\\d))" if self.reads_group else "(?!)"
        time = f"\\s?[{re.escape(self.reads_time)}]\\s?(?=\\d{{2}}(?!\\d))" if self.reads_time else "(?!)"
        spaced = "(?<!\\d)\\d{1,3}(?:[ \\u00a0\\u202f]\\d{3}(?!\\d))+"
        return re.compile(f"{spaced}(?:[.,]\\d+(?![.,]?\\d))?|\\d+(?:(?:{group}|{time}|[.,:/-])\\d+)*")


# Where a corpus writes numbers otherwise than CLDR: fra-eng's French (counted over its sentences)
# writes 7h45 more often than 7:45 and sets thousands apart by a plain space, not CLDR's narrow
# no-break one; a dot between thousands is read too.
CORPUS_CONVENTIONS = {
    "fr": Convention(decimal=",", group=" ", time="h", reads_decimal=",", reads_group=" \u00a0\u202f.",
                     reads_time=":h"),
}
# A language CLDR does not know reads digit runs joined by . , : / - and writes them verbatim.
VERBATIM = Convention(decimal="", group="", time="", reads_decimal="", reads_group="", reads_time="")
_HOURS_THEN_MINUTES = re.compile(r"[Hhk]+(.*?)m+")  # in a CLDR time pattern: what stands between them


@dataclass(frozen=True)
class Number:
    """A number as written, cut into digit runs and the marks between them, each mark read as
    "G" (thousands), "D" (decimal), "T" (time) or kept as it is."""
    text: str
    parts: tuple[str, ...]  # digits, mark, digits, ...
    marks: tuple[str, ...]  # per mark: G, D, T or the mark itself
    kept: bool = False  # not a number: a span that passes untranslated (`untranslated`)
    # a kept span taken out of a source to translate: the words before it in the text the model
    # reads, and, where only closing marks follow it, those marks ("" for none; None: more follows)
    at: int = 0
    tail: str | None = None

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
        elif (mark in convention.reads_group or mark in _SPACES_IN_NUMBERS) and len(after) == 3 \
                and mark not in convention.reads_decimal:
            marks.append("G")
        elif mark in convention.reads_decimal:
            marks.append("D")
        else:
            marks.append(mark)
    if sum(m in "DT" for m in marks) > 1 or ("G" in marks and "T" in marks):  # 1.2.3, 10:30:15: not one value
        marks = list(parts[1::2])
    return Number(text, parts, tuple(marks))


_SPACES_IN_NUMBERS = (" ", "\u00a0", "\u202f")


def untranslated(text: str) -> Number:
    """A span kept byte for byte: its text is its value and its written form in any language."""
    return Number(text, (text,), (), kept=True)


@dataclass(frozen=True)
class Found:
    """A protected span of a text: where it is, and what it is."""
    start: int
    end: int
    span: Number


def untranslated_spans(text: str, known: frozenset[str] | None = None) -> list[Found]:
    """What `text` holds that passes untranslated (code, links, addresses, paths, handles, tags,
    emoji), in order; with `known` (the characters the vocabularies hold), also each run of words
    holding a character outside it."""
    if not _MAYBE_UNTRANSLATED.search(text):
        return []
    found = []
    for match in _UNTRANSLATED.finditer(text):
        value = match.group()
        if match.group("domain") and not _public_suffix(match.group("domain")):
            continue  # e.g., U.S., Mr.Smith, a file's name: no public suffix, no domain
        if value[0] != "`" and ("/" in value or value.lower().startswith("www.") or match.group("domain")):
            # a link, a domain or a path: its sentence's closing marks are not part of it (nor an
            # unopened bracket's)
            value = _LINK_END.sub("", value)
            if value.endswith(")") and value.count("(") < value.count(")"):
                value = value[:-1]
        found.append(Found(match.start(), match.start() + len(value), untranslated(value)))
    if known is not None and not text.isascii():
        found = sorted(found + _unknown_words(text, known, found), key=lambda f: f.start)
    return found


def _public_suffix(host: str) -> bool:
    """Whether `host` is a name under a public suffix of the Public Suffix List (example.net,
    bbc.co.uk; not e.g, U.S or Mr.Smith), read from the list the publicsuffixlist package ships."""
    return _suffix_list().privatesuffix(host.lower(), accept_unknown=False) is not None


@functools.lru_cache(maxsize=1)
def _suffix_list():
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


def _unknown_words(text: str, known: frozenset[str], taken: Sequence[Found]) -> list[Found]:
    """Runs of words (punctuation at their ends aside) holding a character that `known` lacks,
    outside the spans already `taken` (a digit is a number's, not another script's)."""
    runs: list[list[int]] = []
    for match in regex.finditer(r"\S+", text):
        start, end = match.span()
        while start < end and text[start] in known and not text[start].isalnum():
            start += 1
        while end > start and text[end - 1] in known and not text[end - 1].isalnum():
            end -= 1
        if start == end or all(c in known or c.isdigit() for c in text[start:end]) \
                or any(t.start < end and start < t.end for t in taken):
            continue
        if runs and text[runs[-1][1]:start].isspace() and text[runs[-1][1]:start] == " ":
            runs[-1][1] = end  # "東京 タワー": one span
        else:
            runs.append([start, end])
    return [Found(start, end, untranslated(text[start:end])) for start, end in runs]


def spans_of(text: str, pattern: re.Pattern[str], convention: Convention, known: frozenset[str] | None = None
             ) -> list[Found]:
    """Every protected span of `text` in order: what passes untranslated, then the numbers
    (`pattern`, read in `convention`) outside those."""
    kept = untranslated_spans(text, known)
    if not _DIGIT.search(text):  # (most sentences: no number, and the pattern is slow to say so)
        return kept
    numbers = [Found(m.start(), m.end(), read_number(m.group(), convention)) for m in pattern.finditer(text)
               if not any(k.start < m.end() and m.start() < k.end for k in kept)]
    return sorted(kept + numbers, key=lambda f: f.start) if kept else numbers


@functools.lru_cache(maxsize=None)
def convention(lang: str) -> Convention | None:
    """How `lang` writes numbers: CLDR's decimal and group marks and the mark of its short time
    form (English 3.5, 30,000, 7:45; German 3,5, 30.000, 7:45), where a corpus of ours writes them
    otherwise its own (`CORPUS_CONVENTIONS`); None for a language CLDR does not know."""
    from babel import Locale, UnknownLocaleError, numbers

    code = lang.split("-")[0].lower()
    if code in CORPUS_CONVENTIONS:
        return CORPUS_CONVENTIONS[code]
    try:
        locale = Locale.parse(code)
    except (UnknownLocaleError, ValueError):
        return None
    decimal, group = numbers.get_decimal_symbol(locale), numbers.get_group_symbol(locale)
    between = _HOURS_THEN_MINUTES.search(locale.time_formats["short"].pattern)
    time = between.group(1).replace("'", "") if between else ":"
    return Convention(decimal, group, time, decimal, group, time.strip() or time)


class SpanProtector:
    """Protected spans to placeholders and back, for one translation direction; `target_ids` maps
    the placeholders' ids in the target vocabulary to their index (⦅N1⦆ -> 0), for search; `known`,
    the characters the source vocabulary holds (a source word with another is copied, not translated)."""

    def __init__(self, source_lang: str, target_lang: str, target_ids: dict[int, int] | None = None,
                 digit_ids: frozenset[int] = frozenset(), known: frozenset[str] | None = None):
        self.source, self.target = convention(source_lang), convention(target_lang)
        self.target_ids = target_ids or {}
        self.digit_ids = digit_ids  # target pieces holding a digit, placeholders aside
        self.known = known
        self._source_pattern = (self.source or VERBATIM).pattern()
        self._target_pattern = (self.target or VERBATIM).pattern()

    def numbers(self, text: str) -> list[Number]:
        """The protected spans of a source `text`, in order."""
        return [f.span for f in self._source_spans(text, self.known)]

    def spans(self, text: str) -> list[Found]:
        """Every protected span of a source `text`, however many: what a sentence is cut by where it
        holds more than MAX_SPANS (nmt.inference.text.sentences)."""
        return spans_of(text, self._source_pattern, self.source or VERBATIM, self.known)

    def _source_spans(self, text: str, known: frozenset[str] | None) -> list[Found]:
        """The spans a source's placeholders stand for: all of them, or where there are more than
        MAX_SPANS, those that pass untranslated (the first MAX_SPANS) and no number (as in training)."""
        found = spans_of(text, self._source_pattern, self.source or VERBATIM, known)
        if len(found) > MAX_SPANS:
            found = [f for f in found if f.span.kept][:MAX_SPANS]
        return found

    def protect_source(self, text: str) -> tuple[str, list[Number]]:
        """`text` as the model reads it, and its protected spans (`_source_spans`): each number as a
        placeholder ⦅N1⦆, ⦅N2⦆, ...; what passes untranslated taken out, so that the model reads the
        rest as the sentences it was trained on, and listed after the numbers with its place
        (`Number.at`, `Number.tail`), where the translator puts its placeholder back by the
        alignment (a span kept as a placeholder cost the rest of its sentence 5.5 BLEU at its end
        and 12.8 inside it: docs/results.md)."""
        found = self._source_spans(text, self.known)
        if not found:
            return text, []
        numbers = [f for f in found if not f.span.kept]
        marked = _replaced(text, found, [numbers.index(f) if not f.span.kept else -1 for f in found])
        kept, cursor = [], 0
        for f in found:
            if f.span.kept:
                cursor = marked.index(_TAKEN_OUT, cursor)
                before, after = marked[:cursor].replace(_TAKEN_OUT, ""), marked[cursor + 1:].replace(_TAKEN_OUT, "")
                closing = _ONLY_CLOSING.fullmatch(after)
                kept.append(dataclasses.replace(f.span, at=len(before.split()),
                                                tail=closing.group().strip() if closing else None))
                cursor += 1
        return _taken_out(marked), [f.span for f in numbers] + kept

    def protect_pair(self, src: str, tgt: str) -> tuple[str, str]:
        """A training pair with its spans as placeholders, a target span taking the placeholder of
        the source span of the same value; as it is unless they match one to one."""
        found_src = self._source_spans(src, None)
        if not found_src:
            return src, tgt
        numbers = [f.span for f in found_src]
        protected = _replaced(src, found_src, range(len(found_src)))
        found = spans_of(tgt, self._target_pattern, self.target or VERBATIM)
        if len(found) != len(numbers):
            return src, tgt
        unused = [n.value for n in numbers]
        order = []
        for match in found:
            value = match.span.value
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
        counts = [sum(not n.kept for n in each) for each in numbers]  # (kept spans are put back after search)
        return SpanRule(self.target_ids, counts, self.digit_ids if strict else frozenset(), strict)

    def protect_pairs(self, src: Sequence[str], tgt: Sequence[str]) -> tuple[list[str], list[str]]:
        pairs = [self.protect_pair(s, t) for s, t in zip(src, tgt)]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def restore(self, text: str, numbers: Sequence[Number]) -> str:
        """Each placeholder of `text` as the source number it stands for, in the target's
        convention; a placeholder with no number (never chosen by search) is dropped. A number the
        output writes right after another number, a letter or a sentence's punctuation is spaced
        from it, so that two never read as one and none as part of a word; so is a word written
        right after a span kept as it is (a link, an emoji: no suffix of a word joins it)."""
        text = _GLUED.sub(r"\1 ", text)
        text = _PLACEHOLDER_THEN_WORD.sub(lambda m: m.group() + " " if _kept(numbers, m) else m.group(), text)
        return _SPACES.sub(" ", self.target_piece(text, numbers)).strip(" ")

    def source_piece(self, piece: str, numbers: Sequence[Number]) -> str:
        """A source piece (or text) for display: each placeholder as the number it stands for."""
        return _PLACEHOLDER.sub(lambda m: _nth(numbers, m).text if _nth(numbers, m) else "", piece)

    def target_piece(self, piece: str, numbers: Sequence[Number]) -> str:
        """An output piece (or text): each placeholder as its number in the target's convention."""
        return _PLACEHOLDER.sub(lambda m: _nth(numbers, m).written(self.target) if _nth(numbers, m) else "", piece)


def _taken_out(marked: str) -> str:
    """A text with its `_TAKEN_OUT` marks gone, and the spacing around each as it reads without the
    span: one space between words, none before punctuation or at either end."""
    def joined(match: re.Match[str]) -> str:
        left = marked[match.start() - 1] if match.start() else ""
        right = marked[match.end()] if match.end() < len(marked) else ""
        if not left or not right:
            return ""
        spaced = match.group()[0].isspace(), match.group()[-1].isspace()
        if all(spaced) or (left.isalnum() and right.isalnum()):
            return " "
        return " " if any(spaced) and (left if spaced[1] else right).isalnum() else ""
    return _GAP.sub(joined, marked).strip()


def _kept(numbers: Sequence[Number], match: re.Match[str]) -> bool:
    span = _nth(numbers, match)
    return span is not None and span.kept


def _nth(numbers: Sequence[Number], match: re.Match[str]) -> Number | None:
    index = int(match.group(1)) - 1
    return numbers[index] if 0 <= index < len(numbers) else None


def _replaced(text: str, found: Sequence[Found], indices: Sequence[int]) -> str:
    """`text` with each found span as the placeholder of its index (-1: `_TAKEN_OUT`)."""
    out, end = [], 0
    for match, index in zip(found, indices):
        out.append(text[end: match.start])
        out.append(PLACEHOLDERS[index] if index >= 0 else _TAKEN_OUT)
        end = match.end
    out.append(text[end:])
    return "".join(out)


@dataclass(frozen=True)
class SpanRule:
    """What search may write for a batch of sentences with numbers: each sentence's own
    placeholders, at most once each. `ids` maps a placeholder's target id to its index (⦅N1⦆ -> 0).
    Strict (the default with data.protect), a sentence also writes every one of its placeholders
    (`nmt.inference.text.terms.sentence_rules` makes each a term it must write) and no digit of its
    own: the target pieces holding a digit (`digits`) are never written."""
    ids: dict[int, int]
    counts: list[int]  # per sentence of the batch: how many numbers its source holds
    digits: frozenset[int] = frozenset()
    strict: bool = False

    def own(self, sentence: int) -> list[int]:
        """The placeholder ids `sentence` may write, in the source's order."""
        return sorted((t for t, index in self.ids.items() if index < self.counts[sentence]), key=self.ids.__getitem__)
