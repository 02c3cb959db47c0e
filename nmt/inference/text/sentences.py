"""The sentences stage. A line may hold a paragraph: it is split into sentences by Moses' rules
(the sentence-splitter package: its non-breaking prefixes know "Mr.", "z. B." and "M. Dupont" in two
dozen languages), each translated on its own, and the translations joined with the source's own
spacing, blank lines included (`write`). A sentence longer than decode.max_sentence_words is
cut at its clauses (after , ; : and dashes), or where it has none at a word, and its parts joined
again: a part of a sentence ends with its source part's mark, not a sentence's."""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterator, Sequence
from functools import cached_property, partial

import torch

from nmt.data.marks import CLOSING_MARK, END_MARK
from nmt.data.protected_numbers import MAX_SPANS, Found
from nmt.data.tokenizer import Tokenizer, legacy_form
from nmt.inference.text.case import small_first, starts_small
from nmt.inference.text.records import Attention, ReadText, Segment, Segmented, Translation, WordSplit, best_of

logger = logging.getLogger(__name__)
# a text holding neither a sentence's end before more text nor a line break is one sentence: most
# inputs never reach the splitter
_MAYBE_SEVERAL = re.compile(fr"{END_MARK}{CLOSING_MARK}*\s+\S|\n")
_CLAUSE_END = re.compile(r"[,;:]$|^[–—-]$")
_CLOSING = re.compile(f"{END_MARK}+")
_WORD = re.compile(r"\S+")
# every protected span holds one of these (a number its digits, a link its dot or colon, an address its
# @, an emoji or another script a character past ASCII), and no two spans the same one: a sentence
# with no more of them than placeholders needs no count of its spans
_SPAN_MARK = re.compile(r"\d+|[`/@#:\\~.]|[^\x00-\x7f]")


