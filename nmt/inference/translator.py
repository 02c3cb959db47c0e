"""Text in, text out: the one path by which everything translates (`nmt.load`, `nmt translate`,
`nmt eval`, `nmt serve` and validation during training). It tokenizes the input, decodes
length-sorted batches, and gives back text in the input's order.

    import nmt
    model = nmt.load("runs/my-run")                  # a run directory or a checkpoint file
    model.translate("Go.")                           # 'Va !' (the run's decode.beam_size: 5 by default)
    model.translate(["Go.", "I am cold."], beam=1)   # greedy search: ['Va !', "J'ai froid."]
    model.nbest("Go.", n=3)[0][0].score              # n-best lists of Translation, best first
    model.attention("I am cold.").weights            # (output pieces, source pieces)
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import NamedTuple

import torch

from nmt.config import DecodeConfig
from nmt.data.batches import pad
from nmt.data.prepared_corpus import TARGET_WORDS, TRAINING_WORDS, words_by_count
from nmt.data.protected_numbers import Number
from nmt.data.tokenizer import WORD_START, Tokenizer, WordTokenizer, legacy_form
from nmt.data.vocab import EOS, Vocab
from nmt.inference.terms import elision
from nmt.inference.decoding.constraints import Rules
from nmt.inference.engines import engine_device, map_batches
from nmt.inference.ensemble import Ensemble
from nmt.inference.onnx_engine import OnnxSeq2Seq, load_engine
from nmt.inference.decoding.sampling import Sampling, samples
from nmt.inference.decoding.search import Hypothesis, Sources, Specials, forced, hypothesis
from nmt.inference.terms.steering import searched, steering_for
from nmt.inference.sentences import (SENTENCE, CasedWords, Options, ReadText, Segment, Segmented, Sentence,
                                     SentenceReader, clause_end, closes_sentence, joined_text, restyled, small_first,
                                     sentence_words, source_ids, span_places, starts_small)
from nmt.inference.words import FrequentWords, alignment, source_alignment, text_words, word_scores, words_of
from nmt.model import Seq2Seq
from nmt.model.checkpoint import LoadedModel, load_models

logger = logging.getLogger(__name__)


class WordSplit:
    """An output's words, each with the indices of its pieces, worked out when first read: most
    callers (`nmt translate`'s text, `nmt eval`) never read them. `pieces`: a subword output's
    pieces as its text spells them (a placeholder as its number); None: a word model's tokens,
    grouped as `text` spells them."""

    def __init__(self, pieces: list[str] | None, text: str = "", tokens: Sequence[str] = ()):
        self.pieces, self.text, self.tokens = pieces, text, tokens

    @cached_property
    def words(self) -> list[tuple[str, list[int]]]:
        return words_of(self.pieces) if self.pieces is not None else text_words(self.text, self.tokens)


@dataclass(frozen=True)
class Translation:
    text: str  # plain text, as `nmt translate` prints it
    # the legacy form (`tokenized`), or how to make it: only --tokenized and legacy BLEU read it
    legacy: str | Callable[[], str] = field(repr=False, compare=False)
    score: float  # log-probability / length^decode.length_penalty (glossary_length_penalty with terms), <eos> counted
    # (with a glossary, a term written in the place of the model's own word is credited part of its score)
    tokens: list[str]  # the output pieces (or words) as the model wrote them, <eos> excluded
    token_scores: list[float] = field(default_factory=list)  # each token's natural-log probability, <eos> last
    split: WordSplit = field(default_factory=lambda: WordSplit([]), repr=False, compare=False)
    source: str | None = None  # the sentence the model read (a source in capitals: in sentence case), None: as given
    parts: tuple[Translation, ...] = ()  # a text of several sentences: each one's translation, in order
    # the record its search read (ids, spans): what its attention is read from, with no second tokenization
    sentence: Sentence | None = field(default=None, repr=False, compare=False)

    @cached_property
    def tokenized(self) -> str:
        """Lowercased and tokenized: the legacy form (`nmt translate --tokenized`)."""
        return self.legacy if isinstance(self.legacy, str) else self.legacy()

    @property
    def words(self) -> list[str]:
        """The words of `text`, as text.split() gives them."""
        return [word for word, _ in self.split.words]

    @property
    def word_scores(self) -> list[float]:
        """Each word's score: its pieces' lowest token score."""
        return word_scores(self.token_scores, self.split.words) if self.token_scores else []

    @property
    def word_pieces(self) -> list[list[int]]:
        """Each word's indices into `tokens`."""
        return [group for _, group in self.split.words]

    @property
    def mean_score(self) -> float:
        """The mean of `token_scores` (<eos> counted): the sentence's score per token."""
        return sum(self.token_scores) / len(self.token_scores) if self.token_scores else math.nan


class Attention(NamedTuple):
    src_tokens: list[str]  # the source pieces as the model read them, <eos> included (numbers for placeholders)
    tgt_tokens: list[str]  # the output pieces, <eos> included (numbers for placeholders)
    weights: torch.Tensor  # (len(tgt_tokens), len(src_tokens)), each row sums to 1

    def alignment(self, output: Translation | None = None, each_output_word: bool = False,
                  frequent: FrequentWords | None = None) -> list[tuple[int, int]]:
        """Hard word alignment, (source word, output word) index pairs: each source word to the
        output word that attended to it most (`nmt.inference.words.source_alignment`: what `--align`
        prints, via `nmt.inference.words.pharaoh`, and markup reads: the lower AER against a gold
        alignment, 48.1% against 51.4% for the default), or with `each_output_word` each output word to
        the source word its pieces attended most (`alignment`). Output words are those of `output`
        (the Translation these weights are behind), else as the pieces group (a word model's: its
        tokens); source words as the model read them. `frequent` (`Translator.frequent`): the
        run's most frequent words, which the first direction steps past (`words.past_frequent`)."""
        out_words = list(zip(output.words, output.word_pieces)) if output else words_of(self.tgt_tokens)
        if each_output_word:
            return alignment(self.weights, words_of(self.src_tokens), out_words)
        return source_alignment(self.weights, words_of(self.src_tokens), out_words, frequent)


def frequent_words(run: Path) -> FrequentWords | None:
    """A run directory's most frequent words of each side, from its word counts; None where it has
    no target counts (a run trained before they were kept)."""
    if not (run / TRAINING_WORDS).is_file() or not (run / TARGET_WORDS).is_file():
        return None
    return FrequentWords.of(words_by_count(run / TRAINING_WORDS), words_by_count(run / TARGET_WORDS))


def best_of(hyps: Sequence[Translation]) -> Translation:
    """The first (best) of an n-best list; an empty one (an empty input's) gives an empty Translation."""
    return hyps[0] if hyps else Translation("", "", math.nan, [])


def translation(tokenizer: Tokenizer, tokens: list[str], hyp: Hypothesis, sentence: Sentence) -> Translation:
    """A search's output `tokens` for `sentence` as text (in its source's case style, its protected
    spans put back as written), with its scores by token and by word."""
    numbers = sentence.numbers
    text = restyled(tokenizer.target_text(tokens), sentence.style)  # (before the spans: a link keeps its case)
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
    return Translation(text, tokenized, hyp.normalized, tokens, hyp.token_scores, split, sentence.text or None,
                       sentence=sentence if sentence.ids else None)


def shown(tokenizer: Tokenizer, src_tokens: list[str], out_tokens: list[str], weights: torch.Tensor,
          numbers: list[Number]) -> Attention:
    """The attention as a person reads it: a placeholder's row and column show its number."""
    protector = tokenizer.protector
    if protector is None or not numbers:
        return Attention(src_tokens, out_tokens, weights)
    return Attention([protector.source_piece(t, numbers) for t in src_tokens],
                     [protector.target_piece(t, numbers) for t in out_tokens], weights)


def joined_nbest(read: Sequence[ReadText], found: Sequence[list[Translation]]) -> list[list[Translation]]:
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
                       WordSplit(pieces, text, tokens), None, tuple(parts))


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


