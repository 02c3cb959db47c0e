"""From the model's pieces to the words a person reads: word scores and word alignments.

A subword model's pieces group into words at SentencePiece's word-start mark "▁" (a word is
its pieces, "▁J" "'" "ai" is J'ai), the groups a word model's tokens are one each. A word's
score joins its pieces' log-probabilities by `WORD_SCORE` (the lowest: a word is as doubtful
as its most doubtful piece; measured against the
mean: ROC AUC 0.809 against 0.798 for finding output words that are in no reference). A hard alignment takes, for each output word, the source word that holds the most
attention over its pieces (Pharaoh format: "source-output" word indices, from 0); markup's,
for each source word, the output word that attended to it most, one word on where that is a
frequent word written just before the source word's translation (`FrequentWords`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

from nmt.data.tokenizer import TOKENIZER, WORD_START

FREQUENT_TOP = 60  # the words a side's training split writes most: its articles, prepositions, auxiliaries
STEP_ATTENTION = 0.5  # the next word reads the source word at least half as much as the frequent one


def word_groups(pieces: Sequence[str], subword: bool) -> list[list[int]]:
    """The indices of the pieces of each word, in order; pieces that spell nothing (a lone "▁",
    <eos>) join no word. A word model's tokens are words of their own."""
    if not subword:
        return [[i] for i, piece in enumerate(pieces) if piece != "<eos>"]
    groups: list[list[int]] = []
    for i, piece in enumerate(pieces):
        if piece == "<eos>":
            continue
        if piece.startswith(WORD_START) or not groups:
            groups.append([])
        if piece.strip(WORD_START):
            groups[-1].append(i)
    return [g for g in groups if g]


def is_subword(pieces: Sequence[str]) -> bool:
    """SentencePiece starts every sentence with a word-start mark; a word model never writes one."""
    return any(p.startswith(WORD_START) for p in pieces)


def words_of(pieces: Sequence[str]) -> list[tuple[str, list[int]]]:
    """Each word as the output text spells it, with the indices of its pieces; a piece that
    spells several words (a restored number: 30 000) gives each of them."""
    out = []
    for group in word_groups(pieces, is_subword(pieces)):
        for word in "".join(pieces[i] for i in group).replace(WORD_START, " ").split():
            out.append((word, group))
    return out


def text_words(text: str, tokens: Sequence[str]) -> list[tuple[str, list[int]]]:
    """A word model's output words as its text spells them (capitalized, punctuation attached:
    "je" "vois" "." is "Je vois."), each with the indices of the tokens it is made of."""
    out, i = [], 0
    for word in text.split():
        group, spelled = [], 0
        while i < len(tokens) and spelled < len(word):
            spelled += len(tokens[i])
            group.append(i)
            i += 1
        out.append((word, group))
    return out


def lowest(scores: Sequence[float]) -> float:
    return min(scores)


def mean(scores: Sequence[float]) -> float:
    return sum(scores) / len(scores)


WORD_SCORE: Callable[[Sequence[float]], float] = lowest  # how a word's pieces' scores join


def word_scores(token_scores: Sequence[float], words: Sequence[tuple[str, list[int]]],
                join: Callable[[Sequence[float]], float] = WORD_SCORE) -> list[float]:
    """Each word's score from its pieces' log-probabilities."""
    return [join([token_scores[i] for i in group]) for _, group in words]


def alignment(weights: torch.Tensor, src_words: Sequence[tuple[str, list[int]]],
              out_words: Sequence[tuple[str, list[int]]]) -> list[tuple[int, int]]:
    """Hard word alignment from attention weights (output pieces, source pieces): each output word
    to the source word with the most attention mass summed over both words' pieces (the first
    such word on a tie). Pairs of (source word, output word) indices."""
    if not src_words:
        return []
    pairs = []
    for out_index, (_, out_group) in enumerate(out_words):
        attended = weights[out_group].sum(0)
        mass = [float(attended[group].sum()) for _, group in src_words]
        pairs.append((max(range(len(mass)), key=mass.__getitem__), out_index))
    return pairs