def read(text: str, segmenter: Segmenter, tokenizer: Tokenizer, limit: int) -> Segmented:
    """A text's sentences, each cut where it is longer than the segmenter's words or, in tokens
    (words of many pieces), than `limit` (decode.max_input_len), and where it holds more numbers,
    links and the like than there are placeholders (MAX_SPANS): a sentence is translated in parts
    rather than cut, and every span it holds comes back."""
    out = []
    for segment in segmenter.split(text).segments:
        if len(segment.text) >= limit and (tokens := len(tokenizer.source_tokens([segment.text])[0])) >= limit:
            words = max(1, len(segment.text.split()) * (limit - 1) * 9 // (10 * tokens))  # (a margin: words differ)
            parts = list(segmenter.clauses(segment.text, segment.before, words))
            if segment.clause:  # (a clause cut again: its last part still ends a clause)
                parts[-1] = Segment(parts[-1].text, parts[-1].before, clause=True)
        else:
            parts = [segment]
        if tokenizer.protector is not None:
            parts = [cut for part in parts
                     for cut in (within_spans(part, tokenizer.protector.spans(part.text))
                                 if len(_SPAN_MARK.findall(part.text)) > MAX_SPANS else [part])]
        out.extend(parts)
    return Segmented(out)


def within_spans(segment: Segment, found: Sequence[Found], most: int = MAX_SPANS) -> list[Segment]:
    """`segment` whole, or cut between words into parts of at most `most` protected spans each (a
    placeholder for every number and link of each part), as late as it can, never inside a span."""
    if len(found) <= most:
        return [segment]
    words = list(_WORD.finditer(segment.text))
    starting = [sum(word.start() <= f.start < word.end() for f in found) for word in words]
    joined = {i for i, word in enumerate(words) if any(f.start < word.start() < f.end for f in found)}
    cuts, first, held = [], 0, 0
    for i, spans in enumerate(starting):
        held += spans
        if held > most and (allowed := [c for c in range(first + 1, i + 1) if c not in joined]):
            cuts.append(allowed[-1])
            first, held = allowed[-1], sum(starting[allowed[-1]: i + 1])
    bounds = list(zip([0, *cuts], [*cuts, len(words)]))
    return [Segment(" ".join(word.group() for word in words[a:b]), segment.before if k == 0 else " ",
                    clause=segment.clause if k == len(bounds) - 1 else True)
            for k, (a, b) in enumerate(bounds)]


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


LONGEST = 60  # words: a sentence's parts where neither the config nor a run's training length says


def sentence_words(max_len: int | str) -> int:
    """decode.max_sentence_words as long as a run's training pairs: data.max_len pieces x 3/4 words."""
    return max(8, (int(max_len) * 3 + 3) // 4) if isinstance(max_len, int) or str(max_len).isdigit() else LONGEST


def write(read: Sequence[ReadText], found: Sequence[list[Translation]]) -> list[list[Translation]]:
    """Each text's n-best list from its sentences' (the k-th of a text of several sentences joins
    each one's k-th, or its last where it has fewer)."""
    out, at = [], 0
    for text in read:
        segments = text.segmented.segments
        parts, at = found[at: at + len(segments)], at + len(segments)
        if not parts or len(parts) == 1 and not segments[0].clause:
            out.append(parts[0] if parts else [])
            continue
        parts = [hyps or [best_of(hyps)] for hyps in parts]
        out.append([joined(text.segmented, [p[min(k, len(p) - 1)] for p in parts])
                    for k in range(max(map(len, parts)))])
    return out


def joined(segmented: Segmented, parts: Sequence[Translation]) -> Translation:
    """One text's translation from its sentences' (and clauses': a part of a sentence ends with its
    source part's mark, not a sentence's, and starts as small as its source part)."""
    edited = [clause_part(part, segment, i > 0 and segmented.segments[i - 1].clause)
              for i, (part, segment) in enumerate(zip(parts, segmented.segments))]
    tokens = [t for part in edited for t in part.tokens]
    scores = [s for part in parts[:-1] for s in part.token_scores[:-1]] + list(parts[-1].token_scores)
    text = joined_text(segmented, [part.text for part in edited])
    pieces = [p for part in edited for p in part.split.pieces] if all(
        part.split.pieces is not None for part in edited) else None
    return Translation(text, lambda: " ".join(p.tokenized for p in edited), sum(p.score for p in parts), tokens, scores,
                       WordSplit(pieces, text, tokens), None, tuple(parts),
                       warnings=tuple(dict.fromkeys(w for part in parts for w in part.warnings)))


def clause_part(part: Translation, segment: Segment, continues: bool) -> Translation:
    """`part` as it reads inside its text: a part of a sentence cut at a clause (`segment.clause`)
    ends with that clause's mark in place of the sentence end it was translated with; one that
    `continues` a sentence starts small where its source does. Its tokens keep their number."""
    if not (segment.clause or continues) or not part.tokens:
        return part
    text, tokens = part.text, list(part.tokens)
    pieces = list(part.split.pieces) if part.split.pieces is not None else None
    if segment.clause and closes_sentence(tokens[-1]):
        mark = clause_end(segment.text)
        text = text.rstrip()[: len(text.rstrip()) - len(tokens[-1].lstrip("▁ "))].rstrip() + mark
        tokens[-1] = mark
        if pieces is not None:
            pieces[-1] = mark
    if continues and starts_small(segment.text):
        text, tokens[0] = small_first(text), small_first(tokens[0])
        if pieces is not None:
            pieces[0] = small_first(pieces[0])
    return dataclasses.replace(part, text=text, legacy=partial(legacy_form, text), tokens=tokens,
                               split=WordSplit(pieces, text, tokens))


def side_by_side(parts: Sequence[Attention]) -> Attention:
    """Sentences' attention as their text's: each one's block on the diagonal, the <eos> of all but
    the last dropped (its rows summing to 1 again)."""
    src = [t for a in parts[:-1] for t in a.src_tokens[:-1]] + list(parts[-1].src_tokens)
    tgt = [t for a in parts[:-1] for t in a.tgt_tokens[:-1]] + list(parts[-1].tgt_tokens)
    weights = torch.block_diag(*[a.weights[:-1, :-1] for a in parts[:-1]], parts[-1].weights)
    return Attention(src, tgt, weights / weights.sum(1, keepdim=True).clamp_min(1e-9))