def with_kept_spans(translator: Translator, sentences: Sequence[Sentence], found: list[list[Hypothesis]]
                    ) -> list[list[Hypothesis]]:
    """Each hypothesis of a sentence whose source had spans taken out (links, emoji: they never
    reach the model) with their placeholders put in where the alignment of its own output places
    them (`span_places`), each scored 0 (given, not chosen); `translation` restores them as it
    restores numbers. A sentence that was nothing but such spans is translated as those spans."""
    todo = [i for i, s in enumerate(sentences) if any(n.kept for n in s.numbers)]
    if not todo:
        return found
    placeholder = {index: token for token, index in translator.tokenizer.protector.target_ids.items()}  # type: ignore
    word_start = translator.tgt_vocab.stoi.get(WORD_START)
    pairs = [(i, k) for i in todo for k, h in enumerate(found[i]) if h.tokens]
    weights = forced_batches(translator, [sentences[i].ids for i, _ in pairs], [found[i][k].tokens for i, k in pairs],
                             scored=False)
    out = list(found)
    for i in todo:
        out[i] = list(found[i]) or [hypothesis([], 0.0, translator.cfg.length_penalty, [0.0])]
    for j, (i, k) in enumerate(pairs):
        src = [translator.src_vocab.itos[x] for x in sentences[i].ids]
        pieces = translator.tgt_vocab.decode(found[i][k].tokens)
        alignment = source_alignment(weights[j][1], words_of(src), words_of(pieces), translator.frequent)
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


