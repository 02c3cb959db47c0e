"""The road a text takes, stage by stage (docs/layout.md draws it): the one place that says in which
order the stages read a text before search and write its translation after.

    read    case (style, sentence case) -> sentences (split, long ones cut) -> filters
            -> spans (numbers as placeholders, kept spans out) -> glossary (terms) -> pieces, rules, cap
    search  the translator's batches; the policy and hooks `decode` chooses, then the glossary's elision
    write   spans (kept spans placed) -> pieces to text -> case (restyled) -> spans (numbers back)
            -> filters -> sentences (joined)

`FILTERS` holds the stages of one's own: each reads a sentence's text before the model does and
writes its translation's text after (docs/layout.md adds one in twenty lines).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from functools import cached_property, partial
from typing import Protocol

from nmt.config import DecodeConfig
from nmt.data.tokenizer import Tokenizer, legacy_form
from nmt.data.vocab import EOS, Vocab
from nmt.errors import NmtError
from nmt.inference.decoding.constraints import Rules
from nmt.inference.decoding.sampling import Sampling, samples
from nmt.inference.decoding.search import Hypothesis, Sources, Specials, hypothesis, search
from nmt.inference.text import case, markup, sentences, spans
from nmt.inference.text.case import CasedWords
from nmt.inference.text.elision import elided
from nmt.inference.text.glossary import Glossary, closes, glossary_terms, pieces_of, term_spans
from nmt.inference.text.markup import Markup
from nmt.inference.text.records import (SENTENCE, Attention, Options, ReadText, Sentence, Translation, WordSplit,
                                        best_of)
from nmt.inference.text.sentences import sentence_words
from nmt.inference.text.steering import beam_for, steering_for
from nmt.inference.text.terms import Pieces, sentence_rules
from nmt.inference.text.words import FrequentWords

logger = logging.getLogger(__name__)
# what the translator takes from the road besides the road itself: the records, and how a run's
# texts are read (its corpus's capitalized and most frequent words, its sentences' length)
__all__ = ["Attention", "CasedWords", "FrequentWords", "Options", "Road", "Sentence", "Translation", "attentions",
           "best_of", "one_per_text", "scored", "sentence_words"]


class Filter(Protocol):
    """A stage of one's own: `read` a sentence's text before the model does, `write` its
    translation's text after (given the sentence it translates)."""

    def read(self, text: str) -> str: ...
    def write(self, text: str, source: str) -> str: ...


FILTERS: list[Filter] = []  # read in this order, written in the reverse


