"""Text as people write it, to the sentence records search takes, and back: the one place an
input is read.

A line may hold a paragraph: it is split into sentences by Moses' rules (the sentence-splitter
package: its non-breaking prefixes know "Mr.", "z. B." and "M. Dupont" in two dozen languages),
each translated on its own, and the translations joined with the source's own spacing, blank
lines included. A sentence longer than decode.max_sentence_words is cut at its clauses (after
, ; : and dashes), or where it has none at a word, and its parts joined again. A source in
capitals or in Title Case is read in sentence case (each word as the training corpus usually
writes it: `CasedWords`) and its translation written back in the source's style. Each sentence
then becomes one `Sentence` record (`SentenceReader.sentences`): its protected spans, ids, rules
and output cap, made once and read by every later door.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from nmt.config import DecodeConfig
from nmt.data.prepared_corpus import CASED_WORDS, SENTENCE_END, WORD_ENDS, read_cased_words
from nmt.data.marks import CLOSING_MARK, END_MARK, END_OR_CLOSING
from nmt.data.protected_numbers import Found, Number, SpanRule, untranslated_spans
from nmt.data.tokenizer import Tokenizer
from nmt.data.vocab import Vocab
from nmt.errors import NmtError
from nmt.inference.decoding.constraints import Pieces, Rules, sentence_rules
from nmt.inference.terms.glossary import Glossary, closes, elided_form, pieces_of, term_spans
from nmt.inference.words import WORD_START, words_of

if TYPE_CHECKING:
    from nmt.inference.decoding.sampling import Sampling

logger = logging.getLogger(__name__)
BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")  # SentencePiece's byte fallback: one byte of a character it has no piece for
# a Glossary, a file's path or terms given as {source: target}; a list: one of those a text
GlossaryLike = Glossary | dict[str, str] | str | list | None


@dataclass(frozen=True)
class Options:
    """What a caller asks of a translation, given once and read where each concern is: `beam`
    (None: decode.beam_size; 1: greedy search), `n` translations a text, best first (the beam is at
    least n), `prefix` each output starts with (one for all, or a list: one a text), `sample` (drawn
    from the model's distribution instead of searched), `glossary` (a Glossary, {source: target} or
    a file; a list: one a text) and `first_line`, the line of the first text, which warnings name."""
    beam: int | None = None
    n: int = 1
    prefix: str | Sequence[str] | None = None
    sample: Sampling | None = None
    glossary: GlossaryLike = None
    first_line: int = 1


# a text holding neither a sentence's end before more text nor a line break is one sentence: most
# inputs never reach the splitter
_MAYBE_SEVERAL = re.compile(fr"{END_MARK}{CLOSING_MARK}*\s+\S|\n")
_CLAUSE_END = re.compile(r"[,;:]$|^[–—-]$")
_CLOSING = re.compile(f"{END_MARK}+")
_CASED = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Segment:
    """One sentence (or clause) of a text, and the text before it: what joins its translation to the last."""
    text: str
    before: str  # whitespace as the source has it ("" for the first, " " or "\n\n" between)
    clause: bool = False  # a part of a sentence cut at its clauses: its translation loses the end of a sentence


@dataclass(frozen=True)
class Segmented:
    segments: list[Segment]  # (the text's own leading and trailing whitespace is not kept, as for one sentence)


def whole(text: str) -> Segmented:
    """A text translated as one sentence (one with a prefix to complete); nothing for a blank one."""
    return Segmented([Segment(text.strip(), "")] if text.strip() else [])


class Segmenter:
    """Texts into sentences for one source language; sentences over `longest` words cut at clauses."""

    def __init__(self, language: str, longest: int):
        self.language, self.longest = language.split("-")[0].lower(), longest

    @cached_property
    def _splitter(self):
        from sentence_splitter import SentenceSplitter, SentenceSplitterException

        try:
            return SentenceSplitter(language=self.language)
        except SentenceSplitterException:
            logger.info("sentence splitting: no rules for '%s'; English's are used", self.language)
            return SentenceSplitter(language="en")

    def split(self, text: str) -> Segmented:
        stripped = text.strip()
        if not stripped:
            return Segmented([])
        sentences = self._splitter.split(stripped) if _MAYBE_SEVERAL.search(stripped) else [stripped]
        segments: list[Segment] = []
        cursor = 0
        for sentence in (s.strip() for s in sentences if s.strip()):
            start = stripped.find(sentence, cursor)  # the splitter keeps each sentence's own characters
            if start < 0:  # (never seen: a sentence the splitter rewrote is translated as it gave it)
                start = cursor
            segments.extend(self.clauses(sentence, _spacing(stripped[cursor:start]) if segments else ""))
            cursor = start + len(sentence)
        return Segmented(segments)

    def clauses(self, sentence: str, before: str, longest: int | None = None) -> Iterator[Segment]:
        """`sentence` whole, or cut into as few parts of at most `longest` words (default: the
        segmenter's) as it takes, of about equal length: each after the clause mark nearest that
        length, else at it."""
        words, longest = sentence.split(), longest or self.longest
        if len(words) <= longest:
            yield Segment(sentence, before)
            return
        start = 0
        while len(words) - start > longest:
            left = len(words) - start
            size = -(-left // -(-left // longest))  # parts of equal length: ceil(left / ceil(left / longest))
            marks = [i for i in range(start + max(1, size // 3), start + longest) if _CLAUSE_END.search(words[i])]
            cut = min(marks, key=lambda i: abs(i + 1 - start - size)) if marks else start + size - 1
            yield Segment(" ".join(words[start: cut + 1]), before, clause=True)
            before, start = " ", cut + 1
        yield Segment(" ".join(words[start:]), before)


def _spacing(gap: str) -> str:
    """The whitespace between two sentences as written: its line breaks (a blank line kept), else
    its spaces and tabs, else (another separator, or none) one space."""
    if "\n" in gap:
        return "\n" * gap.count("\n")
    return gap if gap and not gap.strip(" \t") else " "


def joined_text(segmented: Segmented, outputs: Sequence[str]) -> str:
    """The translations of a text's segments, each after its segment's spacing."""
    return "".join(s.before + out for s, out in zip(segmented.segments, outputs))


def clause_end(source: str) -> str:
    """What a translated part of a sentence ends with: the mark its source part ends with (, ; :), or nothing."""
    return source[-1] if _CLAUSE_END.search(source) and len(source) > 1 else ""


def closes_sentence(piece: str) -> bool:
    """A token that ends a sentence (. ! ? …), which a translated part of one does not keep."""
    return bool(_CLOSING.fullmatch(piece.lstrip("▁ ")))


def starts_small(source: str) -> bool:
    """A part of a sentence that starts with a small letter: its translation does too."""
    letter = _first_letter(source)
    return bool(letter) and letter.islower()


def small_first(text: str) -> str:
    match = _CASED.search(text)
    return text[: match.start()] + match.group().lower() + text[match.end():] if match else text


LONGEST = 60  # words: a sentence's parts where neither the config nor a run's training length says


def sentence_words(max_len: int | str) -> int:
    """decode.max_sentence_words as long as a run's training pairs: data.max_len pieces x 3/4 words."""
    return max(8, (int(max_len) * 3 + 3) // 4) if isinstance(max_len, int) or str(max_len).isdigit() else LONGEST


# Case styles of a source: sentence case (as written), all capitals, Title Case
SENTENCE, UPPER, TITLE = "sentence", "upper", "title"


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


def restyled(text: str, style: str) -> str:
    """A translation written in its source's case style."""
    if style == UPPER:
        return text.upper()
    if style == TITLE:
        return " ".join(_capitalized(word) for word in text.split(" "))
    return text


def _capitalized(word: str) -> str:
    match = _CASED.search(word)
    return word[: match.start()] + match.group().upper() + word[match.end():] if match else word


@dataclass(frozen=True)
class Sentence:
    """One input as search takes it: made once from its text and the caller's options
    (`SentenceReader.sentences`), then chunked, batched and decoded as one record."""
    line: int  # its line in the whole input, which warnings name
    ids: list[int]  # the source ids the model reads, <eos> last, cut to decode.max_input_len ([] for an empty text)
    numbers: list[Number]  # data.protect: the spans its placeholders stand for, restored in the output
    rules: Rules  # its prefix, glossary terms and number placeholders (nmt.inference.decoding.constraints)
    cap: int  # the most tokens its output may hold, <eos> excluded
    text: str = ""  # the sentence as the model read it (numbers and spans still as written)
    style: str = SENTENCE  # its source's case style, which its output is written in


def output_cap(src_len: int, rules: Rules, cfg: DecodeConfig, line: int) -> int:
    """The most tokens an output may hold (<eos> excluded): decode.max_output_ratio times the
    source's length (<eos> counted) plus decode.max_output_extra; with a prefix, room for it and as
    much again after it; never less than the rules need (glossary terms past it: one warning)."""
    cap = int(src_len * cfg.max_output_ratio) + cfg.max_output_extra
    if rules.prefix:
        cap = max(cap, len(rules.prefix) + cfg.max_output_extra)
    if rules.least_length > cap:
        if rules.terms:
            logger.warning("line %d: its glossary terms need %d tokens, past the length cap of %d: the cap is "
                           "raised", line, rules.least_length, cap)
        cap = rules.least_length
    return cap


def one_per_text(given: object, count: int, what: str = "prefixes", texts: str = "sentences") -> list:
    """`given` for each of `count` texts: a list (or tuple) gives one a text; anything else (one
    prefix, one glossary, None) is every text's."""
    values = list(given) if isinstance(given, (list, tuple)) else [given] * count
    if len(values) != count:
        raise NmtError(f"{len(values)} {what} for {count} {texts}: give one for all, or one per text")
    return values


@dataclass(frozen=True)
class FoundTerm:
    """A glossary term found in a text: its source words as the text writes them, and the target
    term as ids, tokenized as the target is, as a word and glued after an elision (empty: never so)."""
    source: str
    ids: list[int]
    elided: list[int]


def glossary_terms(tokenizer: Tokenizer, vocab: Vocab, glossaries: Sequence[Glossary | None], texts: Sequence[str],
                   lines: Sequence[int]) -> list[list[FoundTerm]]:
    """Each text's glossary terms. A term with a piece the model cannot write is one warning,
    naming the line, and is not asked for."""
    out = []
    for line, text, terms_of in zip(lines, texts, glossaries):
        found = terms_of.matches(text) if terms_of is not None else []
        kept = []
        targets = [term for _, term in found]
        for (source, term), tokens in zip(found, tokenizer.target_tokens(targets) if found else []):
            ids = vocab.encode(tokens)
            if not ids or vocab.unk_id in ids or any(BYTE_PIECE.fullmatch(t) for t in tokens):
                # (byte pieces: characters the model never learned to write, forced byte by byte)
                logger.warning("line %d: glossary term '%s' holds a character the target vocabulary cannot write "
                               "as a piece; it is not enforced", line, term)
                continue
            elided = vocab.encode(elided_form(term, tokenizer.target_tokens, tokenizer.target_lang)
                                  if tokenizer.kind == "subword" else [])
            kept.append(FoundTerm(source, ids, [] if vocab.unk_id in elided else elided))
        out.append(kept)
    return out


def rule(tokenizer: Tokenizer, numbers: Sequence[list[Number]], strict: bool) -> SpanRule | None:
    """data.protect: which number placeholders each sentence may write (its own, at most once each;
    `strict`, exactly once each and no digit of its own)."""
    return tokenizer.protector.rule(numbers, strict) if tokenizer.protector else None


def source_ids(tokens: list[str], vocab: Vocab, limit: int, line_no: int | None = None) -> list[int]:
    """A source's ids and <eos>, cut to `limit` tokens (with a warning naming the line)."""
    if len(tokens) > limit:
        where = f"line {line_no}" if line_no is not None else "input"
        logger.warning("%s has %d tokens; truncated to decode.max_input_len=%d", where, len(tokens), limit)
        tokens = tokens[:limit]
    return vocab.encode(tokens) + [vocab.eos_id]


@dataclass(frozen=True)
class ReadText:
    """A text as it entered: its sentences (read in sentence case where it was in capitals or Title
    Case: `style`), its line and its options; the one place a text is split, case-read and its
    glossary read."""
    segmented: Segmented
    style: str
    line: int
    prefix: str | None
    glossary: Glossary | None


_TRAILING_MARK = re.compile(f"{END_OR_CLOSING}+")


def span_places(pieces: Sequence[str], numbers: Sequence[Number], pairs: Sequence[tuple[int, int]]
                ) -> list[tuple[int, int]]:
    """Where each span taken out of a sentence's source (`Number.at`) goes in its output `pieces`,
    as (piece index, the span's index in `numbers`), read off the alignment `pairs` (source word,
    output word; `words.source_alignment`): before the output word its source's next word went
    to, else after its previous word's; a span at the source's end at the output's, before its
    closing marks where the source had it before its own."""
    groups = [group for _, group in words_of(pieces)]
    aligned = {source: groups[output] for source, output in pairs if output < len(groups)}
    end = len(pieces)
    while end and _TRAILING_MARK.fullmatch(pieces[end - 1].lstrip("▁")):
        end -= 1
    places = []
    for index, span in enumerate(numbers):
        if not span.kept:
            continue
        if span.tail is not None:
            place = end if span.tail else len(pieces)
        elif span.at == 0:
            place = 0
        elif span.at in aligned:
            place = aligned[span.at][0]
            while place and pieces[place - 1] == WORD_START:  # before its word's lone "▁", not inside the word
                place -= 1
        elif span.at - 1 in aligned:
            place = aligned[span.at - 1][-1] + 1
        else:
            place = end
        places.append((place, index))
    return places


def protected_sources(tokenizer: Tokenizer, texts: Sequence[str]) -> tuple[list[str], list[list[Number]]]:
    """The texts the model reads (data.protect: numbers as placeholders) and each one's numbers."""
    if tokenizer.protector is None:
        return list(texts), [[] for _ in texts]
    return tokenizer.protector.protect_sources(texts)


class SentenceReader:
    """How one model's input becomes sentence records: its tokenizer, vocabularies, decoding
    config and its corpus's capitalized words."""

    def __init__(self, tokenizer: Tokenizer, src_vocab: Vocab, tgt_vocab: Vocab, cfg: DecodeConfig,
                 cased: CasedWords):
        self.tokenizer, self.src_vocab, self.tgt_vocab, self.cfg = tokenizer, src_vocab, tgt_vocab, cfg
        self.cased = cased

    @cached_property
    def segmenter(self) -> Segmenter:
        return Segmenter(self.tokenizer.source_lang, self.cfg.max_sentence_words or LONGEST)

    @cached_property
    def pieces(self) -> Pieces:
        """The target tokens the glossary's rules name: those that continue a word, those that close a sentence."""
        return pieces_of(self.tgt_vocab.itos, self.tokenizer.kind == "subword")


    def read(self, texts: Sequence[str], options: Options) -> list[ReadText]:
        """Each text split into its sentences (one with a prefix to complete: whole), read in
        sentence case where it is in capitals, with its line, prefix and glossary (a file read once,
        not once a text)."""
        given = options.glossary
        glossary = [Glossary.of(g) for g in given] if isinstance(given, list) else Glossary.of(given)
        prefixes = one_per_text(options.prefix, len(texts))
        glossaries = one_per_text(glossary, len(texts), "glossaries")
        out = []
        for i, text in enumerate(texts):
            spans = untranslated_spans(text)  # (found once: the case rule reads around them)
            style = case_style(text, spans)
            if style != SENTENCE:
                text = self.cased.sentence_case(text, spans)
            segmented = self.within_tokens(self.segmenter.split(text)) if prefixes[i] is None else whole(text)
            out.append(ReadText(segmented, style, options.first_line + i, prefixes[i], glossaries[i]))
        return out

    def records(self, read: Sequence[ReadText]) -> list[Sentence]:
        """The sentence record of every segment of the `read` texts, in order, each with its
        text's line, prefix, glossary and case style."""
        each = [(text, segment) for text in read for segment in text.segmented.segments]
        return self.sentences([s.text for _, s in each], [t.line for t, _ in each], [t.prefix for t, _ in each],
                              [t.glossary for t, _ in each], [t.style for t, _ in each])

    def within_tokens(self, segmented: Segmented) -> Segmented:
        """Each segment of more than decode.max_input_len tokens (words of many pieces) cut again,
        into parts of as many words as fit: a sentence is translated in parts rather than cut."""
        limit, out = self.cfg.max_input_len, []
        for segment in segmented.segments:
            if len(segment.text) >= limit and (tokens := len(self.tokenizer.source_tokens([segment.text])[0])) >= limit:
                words = max(1, len(segment.text.split()) * (limit - 1) * 9 // (10 * tokens))  # (a margin: words differ)
                parts = list(self.segmenter.clauses(segment.text, segment.before, words))
                if segment.clause:  # (a clause cut again: its last part still ends a clause)
                    parts[-1] = Segment(parts[-1].text, parts[-1].before, clause=True)
                out.extend(parts)
            else:
                out.append(segment)
        return Segmented(out)

    def sentences(self, texts: Sequence[str], lines: Sequence[int] | None = None,
                  prefixes: Sequence[str | None] | None = None, glossaries: Sequence[Glossary | None] | None = None,
                  styles: Sequence[str] | None = None) -> list[Sentence]:
        """Each sentence as the record search takes: its source ids, spans, rules and cap; each
        text's line (default: 1, 2, ...), prefix, glossary and case style where it was read in
        sentence case (`read`), or none."""
        sources, numbers = protected_sources(self.tokenizer, texts)
        lines = list(lines) if lines is not None else range(1, len(texts) + 1)
        prefixes = prefixes or [None] * len(texts)
        glossaries = glossaries or [None] * len(texts)
        prefix_tokens = iter(self.tokenizer.target_tokens([p for p in prefixes if p is not None]))
        terms = glossary_terms(self.tokenizer, self.tgt_vocab, glossaries, texts, lines)
        spans = rule(self.tokenizer, numbers, self.cfg.strict_numbers)
        out = []
        for i, (line, tokens) in enumerate(zip(lines, self.tokenizer.source_tokens(sources))):
            ids = source_ids(tokens, self.src_vocab, self.cfg.max_input_len, line) if tokens else []
            # each term's source words: where search places it
            places = term_spans(tokens[:len(ids) - 1], [term.source for term in terms[i]],
                                self.tokenizer.kind == "subword") if ids and terms[i] else []
            prefix_ids = self.tgt_vocab.encode(next(prefix_tokens)) if prefixes[i] is not None else ()
            rules = sentence_rules(spans, i, prefix_ids, [term.ids for term in terms[i]], self.pieces,
                                   closes(texts[i]), [range(p[0], p[1] + 1) if p else () for p in places],
                                   [term.elided for term in terms[i]], self.cfg.glossary_length_penalty)
            out.append(Sentence(line, ids, numbers[i], rules, output_cap(len(ids), rules, self.cfg, line), texts[i],
                                styles[i] if styles else SENTENCE))
        return out