def score_given(translator: Translator, texts: Sequence[str], outputs: Sequence[str]) -> list[Translation]:
    """`Translator.score`: forced decoding of given outputs, batched by source length."""
    tokenizer, vocab, limit = translator.tokenizer, translator.tgt_vocab, translator.cfg.max_input_len
    sources, targets, numbers = list(texts), list(outputs), [[] for _ in texts]
    if tokenizer.protector:  # numbers as placeholders where they match, as in training
        sources, targets = tokenizer.protector.protect_pairs(texts, outputs)
        numbers = [tokenizer.protector.numbers(t) if s != t else [] for s, t in zip(sources, texts)]
    src_ids = [source_ids(tokens, translator.src_vocab, limit) if tokens else []
               for tokens in tokenizer.source_tokens(sources)]
    out_ids = [vocab.encode(t) for t in tokenizer.target_tokens(targets)]
    results = [Translation("", "", math.nan, []) for _ in texts]
    for i, (scores, _) in forced_batches(translator, src_ids, out_ids).items():
        hyp = hypothesis(out_ids[i], sum(scores), translator.cfg.length_penalty, scores)
        results[i] = translation(tokenizer, vocab.decode(out_ids[i]), hyp, Sentence(0, src_ids[i], numbers[i], Rules(), 0))
    return results


def alignments(translator: Translator, texts: Sequence[str], translations: Sequence[Translation],
               each_output_word: bool = False) -> list[list[tuple[int, int]]]:
    """Hard word alignments of translations of `texts` (their own tokens: from any search): each
    source word to an output word, or with `each_output_word` each output word to a source word."""
    return [attention.alignment(t, each_output_word, translator.frequent) if t.tokens else []
            for attention, t in zip(attentions(translator, texts, translations), translations)]


