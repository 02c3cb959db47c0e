"""The records a text's road passes along: what a caller asks (`Options`), a text as it was read
(`ReadText`: its sentences, case style, line, prefix and glossary), one sentence as search takes it
(`Sentence`), and what comes back (`Translation`, and the `Attention` behind one)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

import torch

from nmt.data.protected_numbers import Number
from nmt.inference.decoding.constraints import Rules
from nmt.inference.text.glossary import Glossary
from nmt.inference.text.words import FrequentWords, alignment, source_alignment, text_words, word_scores, words_of

if TYPE_CHECKING:
    from nmt.inference.decoding.sampling import Sampling
    from nmt.inference.text.markup import Markup

# a Glossary, a file's path or terms given as {source: target}; a list: one of those a text
GlossaryLike = Glossary | dict[str, str] | str | list | None
SENTENCE = "sentence"  # a source's case style as written (nmt.inference.text.case)


@dataclass(frozen=True)
class Options:
    """What a caller asks of a translation, given once and read where each concern is: `beam`
    (None: decode.beam_size; 1: greedy search), `n` translations a text, best first (the beam is at
    least n), `prefix` each output starts with (one for all, or a list: one a text), `sample` (drawn
    from the model's distribution instead of searched), `glossary` (a Glossary, {source: target} or
    a file; a list: one a text), `markup` (inline tags kept around the aligned words of the best
    translation: True, every text is markup and one not well formed is an error; None, where a text
    reads as markup; False, never; a list: one a text) and `first_line`, the line of the first text,
    which warnings and errors name."""
    beam: int | None = None
    n: int = 1
    prefix: str | Sequence[str] | None = None
    sample: Sampling | None = None
    glossary: GlossaryLike = None
    markup: bool | None | Sequence[bool | None] = False
    first_line: int = 1


@dataclass(frozen=True)
class Segment:
    """One sentence (or clause) of a text, and the text before it: what joins its translation to the last."""
    text: str
    before: str  # whitespace as the source has it ("" for the first, " " or "\n\n" between)
    clause: bool = False  # a part of a sentence cut at its clauses: its translation loses the end of a sentence


@dataclass(frozen=True)
class Segmented:
    segments: list[Segment]  # (the text's own leading and trailing whitespace is not kept, as for one sentence)


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
    markup: Markup | None = None  # its tags, where it was read as markup (its segments are its plain text's)


@dataclass(frozen=True)
class Sentence:
    """One input as search takes it: made once from its text and the caller's options
    (`Road.sentences`), then chunked, batched and decoded as one record."""
    line: int  # its line in the whole input, which warnings name
    ids: list[int]  # the source ids the model reads, <eos> last, cut to decode.max_input_len ([] for an empty text)
    numbers: list[Number]  # data.protect: the spans its placeholders stand for, restored in the output
    rules: Rules  # its prefix, glossary terms and number placeholders (nmt.inference.decoding.constraints)
    cap: int  # the most tokens its output may hold, <eos> excluded
    text: str = ""  # the sentence as the model read it (numbers and spans still as written)
    style: str = SENTENCE  # its source's case style, which its output is written in
    cut: bool = False  # its source was longer than decode.max_input_len: the model read its first tokens


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
    warnings: tuple[str, ...] = ()  # what was cut where the user should hear of it: the source, the output at its cap

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
        output word that attended to it most (`nmt.inference.text.words.source_alignment`: what `--align`
        prints, via `nmt.inference.text.words.pharaoh`, and markup reads: the lower AER against a gold
        alignment, 48.1% against 51.4% for the default), or with `each_output_word` each output word to
        the source word its pieces attended most (`alignment`). Output words are those of `output`
        (the Translation these weights are behind), else as the pieces group (a word model's: its
        tokens); source words as the model read them. `frequent` (`Translator.frequent`): the
        run's most frequent words, which the first direction steps past (`words.past_frequent`)."""
        out_words = list(zip(output.words, output.word_pieces)) if output else words_of(self.tgt_tokens)
        if each_output_word:
            return alignment(self.weights, words_of(self.src_tokens), out_words)
        return source_alignment(self.weights, words_of(self.src_tokens), out_words, frequent)


def best_of(hyps: Sequence[Translation]) -> Translation:
    """The first (best) of an n-best list; an empty one (an empty input's) gives an empty Translation."""
    return hyps[0] if hyps else Translation("", "", math.nan, [])