class Road:
    """One model's road: its tokenizer, vocabularies, decoding config, its corpus's capitalized
    words and most frequent words (which kept spans' placing steps past)."""

    def __init__(self, tokenizer: Tokenizer, src_vocab: Vocab, tgt_vocab: Vocab, cfg: DecodeConfig,
                 cased: CasedWords, frequent: FrequentWords | None = None):
        self.tokenizer, self.src_vocab, self.tgt_vocab, self.cfg = tokenizer, src_vocab, tgt_vocab, cfg
        self.cased, self.frequent = cased, frequent

    @cached_property
    def segmenter(self) -> sentences.Segmenter:
        return sentences.Segmenter(self.tokenizer.source_lang, self.cfg.max_sentence_words or sentences.LONGEST)

    @cached_property
    def pieces(self) -> Pieces:
        """The target tokens the glossary's rules name: those that continue a word, those that close a sentence."""
        return pieces_of(self.tgt_vocab.itos, self.tokenizer.kind == "subword")

    def read(self, texts: Sequence[str], options: Options) -> list[ReadText]:
        """Each text read in sentence case where it is in capitals, split into its sentences (one
        with a prefix to complete: whole), with its line, prefix and glossary (a file read once, not
        once a text)."""
        given = options.glossary
        glossary = [Glossary.of(g) for g in given] if isinstance(given, list) else \
            Glossary.of(given) if given is not None else None
        prefixes = one_per_text(options.prefix, len(texts))
        glossaries = one_per_text(glossary, len(texts), "glossaries")
        tagged = one_per_text(options.markup, len(texts), "markup flags")
        out = []
        for i, (line, text) in enumerate(enumerate(texts, options.first_line)):
            marked = markup.read(text, tagged[i], f"line {line}") if tagged[i] is not False else None
            style, text = case.read(marked.text if marked else text, self.cased)
            segmented = sentences.read(text, self.segmenter, self.tokenizer, self.cfg.max_input_len) \
                if prefixes[i] is None else sentences.whole(text)
            out.append(ReadText(segmented, style, line, prefixes[i], glossaries[i], marked))
        return out

    def records(self, read: Sequence[ReadText]) -> list[Sentence]:
        """The sentence record of every segment of the `read` texts, in order, each with its
        text's line, prefix, glossary and case style."""
        each = [(text, segment) for text in read for segment in text.segmented.segments]
        texts = [segment.text for _, segment in each]
        for stage in FILTERS:
            texts = [stage.read(text) for text in texts]
        return self.sentences(texts, [t.line for t, _ in each], [t.prefix for t, _ in each],
                              [t.glossary for t, _ in each], [t.style for t, _ in each])

    def sentences(self, texts: Sequence[str], lines: Sequence[int] | None = None,
                  prefixes: Sequence[str | None] | None = None, glossaries: Sequence[Glossary | None] | None = None,
                  styles: Sequence[str] | None = None) -> list[Sentence]:
        """Each sentence as the record search takes: its source ids, spans, rules and cap; each
        text's line (default: 1, 2, ...), prefix, glossary and case style where it was read in
        sentence case (`read`), or none."""
        sources, numbers = spans.read(self.tokenizer, texts)
        lines = list(lines) if lines is not None else range(1, len(texts) + 1)
        prefixes = prefixes or [None] * len(texts)
        glossaries = glossaries or [None] * len(texts)
        prefix_tokens = iter(self.tokenizer.target_tokens([p for p in prefixes if p is not None]))
        terms = glossary_terms(self.tokenizer, self.tgt_vocab, glossaries, texts, lines) if any(glossaries) \
            else [[] for _ in texts]
        span_rule = spans.rule(self.tokenizer, numbers, self.cfg.strict_numbers)
        out = []
        for i, (line, tokens) in enumerate(zip(lines, self.tokenizer.source_tokens(sources))):
            ids = source_ids(tokens, self.src_vocab, self.cfg.max_input_len, line) if tokens else []
            # each term's source words: where search places it
            places = term_spans(tokens[:len(ids) - 1], [term.source for term in terms[i]],
                                self.tokenizer.kind == "subword") if ids and terms[i] else []
            prefix_ids = self.tgt_vocab.encode(next(prefix_tokens)) if prefixes[i] is not None else ()
            rules = sentence_rules(span_rule, i, prefix_ids, [term.ids for term in terms[i]], self.pieces,
                                   closes(texts[i]) if terms[i] else 0,
                                   [range(p[0], p[1] + 1) if p else () for p in places],
                                   [term.elided for term in terms[i]], self.cfg.glossary_length_penalty)
            out.append(Sentence(line, ids, numbers[i], rules, output_cap(len(ids), rules, self.cfg, line), texts[i],
                                styles[i] if styles else SENTENCE, len(tokens) > self.cfg.max_input_len))
        return out

    def decode(self, model, sources: Sources, specials: Specials, beam: int, n: int, sample: Sampling | None
               ) -> list[list[Hypothesis]]:
        """One batch searched (greedy, beam: the beam its rules ask for) or sampled, steered toward
        the terms its sentences owe (the search's hooks), then the glossary's elision."""
        found = decoded(model, sources, specials, beam, n, sample, self.cfg.length_penalty)
        if not any(rules.terms for rules in sources.rules or ()):  # (no sentence owes a term: nothing to elide)
            return found
        return elided(model, sources, specials, found, self.tgt_vocab, self.tokenizer, self.cfg.length_penalty)

    def write(self, read: Sequence[ReadText], records: Sequence[Sentence], found: list[list[Hypothesis]],
              forced: spans.Forced) -> list[list[Translation]]:
        """Each text's n-best list from its sentences' hypotheses (`forced`: the translator's forced
        decoding, which places the kept spans by the alignment)."""
        capped = {(i, k) for i, (hyps, sentence) in enumerate(zip(found, records)) for k, h in enumerate(hyps)
                  if len(h.tokens) >= sentence.cap}  # (before the kept spans go in: they are not the model's)
        for i, k in sorted(capped):
            if k == 0:
                logger.warning("line %d: %s", records[i].line, capped_warning(records[i]))
        placed = spans.write(records, found, forced, self.tokenizer, self.src_vocab, self.tgt_vocab, self.frequent,
                             self.cfg.length_penalty)
        found_text = [[self.translation(self.tgt_vocab.decode(h.tokens), h, sentence, (i, k) in capped)
                       for k, h in enumerate(hyps)] for i, (hyps, sentence) in enumerate(zip(placed, records))]
        if FILTERS:
            found_text = [[_filtered(t, sentence.text) for t in hyps] for hyps, sentence in zip(found_text, records)]
        out = sentences.write(read, found_text)
        marked = [i for i, text in enumerate(read) if text.markup is not None]
        if marked:  # the tags back around the words the best translation's alignment gives theirs
            texted = [i for i in marked if out[i]]
            shown = attentions(self, [read[i].markup.text for i in texted], [out[i][0] for i in texted], forced)
            pairs = {i: attention.alignment(out[i][0], frequent=self.frequent) if out[i][0].tokens else []
                     for i, attention in zip(texted, shown)}
            for i in marked:
                out[i] = _tagged(read[i].markup, out[i], pairs.get(i, []))  # type: ignore[arg-type]
        return out

    def translation(self, tokens: list[str], hyp: Hypothesis, sentence: Sentence, capped: bool = False
                    ) -> Translation:
        """A search's output `tokens` for `sentence` as text (in its source's case style, its protected
        spans put back as written), with its scores by token and by word, and what was cut: its
        source, or the output itself where it reached its length cap (`capped`)."""
        tokenizer, numbers = self.tokenizer, sentence.numbers
        text = tokenizer.target_text(tokens)
        if sentence.style != SENTENCE:  # (before the spans: a link keeps its case)
            text = case.write(text, sentence.style)
        if numbers:  # data.protect: the numbers back, in the target's conventions
            text = tokenizer.protector.restore(text, numbers)  # type: ignore[union-attr]
        # (a word model's own tokens where its text was not restyled; else the text tokenized)
        tokenized = partial(tokenizer.legacy_text, tokens, text) if sentence.style == SENTENCE else \
            partial(legacy_form, text)
        if tokenizer.kind == "subword":  # a restored number is a piece of the words, as the text spells it
            split = WordSplit([tokenizer.protector.target_piece(t, numbers) for t in tokens]  # type: ignore[union-attr]
                              if numbers else tokens)
        else:
            split = WordSplit(None, text, tokens)
        warnings = ((f"the source was cut to decode.max_input_len={self.cfg.max_input_len} tokens",) if sentence.cut
                    else ()) + ((capped_warning(sentence),) if capped else ())
        return Translation(text, tokenized, hyp.normalized, tokens, hyp.token_scores, split, sentence.text or None,
                           sentence=sentence if sentence.ids else None, warnings=warnings)