def attentions(translator: Translator, texts: Sequence[str], translations: Sequence[Translation]) -> list[Attention]:
    """The attention behind each translation of `texts` (a forced decoding of its own tokens,
    batched by source length); a text of several sentences gets its sentences' side by side."""
    each = [(i, part) for i, t in enumerate(translations) for part in (t.parts or (t,))]
    unread = [k for k, (_, part) in enumerate(each) if part.sentence is None]  # outputs given, not searched
    read = iter(translator.reader.sentences([texts[each[k][0]] if each[k][1].source is None else each[k][1].source
                                             for k in unread]))
    sentences = [part.sentence if part.sentence is not None else next(read) for _, part in each]
    src_ids = [s.ids or [translator.src_vocab.eos_id] for s in sentences]
    found = forced_batches(translator, src_ids, [translator.tgt_vocab.encode(part.tokens) for _, part in each],
                           scored=False)
    shown_parts: list[list[Attention]] = [[] for _ in texts]
    for k, ((i, part), sentence) in enumerate(zip(each, sentences)):
        src = [translator.src_vocab.itos[x] for x in src_ids[k]]
        shown_parts[i].append(shown(translator.tokenizer, src, part.tokens + [EOS], found[k][1], sentence.numbers))
    return [parts[0] if len(parts) == 1 else side_by_side(parts) for parts in shown_parts]


def side_by_side(parts: Sequence[Attention]) -> Attention:
    """Sentences' attention as their text's: each one's block on the diagonal, the <eos> of all but
    the last dropped (its rows summing to 1 again)."""
    src = [t for a in parts[:-1] for t in a.src_tokens[:-1]] + list(parts[-1].src_tokens)
    tgt = [t for a in parts[:-1] for t in a.tgt_tokens[:-1]] + list(parts[-1].tgt_tokens)
    weights = torch.block_diag(*[a.weights[:-1, :-1] for a in parts[:-1]], parts[-1].weights)
    return Attention(src, tgt, weights / weights.sum(1, keepdim=True).clamp_min(1e-9))


def forced_batches(translator: Translator, src_ids: Sequence[list[int]], out_ids: Sequence[list[int]],
                   scored: bool = True) -> dict[int, tuple[list[float], torch.Tensor]]:
    """`search.forced` over many sentences (source ids, <eos> last), batched by source length: per
    non-empty source, its output's token scores (where `scored`) and attention weights."""
    batches = by_length(src_ids, translator.cfg.batch_size)

    def decode(indices: list[int]) -> list[tuple[list[float], torch.Tensor]]:
        src = pad([src_ids[i] for i in indices], translator.src_vocab.pad_id).to(translator.device)
        lens = torch.tensor([len(src_ids[i]) for i in indices], device=translator.device)
        return forced(translator.model, src, lens, translator.specials, [out_ids[i] for i in indices], scored)

    decoded = map_batches(translator.model, decode, batches)
    return dict(zip(itertools.chain(*batches), itertools.chain(*decoded)))


def by_length(sources: Sequence[Sequence], size: int) -> list[list[int]]:
    """The indices of the non-empty sources in batches of `size`, sorted by length: little padding."""
    order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: len(sources[i]))
    return [order[start: start + size] for start in range(0, len(order), size)]


