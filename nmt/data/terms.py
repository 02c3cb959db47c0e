"""Training with terms (data.terms): the model learns to read a term given in its source and to
place it (Dinu et al., 2019, "train by appending"; OpenNMT-py's `terminology` transform).

In a share of the training batches, a word or two of each source are followed by the target word
the aligner linked them to (`nmt.data.links`), between two marks (data.term_form: append), or
replaced by it (replace: the source word is gone, so the term is the only thing to translate it):

    ▁the ▁cat <term> ▁mat ou </term> ▁sleeps      ->      ▁le ▁mat ou ▁dort
    ▁the <term> ▁mat ou </term> ▁sleeps           ->      ▁le ▁mat ou ▁dort

The target word is given as target pieces: source ids from `len(src_vocab) + 2` on are target ids
(the two before them are the marks), which the encoder reads through the decoder's own embedding
(`Encoder.read_target_pieces`). So a term is the same vector in the source as the piece the
decoder must write, whether the model has ever written it or not, and copying it is what the
pairs teach: the annotated word is always in the target. At translation time a glossary's terms
are annotated the same way (`annotated`), and search still guarantees them.

Word links come from the piece links: a source word and a target word are a candidate when each
links to the other alone; words are pieces grouped at SentencePiece's "▁", punctuation, byte
pieces and placeholders being words of their own that are never annotated.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nmt.data.tokenizer import WORD_START, continues_word, special_piece, spells
from nmt.data.vocab import Vocab

MOST_TERMS = 2  # terms in one annotated pair: one or two, as a glossary usually matches
MIN_LETTERS = 3  # the shortest word annotated: the two-letter words are mostly function words


def word_of_each(pieces: Sequence[str], subword: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per piece, the index of its word; and per word, whether it may be annotated (it is no special
    and spells MIN_LETTERS letters or more: "le", "de", "je", "to" are not terms). A piece starts a
    word at "▁", when it or the piece before spells no letter or digit (punctuation stands alone),
    or when it is a special (<eos>, <0x41>, ⦅N1⦆); a word tokenizer's tokens are words of their own."""
    word = np.zeros(len(pieces), dtype=np.int64)
    wordlike: list[bool] = []
    letters: list[int] = []
    previous_spells = False
    for i, piece in enumerate(pieces):
        if not (subword and wordlike and previous_spells and continues_word(piece)):
            wordlike.append(spells(piece))
            letters.append(0)
        letters[-1] += 0 if special_piece(piece) else sum(c.isalpha() for c in piece)
        word[i] = len(wordlike) - 1
        previous_spells = spells(piece)
    return word, np.array(wordlike, dtype=bool) & (np.array(letters) >= MIN_LETTERS)


@dataclass(frozen=True)
class TermSlots:
    """Where annotations live among the source ids: two marks after the source vocabulary, then
    the target vocabulary; and whether an annotation follows its source words or stands in their place."""
    start: int  # <term>: len(src_vocab)
    replaces: bool = False  # data.term_form: replace

    @classmethod
    def of(cls, src_vocab: Vocab, form: str = "append") -> TermSlots:
        return cls(len(src_vocab), form == "replace")

    @property
    def end(self) -> int:  # </term>
        return self.start + 1

    @property
    def offset(self) -> int:  # target id t is source id offset + t
        return self.start + 2

    def annotation(self, target_ids: Sequence[int]) -> list[int]:
        return [self.start, *(self.offset + t for t in target_ids), self.end]


def annotated(src: Sequence[int], terms: Sequence[tuple[int, int, Sequence[int]]], slots: TermSlots
              ) -> tuple[list[int], np.ndarray]:
    """`src` with each (first, last position of its source words, target ids) of `terms` annotated,
    after those words or in their place (`slots.replaces`); and each old position's new one (the
    links of guided alignment move with them: a replaced word's to its term's first piece). Of terms
    whose words overlap, the first (the longest where two begin together) is annotated alone."""
    out, moved = [], np.empty(len(src), dtype=np.int64)
    by_first = {first: (last, ids) for first, last, ids in sorted(terms, key=lambda term: term[:2])}
    i = 0
    while i < len(src):
        last, ids = by_first.get(i, (i, None))
        if ids is not None and slots.replaces:
            moved[i:last + 1] = len(out) + 1
        else:
            moved[i:last + 1] = np.arange(len(out), len(out) + last + 1 - i)
            out.extend(src[i:last + 1])
        if ids is not None:
            out.extend(slots.annotation(ids))
        i = last + 1
    return out, moved