def scored(road: Road, texts: Sequence[str], outputs: Sequence[str], forced: spans.Forced) -> list[Translation]:
    """Given outputs of `texts` scored by `forced` decoding: each a Translation, read as in
    training (numbers as placeholders where the two sides' match)."""
    tokenizer, vocab = road.tokenizer, road.tgt_vocab
    sources, targets, numbers = list(texts), list(outputs), [[] for _ in texts]
    if tokenizer.protector:  # numbers as placeholders where they match, as in training
        sources, targets = tokenizer.protector.protect_pairs(texts, outputs)
        numbers = [tokenizer.protector.numbers(t) if s != t else [] for s, t in zip(sources, texts)]
    src_ids = [source_ids(tokens, road.src_vocab, road.cfg.max_input_len) if tokens else []
               for tokens in tokenizer.source_tokens(sources)]
    out_ids = [vocab.encode(t) for t in tokenizer.target_tokens(targets)]
    results = [Translation("", "", math.nan, []) for _ in texts]
    for i, (scores, _) in forced(src_ids, out_ids).items():
        hyp = hypothesis(out_ids[i], sum(scores), road.cfg.length_penalty, scores)
        given = Sentence(0, src_ids[i], numbers[i], Rules(), 0)
        results[i] = road.translation(vocab.decode(out_ids[i]), hyp, given)
    return results

