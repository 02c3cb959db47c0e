"""The spans stage (data.protect): numbers read as placeholders and written back in the target's
conventions; links, addresses, emoji and words in another script taken out of the source, never
seen by the model, and put back where the alignment of the output places them."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

import torch

from nmt.data.marks import END_OR_CLOSING
from nmt.data.protected_numbers import Number, SpanRule
from nmt.data.tokenizer import WORD_START, Tokenizer
from nmt.data.vocab import Vocab
from nmt.inference.decoding.search import Hypothesis, hypothesis
from nmt.inference.text.records import Attention, Sentence
from nmt.inference.text.words import FrequentWords, source_alignment, words_of

# forced decodings of given outputs: {the index of each non-empty source: (its token scores, its attention)}
Forced = Callable[..., dict[int, tuple[list[float], torch.Tensor]]]


def read(tokenizer: Tokenizer, texts: Sequence[str]) -> tuple[list[str], list[list[Number]]]:
    """The texts the model reads (data.protect: numbers as placeholders) and each one's numbers."""
    if tokenizer.protector is None:
        return list(texts), [[] for _ in texts]
    return tokenizer.protector.protect_sources(texts)


def rule(tokenizer: Tokenizer, numbers: Sequence[list[Number]], strict: bool) -> SpanRule | None:
    """data.protect: which number placeholders each sentence may write (its own, at most once each;
    `strict`, exactly once each and no digit of its own)."""
    return tokenizer.protector.rule(numbers, strict) if tokenizer.protector else None


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


def write(sentences: Sequence[Sentence], found: list[list[Hypothesis]], forced: Forced, tokenizer: Tokenizer,
          src_vocab: Vocab, tgt_vocab: Vocab, frequent: FrequentWords | None, length_penalty: float
          ) -> list[list[Hypothesis]]:
    """Each hypothesis of a sentence whose source had spans taken out (links, emoji: they never
    reach the model) with their placeholders put in where the alignment of its own output (by
    `forced` decoding) places them (`span_places`), each scored 0 (given, not chosen); the
    placeholders are then restored as numbers are. A sentence that was nothing but such spans is
    translated as those spans."""
    todo = [i for i, s in enumerate(sentences) if any(n.kept for n in s.numbers)]
    if not todo:
        return found
    placeholder = {index: token for token, index in tokenizer.protector.target_ids.items()}  # type: ignore
    word_start = tgt_vocab.stoi.get(WORD_START)
    pairs = [(i, k) for i in todo for k, h in enumerate(found[i]) if h.tokens]
    weights = forced([sentences[i].ids for i, _ in pairs], [found[i][k].tokens for i, k in pairs], scored=False)
    out = list(found)
    for i in todo:
        out[i] = list(found[i]) or [hypothesis([], 0.0, length_penalty, [0.0])]
    for j, (i, k) in enumerate(pairs):
        src = [src_vocab.itos[x] for x in sentences[i].ids]
        pieces = tgt_vocab.decode(found[i][k].tokens)
        alignment = source_alignment(weights[j][1], words_of(src), words_of(pieces), frequent)
        out[i][k] = _with_spans(found[i][k], span_places(pieces, sentences[i].numbers, alignment), placeholder,
                                   word_start)
    for i in todo:  # (an empty output: its spans in order)
        out[i] = [h if h.tokens else _with_spans(h, span_places([], sentences[i].numbers, []), placeholder, word_start)
                  for h in out[i]]
    return out


def _with_spans(hyp: Hypothesis, places: list[tuple[int, int]], placeholder: dict[int, int],
                word_start: int | None) -> Hypothesis:
    """`hyp` with each span's placeholder put in at its place, as SentencePiece writes a word of its
    own: after a lone word-start piece (`word_start`), so that its text and its words are spaced."""
    tokens, scores = list(hyp.tokens), list(hyp.token_scores)
    for place, index in sorted(places, reverse=True):  # (from the back: places before stay true)
        given = [word_start, placeholder[index]] if word_start is not None else [placeholder[index]]
        tokens[place:place] = given
        if scores:
            scores[place:place] = [0.0] * len(given)
    return dataclasses.replace(hyp, tokens=tokens, token_scores=scores)


def shown(tokenizer: Tokenizer, src_tokens: list[str], out_tokens: list[str], weights: torch.Tensor,
          numbers: list[Number]) -> Attention:
    """The attention as a person reads it: a placeholder's row and column show its number."""
    protector = tokenizer.protector
    if protector is None or not numbers:
        return Attention(src_tokens, out_tokens, weights)
    return Attention([protector.source_piece(t, numbers) for t in src_tokens],
                     [protector.target_piece(t, numbers) for t in out_tokens], weights)