class TermAnnotator:
    """Annotates training pairs with terms from their links, for data.terms."""

    def __init__(self, src_vocab: Vocab, tgt_vocab: Vocab, subword: bool = True, form: str = "append"):
        self.slots = TermSlots.of(src_vocab, form)
        self.src_pieces, self.tgt_pieces, self.subword = src_vocab.itos, tgt_vocab.itos, subword

    def candidates(self, src: Sequence[int], tgt: Sequence[int], links: np.ndarray
                   ) -> list[tuple[int, int, list[int]]]:
        """(first and last position of a source word, the target ids of its word) for each pair of words
        linked to each other alone, both spelling a word (<eos> links nothing)."""
        src_words, src_ok = word_of_each([self.src_pieces[i] for i in src], self.subword)
        tgt_words, tgt_ok = word_of_each([self.tgt_pieces[i] for i in tgt], self.subword)
        links = links[(links[:, 0] < len(src) - 1) & (links[:, 1] < len(tgt) - 1)] if len(links) else links
        from_src: dict[int, set[int]] = {}
        from_tgt: dict[int, set[int]] = {}
        for s, t in {(int(src_words[s]), int(tgt_words[t])) for s, t in links}:
            from_src.setdefault(s, set()).add(t)
            from_tgt.setdefault(t, set()).add(s)
        out = []
        for s, targets in sorted(from_src.items()):
            t = min(targets)
            if len(targets) == 1 and from_tgt[t] == {s} and src_ok[s] and tgt_ok[t]:
                where = np.flatnonzero(src_words == s)
                out.append((int(where[0]), int(where[-1]), [tgt[j] for j in np.flatnonzero(tgt_words == t)]))
        return out

    def annotate(self, src: Sequence[int], tgt: Sequence[int], links: np.ndarray, rng: random.Random
                 ) -> tuple[list[int], np.ndarray] | None:
        """`src` with one or two of its candidate words annotated, and the links' source positions
        moved with it; None where it has no candidate."""
        found = self.candidates(src, tgt, links)
        if not found:
            return None
        chosen = rng.sample(found, min(len(found), rng.randint(1, MOST_TERMS)))  # (`annotated` orders them)
        ids, moved = annotated(src, chosen, self.slots)
        if not len(links):
            return ids, links
        moved_links = np.stack((moved[links[:, 0]], links[:, 1]), axis=1)
        # (a replaced word's pieces all move to one position: their links to one target piece become one)
        return ids, np.unique(moved_links, axis=0) if self.slots.replaces else moved_links


def term_spans(pieces: Sequence[str], sources: Sequence[str], subword: bool = True) -> list[tuple[int, int] | None]:
    """Where each source term is in a source of `pieces`: the first and last piece of the first
    words, not yet taken by an earlier term, that spell it (case and spaces aside); None for a
    term its words do not spell."""
    word, _ = word_of_each(pieces, subword)
    spelled = [""] * (int(word[-1]) + 1 if len(pieces) else 0)
    starts, ends = [0] * len(spelled), [0] * len(spelled)  # each word's first and last piece
    for i, (piece, w) in enumerate(zip(pieces, word.tolist())):
        if not spelled[w]:
            starts[w] = i
        spelled[w] += piece.replace(WORD_START, "").casefold()
        ends[w] = i
    out: list[tuple[int, int] | None] = []
    used = set()
    for source in sources:
        wanted, found = "".join(source.split()).casefold(), None
        for first in range(len(spelled)):
            joined, last = "", first
            while last < len(spelled) and len(joined) < len(wanted):
                joined += spelled[last]
                last += 1
            if joined == wanted and ends[last - 1] not in used:
                used.add(ends[last - 1])
                found = (starts[first], ends[last - 1])
                break
        out.append(found)
    return out