def attentions(road: Road, texts: Sequence[str], translations: Sequence[Translation], forced: spans.Forced
           ) -> list[Attention]:
    """The attention behind each translation of `texts` (a `forced` decoding of its own
    tokens); a text of several sentences gets its sentences' side by side."""
    each = [(i, part) for i, t in enumerate(translations) for part in (t.parts or (t,))]
    unread = [k for k, (_, part) in enumerate(each) if part.sentence is None]  # outputs given, not searched
    read = iter(road.sentences([texts[each[k][0]] if each[k][1].source is None else each[k][1].source
                                for k in unread]))
    records = [part.sentence if part.sentence is not None else next(read) for _, part in each]
    src_ids = [s.ids or [road.src_vocab.eos_id] for s in records]
    found = forced(src_ids, [road.tgt_vocab.encode(part.tokens) for _, part in each], scored=False)
    shown_parts: list[list[Attention]] = [[] for _ in texts]
    for k, ((i, part), sentence) in enumerate(zip(each, records)):
        src = [road.src_vocab.itos[x] for x in src_ids[k]]
        shown_parts[i].append(spans.shown(road.tokenizer, src, part.tokens + [EOS], found[k][1], sentence.numbers))
    return [parts[0] if len(parts) == 1 else sentences.side_by_side(parts) for parts in shown_parts]


def decoded(model, sources: Sources, specials: Specials, beam: int, n: int = 1, sample: Sampling | None = None,
            length_penalty: float = 1.0) -> list[list[Hypothesis]]:
    """Up to `n` hypotheses of each source, searched (beam `beam`: the beam its rules ask for, greedy
    at 1) or sampled, steered toward the terms its sentences owe (the search's hooks)."""
    steer = steering_for(sources.rules)
    if sample is not None:
        return samples(model, sources, specials, n, sample, length_penalty, steer)
    return search(model, sources, specials, beam_for(beam, sources.rules), length_penalty, n, steer)


def capped_warning(sentence: Sentence) -> str:
    return (f"the translation reached its length cap of {sentence.cap} tokens (decode.max_output_ratio, "
            f"decode.max_output_extra) and was cut there")


def _tagged(markup: Markup, hyps: list[Translation], pairs: Sequence[tuple[int, int]]) -> list[Translation]:
    """A text's translations with its tags put back in the best one's text (`pairs`: that one's
    alignment); none (a source with no text, "<br/>"): its tags alone, if it has any."""
    if hyps:
        return [dataclasses.replace(hyps[0], text=markup.restore(hyps[0].words, pairs))]
    return [Translation(markup.restore([], []), "", math.nan, [])] if markup.has_tags else []


def _filtered(translation: Translation, source: str) -> Translation:
    """A sentence's translation as the `FILTERS` write it, last first."""
    text = translation.text
    for stage in reversed(FILTERS):
        text = stage.write(text, source)
    return dataclasses.replace(translation, text=text, legacy=partial(legacy_form, text))


def one_per_text(given: object, count: int, what: str = "prefixes", texts: str = "sentences") -> list:
    """`given` for each of `count` texts: a list (or tuple) gives one a text; anything else (one
    prefix, one glossary, None) is every text's."""
    values = list(given) if isinstance(given, (list, tuple)) else [given] * count
    if len(values) != count:
        raise NmtError(f"{len(values)} {what} for {count} {texts}: give one for all, or one per text")
    return values


def source_ids(tokens: list[str], vocab: Vocab, limit: int, line_no: int | None = None) -> list[int]:
    """A source's ids and <eos>, cut to `limit` tokens (with a warning naming the line)."""
    if len(tokens) > limit:
        where = f"line {line_no}" if line_no is not None else "input"
        logger.warning("%s has %d tokens; truncated to decode.max_input_len=%d", where, len(tokens), limit)
        tokens = tokens[:limit]
    return vocab.encode(tokens) + [vocab.eos_id]


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