@dataclass(frozen=True)
class FrequentWords:
    """The FREQUENT_TOP words of letters or digits each side of a run's training split holds most
    often, as the word tokenizer splits them (lowercased, punctuation apart; the run's
    training_words.tsv and target_words.tsv)."""
    source: frozenset[str]
    target: frozenset[str]

    @classmethod
    def of(cls, source: Iterable[str], target: Iterable[str], top: int = FREQUENT_TOP) -> FrequentWords:
        """From each side's words, most frequent first."""
        def first(words: Iterable[str]) -> frozenset[str]:
            kept: list[str] = []
            for word in words:
                if len(kept) == top:
                    break
                if any(c.isalnum() for c in word):
                    kept.append(word)
            return frozenset(kept)
        return cls(first(source), first(target))

    def in_source(self, word: str) -> bool:
        return _counted_in(self.source, word)

    def in_target(self, word: str) -> bool:
        return _counted_in(self.target, word)


def _counted_in(words: frozenset[str], word: str) -> bool:
    """Whether a written word ("Les", "l'homme", "file.") is one of `words`: all of its tokens are."""
    tokens = [t for t in TOKENIZER.tokenize(word) if any(c.isalnum() for c in t)]
    return bool(tokens) and all(t in words for t in tokens)


def source_alignment(weights: torch.Tensor, src_words: Sequence[tuple[str, list[int]]],
                     out_words: Sequence[tuple[str, list[int]]],
                     frequent: FrequentWords | None = None) -> list[tuple[int, int]]:
    """Each source word to the output word that gave it the most attention
    (mean over the output word's pieces), a word of letters or digits where the output has one.
    What `--align` prints and markup transfer reads (nmt.inference.text.markup): the lower AER against
    a gold Hansards alignment (48.1% against 51.4%, the default), and on fra-eng's test split it put tags
    around the right words 66% of the time against `alignment`'s 22%, which lets one source word
    collect output words from anywhere in the sentence (scripts/experiments/markup_placement.py).
    With `frequent`, a word that is not frequent itself moves one word on from a frequent output
    word to the next (`past_frequent`)."""
    content = [i for i, (word, _) in enumerate(out_words) if any(c.isalnum() for c in word)]
    candidates = content or list(range(len(out_words)))
    if not src_words or not candidates:
        return []
    mass = word_mass(weights, src_words, out_words)[candidates]  # (candidates, source words)
    chosen = mass.argmax(0).tolist()
    if frequent is not None:  # which output words are frequent: read once a sentence, not once a source word
        common = [frequent.in_target(out_words[c][0]) for c in candidates]
        chosen = [best if frequent.in_source(src_words[s][0]) else past_frequent(s, best, mass, candidates, common)
                  for s, best in enumerate(chosen)]
    return [(s, candidates[best]) for s, best in enumerate(chosen)]


def past_frequent(source: int, best: int, mass: torch.Tensor, candidates: Sequence[int], common: Sequence[bool]
                  ) -> int:
    """The candidate a source word that is not frequent itself aligns to: `best`, or the next
    output word where `best` is a frequent target word (`common`: an article, an auxiliary) written
    just before the next, which is not frequent and reads the source word at least STEP_ATTENTION as
    much. The decoder attends to a word as it writes what comes before its translation
    (`<b>Koalas</b>` -> `<b>Les</b> koalas`): most misplaced tags sat one word early."""
    after = best + 1
    if (after < len(candidates) and candidates[after] == candidates[best] + 1 and common[best] and not common[after]
            and float(mass[after, source]) >= STEP_ATTENTION * float(mass[best, source])):
        return after
    return best


def word_mass(weights: torch.Tensor, src_words: Sequence[tuple[str, list[int]]],
              out_words: Sequence[tuple[str, list[int]]]) -> torch.Tensor:
    """The attention between words (output words, source words): the mean over an output word's
    pieces of the weights summed over each source word's pieces (each row sums to 1)."""
    mass = torch.stack([weights[group].mean(0) for _, group in out_words])  # (output words, source pieces)
    return torch.stack([mass[:, group].sum(1) for _, group in src_words], 1)


def pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """Alignments as fast_align, fairseq and Marian print them: "0-0 1-2 ..."."""
    return " ".join(f"{s}-{t}" for s, t in pairs)