class Translator:
    cased = CasedWords({})  # how the run's corpus writes words with capitals (`from_loaded` reads the run's)
    _reader: SentenceReader | None = None

    def __init__(self, model: Seq2Seq | OnnxSeq2Seq | Ensemble, src_vocab: Vocab, tgt_vocab: Vocab, cfg: DecodeConfig,
                 device: torch.device, tokenizer: Tokenizer | None = None, frequent: FrequentWords | None = None):
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.frequent = frequent  # the words alignments step past (`words.past_frequent`); None: the run has no counts
        self.cfg, self.device = cfg, device
        self.tokenizer = tokenizer or WordTokenizer()
        self.specials = Specials(tgt_vocab.bos_id, tgt_vocab.eos_id,
                                 tgt_vocab.unk_id if self.tokenizer.ban_unk else None)

    @classmethod
    def load(cls, checkpoint: str | None = None, device: str | torch.device = "auto",
             batch_size: int | None = None, engine: str = "torch", strict_numbers: bool | None = None) -> Translator:
        """A checkpoint file or a run directory (its best.pt; by default the newest run's), on `device`,
        decoding `batch_size` sentences at a time with `engine` (torch, onnx, onnx-fp32: see nmt.load);
        `strict_numbers` False lets search drop numbers or write digits (default: decode.strict_numbers)."""
        device = engine_device(engine, device)
        return cls.from_loaded(load_models(checkpoint, device), device, batch_size, engine, strict_numbers)

    @classmethod
    def from_loaded(cls, loaded: LoadedModel, device: torch.device, batch_size: int | None = None,
                    engine: str = "torch", strict_numbers: bool | None = None) -> Translator:
        chosen = {"batch_size": batch_size, "strict_numbers": strict_numbers,
                  "max_sentence_words": loaded.cfg.decode.max_sentence_words or sentence_words(loaded.cfg.data.max_len)}
        cfg = dataclasses.replace(loaded.cfg.decode, **{key: v for key, v in chosen.items() if v is not None})
        models = [member.model.to(device).eval() if engine == "torch" else load_engine(member.path, engine)
                  for member in loaded.members or [loaded]]
        model = Ensemble(models, loaded.weights) if loaded.members else models[0]
        translator = cls(model, loaded.src_vocab, loaded.tgt_vocab, cfg, device, loaded.tokenizer,
                         frequent_words(loaded.path.parent))
        translator.cased = CasedWords.load(loaded.path.parent)
        return translator

    def run(self, texts: Sequence[str], options: Options = Options()) -> list[list[Translation]]:
        """The one way in: up to `options.n` translations of each text, best first ([] for an empty
        text), in input order; beam search with a beam of at least n, or with `options.sample`, n
        drawn samples (best first by their score). A text of several sentences is translated a
        sentence at a time (one without a prefix: nmt.inference.sentences) and joined."""
        read = self.reader.read(texts, options)
        sentences = self.reader.records(read)
        searched = with_kept_spans(self, sentences, self._search(sentences, options))
        found = [[translation(self.tokenizer, self.tgt_vocab.decode(h.tokens), h, sentence) for h in hyps]
                 for hyps, sentence in zip(searched, sentences)]
        return joined_nbest(read, found)

    def stream(self, lines: Iterable[str], options: Options = Options(), chunk_size: int | None = None
               ) -> Iterator[tuple[list[str], list[list[Translation]]]]:
        """`run` over an arbitrarily long stream, in chunks of `chunk_size` lines (default 16
        batches), in order, holding one chunk at a time: each chunk's texts and their n-best lists
        (a prefix or glossary given one a line is cut with its lines; warnings name the line in the
        whole stream)."""
        chunk_size = chunk_size or 16 * self.cfg.batch_size
        lines, done = iter(lines), 0
        while chunk := list(itertools.islice(lines, chunk_size)):
            per_line = {key: value[done: done + len(chunk)] for key in ("prefix", "glossary")
                        if isinstance(value := getattr(options, key), list)}
            yield chunk, self.run(chunk, dataclasses.replace(options, first_line=options.first_line + done,
                                                             **per_line))
            done += len(chunk)

    def translate(self, texts: str | Sequence[str], beam: int | None = None, tokenized: bool = False,
                  **options) -> str | list[str]:
        """A sentence (or a list of them) in, its best translation's text out; empty in, empty out.
        `beam` 1 is greedy search (default: the checkpoint's decode.beam_size); `tokenized` gives
        the legacy lowercased, tokenized form; `options`, any other of `Options`: each output starts
        with `prefix` (one for all, or one per text), tokenized as the target is; with `sample`, each
        output is drawn from the model's distribution instead (beam unused); with `glossary` (a
        Glossary, a {source term: target term} dict or a file), every output contains the target term
        of each source term its text holds (nmt.inference.terms.glossary)."""
        single = isinstance(texts, str)
        out = [t.tokenized if tokenized else t.text
               for t in self.translations([texts] if single else texts, beam, **options)]  # type: ignore[list-item]
        return out[0] if single else out

    def translations(self, texts: Sequence[str], beam: int | None = None, **options) -> list[Translation]:
        """The best `Translation` of each text, in input order (an empty one for an empty text)."""
        return [best_of(hyps) for hyps in self.run(texts, Options(beam=beam, **options))]

    def nbest(self, texts: str | Sequence[str], n: int = 1, beam: int | None = None, **options
              ) -> list[list[Translation]]:
        """Up to `n` translations of each text, best first ([] for an empty text): `run`."""
        return self.run([texts] if isinstance(texts, str) else texts, Options(beam=beam, n=n, **options))

    def translate_stream(self, lines: Iterable[str], beam: int | None = None, chunk_size: int | None = None,
                         tokenized: bool = False, **options) -> Iterator[str]:
        """Translate an arbitrarily long stream in chunks, in order, holding one chunk at a time."""
        for _, results in self.stream(lines, Options(beam=beam, **options), chunk_size):
            yield from (best.tokenized if tokenized else best.text for best in map(best_of, results))

    @property
    def reader(self) -> SentenceReader:
        """How this model's texts become sentence records (the one place a text is read); made
        anew where the decoding config was replaced."""
        if self._reader is None or self._reader.cfg is not self.cfg:
            self._reader = SentenceReader(self.tokenizer, self.src_vocab, self.tgt_vocab, self.cfg, self.cased)
        return self._reader

    def score(self, texts: str | Sequence[str], outputs: str | Sequence[str]) -> list[Translation]:
        """The model's scores of given translations `outputs` of `texts` (forced decoding; the scale
        search scores on): a Translation of each output, with its tokens' and words' scores."""
        single = isinstance(texts, str)
        return score_given(self, [texts] if single else texts, [outputs] if single else outputs)  # type: ignore

    def attention(self, text: str, output: Translation | Sequence[str] | None = None,
                  beam: int | None = None) -> Attention:
        """The attention weights behind the translation of `text` (its search: `beam`, default
        decode.beam_size), or behind a given `output`: a Translation of it, or its tokens."""
        if output is None:
            output = self.translations([text], beam)[0]
        elif not isinstance(output, Translation):
            output = Translation("", "", math.nan, list(output))
        return attentions(self, [text], [output])[0]

    def _search(self, sentences: Sequence[Sentence], options: Options) -> list[list[Hypothesis]]:
        """Up to `options.n` scored hypotheses of each sentence, in input order ([] for an empty
        one), decoded in batches of similar length."""
        beam = max(options.beam or self.cfg.beam_size, options.n)
        results: list[list[Hypothesis]] = [[] for _ in sentences]
        batches = by_length([s.ids for s in sentences], self.cfg.batch_size)
        decoded = map_batches(self.model, lambda indices: self._decode([sentences[i] for i in indices], beam,
                                                                       options.n, options.sample), batches)
        for i, hyps in zip(itertools.chain(*batches), itertools.chain(*decoded)):
            results[i] = hyps
        return results

    def _decode(self, batch: Sequence[Sentence], beam: int, nbest: int, sample: Sampling | None
                ) -> list[list[Hypothesis]]:
        """One batch searched (greedy, beam) or sampled, each sentence under its own rules and cap."""
        sources = Sources(pad([s.ids for s in batch], self.src_vocab.pad_id).to(self.device),
                          torch.tensor([len(s.ids) for s in batch], device=self.device),
                          torch.tensor([s.cap for s in batch], device=self.device), [s.rules for s in batch])
        cfg = self.cfg
        if sample is not None:
            found = samples(self.model, sources, self.specials, nbest, sample, cfg.length_penalty,
                            steering_for(sources.rules))
        else:
            found = searched(self.model, sources, self.specials, beam, cfg.length_penalty, nbest)
        return elision.elided(self.model, sources, self.specials, found, self.tgt_vocab, self.tokenizer,
                              cfg.length_penalty)  # "l'automobile", not "la automobile"
