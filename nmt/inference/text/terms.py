"""Terms an output must write, as rules the search obeys: glossary terms and, under
decode.strict_numbers, each of a sentence's number placeholders (a one-token term). `TermRules` are
`Rules` (nmt.inference.decoding.constraints) with terms: each must appear whole somewhere, and a
hypothesis may not end (<eos>) while it owes one; with `room` tokens left before its cap, a
hypothesis that owes terms writes only what keeps them within reach once a token that broke off a
term under way could leave too little room.

Glossary terms are words in a sentence, and two rules keep them so (`Pieces` says which target
tokens the rules name): a term is written whole, so the token after its last piece may not continue
the word (`Pieces.glued`); and a hypothesis that owes a glossary term may not close the source's
last sentence (`Pieces.closers`), so a term is placed inside the sentence, never in a second one
made up to hold it: a hypothesis whose likeliest token would close the sentence (or end it) while
it owes a glossary term writes what it owes there (`Step.closing`, `nmt.inference.text.steering`).
A term that begins with a vowel may follow an elided word (French "l'", "d'"; Italian "dell'"),
and there it is written glued to the apostrophe, as the target's tokenizer writes it after one
(`TermRules.elided`): "l'aéronef", not "l' aéronef".
And a glossary term goes where its source words are translated (`TermRules.sources`), not beside the
word the model writes for them: where a hypothesis that owes one attends most to those words
(`TermRules.read`), the term is due. Beam search then keeps both the hypothesis that writes the term
there and the one that writes the model's own word, and drops the second at its next step if its
attention has left the words (the word it wrote was their translation: the term belonged in its
place) but not if it still reads them (it wrote an article or an auxiliary first: "J'ai" before
"dormi"); greedy search and sampling, which keep one hypothesis, write the term at once
(`nmt.inference.text.steering`). Once begun, a glossary term is written to its end; and once written, its source
words are translated: the hypothesis's attention no longer reads them (`TermRules.covered`), so the
model does not write its usual word for them after the term.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from nmt.data.protected_numbers import SpanRule
from nmt.inference.decoding.constraints import NO_RULES, Progress, Rules, Step


@dataclass(frozen=True)
class TermProgress(Progress):
    """What a hypothesis has written of its sentence's terms, besides its once-only tokens."""
    met: frozenset[int] = frozenset()  # terms written whole
    begun: frozenset[tuple[int, int]] = frozenset()  # (term, pieces written) of terms under way
    after_term: bool = False  # the last token completed a glossary term: the next starts a new word
    closed: int = 0  # sentence closers written
    elided: bool = False  # the last token ends in an apostrophe (only told where a term has an elided form)


@dataclass(frozen=True)
class Pieces:
    """What the glossary's rules need to know of the target vocabulary: the tokens that continue the
    word before them (a subword piece without its word-start mark), those that close a sentence and
    those after which a word is written glued to them (a piece ending in an apostrophe: "l'")."""
    glued: frozenset[int] = frozenset()
    closers: frozenset[int] = frozenset()
    elisions: frozenset[int] = frozenset()


@dataclass(frozen=True)
class TermForms:
    """Every way a sentence's terms may be written: each as given (form i for term i), then each
    glossary term as written glued after an apostrophe (form len(terms) + i; empty where it has none)."""
    terms: tuple[tuple[int, ...], ...]
    elided: tuple[tuple[int, ...], ...] = ()

    @cached_property
    def tokens(self) -> tuple[tuple[int, ...], ...]:
        """Each form's tokens."""
        return self.terms + self.elided

    @cached_property
    def term_of(self) -> tuple[int, ...]:
        """The term each form writes."""
        return tuple(range(len(self.terms))) + tuple(range(len(self.elided)))

    @cached_property
    def lengths(self) -> tuple[tuple[int, ...], ...]:
        """Each term's lengths in pieces: as given, and elided where it has that form."""
        return tuple((len(t), len(self.elided[i])) if i < len(self.elided) and self.elided[i] else (len(t),)
                     for i, t in enumerate(self.terms))

    def start(self, term: int, after_apostrophe: bool) -> int:
        """The form in which `term` may begin: elided right after an apostrophe where it has that
        form, else as given."""
        if after_apostrophe and term < len(self.elided) and self.elided[term]:
            return len(self.terms) + term
        return term


@dataclass(frozen=True)
class TermRules(Rules):
    terms: tuple[tuple[int, ...], ...] = ()  # type: ignore[misc]
    words: int = 0  # the first `words` terms are glossary terms: whole words, inside the sentence
    pieces: Pieces = Pieces()
    closes: int = 0  # the closers an output may write while it owes a glossary term: the source's, less one
    sources: tuple[frozenset[int], ...] = ()  # each glossary term's source positions (empty: not known)
    elided: tuple[tuple[int, ...], ...] = ()  # each glossary term as written after an elision (empty: not so)
    # (a term under way is (form, pieces written) of `_forms`: the terms as given, then the elided ones)

    def start(self) -> TermProgress:
        return TermProgress()

    @property
    def least_length(self) -> int:
        """The fewest tokens an output obeying these rules can hold: the length cap's floor."""
        if not self.terms:  # nearly every sentence: its term forms are not worth making
            return len(self.prefix)
        return len(self.prefix) + sum(map(min, self._forms.lengths))

    def advance(self, progress: TermProgress, token: int) -> TermProgress:
        """`progress` after writing `token`. A term under way that `token` does not continue starts over."""
        if token not in self._term_tokens:  # most tokens of a search: no term moves, those under way start over
            used = progress.used | {token} if token in self.once else progress.used
            closed = progress.closed + (token in self.pieces.closers)
            elided = token in self._elisions
            if (not progress.begun and not progress.after_term and used is progress.used
                    and closed == progress.closed and elided == progress.elided):
                return progress
            return TermProgress(used, progress.met, frozenset(), False, closed, elided)
        key = (progress, token)  # a term's token: the walk below, once for each progress it meets
        if (known := self._advanced.get(key)) is None:
            known = self._advanced[key] = self._term_advance(progress, token)
        return known

    def _term_advance(self, progress: TermProgress, token: int) -> TermProgress:
        met, begun, before = set(progress.met), set(), progress.met
        forms = self._forms
        under_way = progress.begun | {(forms.start(term, progress.elided), 0) for term in range(len(self.terms))
                                      if term not in progress.met}
        for form, done in under_way:
            term, tokens = forms.term_of[form], forms.tokens[form]
            if term not in met and tokens[done] == token:
                if done + 1 == len(tokens):
                    met.add(term)
                else:
                    begun.add((form, done + 1))
        used = progress.used | {token} if token in self.once else progress.used
        after_term = any(term < self.words for term in met.difference(before))
        closed = progress.closed + (token in self.pieces.closers)
        elided = token in self._elisions
        return TermProgress(used, frozenset(met), frozenset((f, d) for f, d in begun if forms.term_of[f] not in met),
                            after_term, closed, elided)

    def unbegun(self, progress: TermProgress) -> frozenset[int]:
        """The glossary terms with known source words that a hypothesis owes and has not begun."""
        begun = {self._forms.term_of[form] for form, _ in progress.begun}
        return frozenset(term for term in range(len(self.sources)) if term not in progress.met and term not in begun)

    def read(self, progress: TermProgress, position: int) -> frozenset[int]:
        """The terms it owes and has not begun whose source words include `position`, the source
        position a hypothesis attends to most: each is due there."""
        return frozenset(term for term in self.unbegun(progress) if position in self.sources[term])

    def covered(self, progress: TermProgress) -> frozenset[int]:
        """The source positions of the glossary terms a hypothesis has written: translated, so its
        attention reads them no more."""
        if not self.sources or not progress.met:
            return frozenset()
        if (known := self._covered.get(progress.met)) is None:  # asked of every hypothesis at every step
            known = self._covered[progress.met] = frozenset(
                p for term in progress.met if term < len(self.sources) for p in self.sources[term])
        return known

    def needed(self, progress: TermProgress, credit: bool = True) -> int:
        """Tokens enough to write every term not yet written, one after the other: their lengths, less
        the pieces written of the furthest term under way (`credit`; without it, as if that were lost)."""
        total = sum(max(lengths) for i, lengths in enumerate(self._forms.lengths) if i not in progress.met)
        return total - max((done for _, done in progress.begun), default=0) if credit else total

    def owed(self, progress: TermProgress) -> frozenset[int]:
        """The tokens that would advance a term not yet written: its next piece, or a new start."""
        forms = self._forms
        starts = {forms.tokens[forms.start(i, progress.elided)][0] for i in range(len(self.terms))
                  if i not in progress.met}
        return frozenset(starts | {forms.tokens[form][done] for form, done in progress.begun})

    def bank(self, progress: TermProgress) -> int:
        """How many term pieces a hypothesis has written toward its terms: beam search keeps
        hypotheses of every bank (dynamic beam allocation), so that those which have begun or met
        terms are not all pushed out by those which have not."""
        return sum(len(self.terms[t]) for t in progress.met) + sum(
            max((d for f, d in progress.begun if self._forms.term_of[f] == term), default=0)
            for term in range(len(self.terms)) if term not in progress.met)

    def step(self, progress: TermProgress, written: int, room: int, eos_id: int) -> Step | None:
        """The step's rules for a hypothesis that has `written` tokens and `room` left before its cap
        (None: nothing forced or refused, the common case, which costs search nothing)."""
        if (forced := self.forced(written, room, eos_id)) is not None:
            return forced
        if len(progress.met) == len(self.terms) and not progress.used and not progress.after_term:
            return self._unconstrained  # owes nothing, has used nothing: the common case, at no cost
        # The step depends on the room only when it is tight: one Step for each progress otherwise
        # (a beam's hypotheses share a few progresses, and a step after a term unites ~2,000 tokens).
        key = (progress, eos_id, room if room - 1 < self.needed(progress, credit=False) else None)
        if (known := self._steps.get(key)) is None:
            known = self._steps[key] = self._step(progress, room, eos_id)
        return known

    def _step(self, progress: TermProgress, room: int, eos_id: int) -> Step:
        owed = self.owed(progress) if len(progress.met) < len(self.terms) else frozenset()
        refused = self.refused | (self.once & progress.used)
        if progress.after_term:  # (the glued set itself where nothing else is refused: one object that
            # every sentence's step shares, which `allowed` groups rows by without comparing thousands of ids)
            refused = refused | self.pieces.glued if refused else self.pieces.glued
        if not owed:
            return Step(None, refused, owed)
        forced, closing = None, frozenset()
        if room - 1 < self.needed(progress, credit=False):  # a token that broke a term off might not leave room
            forced = frozenset(t for t in owed if self.needed(self.advance(progress, t)) <= room - 1) or owed
        if under_way := frozenset(self._forms.tokens[form][done] for form, done in progress.begun
                                  if self._forms.term_of[form] < self.words):
            forced = under_way  # a glossary word begun is finished: its first piece alone is no word
        if progress.closed >= self.closes and any(t not in progress.met for t in range(self.words)):
            closing = self.pieces.closers - owed
        return Step(forced, refused | closing | {eos_id}, owed, closing)

    @cached_property
    def _covered(self) -> dict[frozenset[int], frozenset[int]]:
        return {}

    @cached_property
    def _advanced(self) -> dict[tuple[TermProgress, int], TermProgress]:
        return {}

    @cached_property
    def _elisions(self) -> frozenset[int]:
        """The pieces ending in an apostrophe, where a term has a form written after one (else none:
        what a hypothesis writes before a term then changes nothing)."""
        return self.pieces.elisions if self.elided else frozenset()

    @cached_property
    def _forms(self) -> TermForms:
        return TermForms(self.terms, self.elided)

    @cached_property
    def _term_tokens(self) -> frozenset[int]:
        """Every token of every term: a token outside them moves no term on."""
        return frozenset(token for form in self._forms.tokens for token in form)


def sentence_rules(spans: SpanRule | None, sentence: int, prefix: Sequence[int] = (),
                   terms: Sequence[Sequence[int]] = (), pieces: Pieces = Pieces(), closes: int = 0,
                   sources: Sequence[Iterable[int]] = (), elided: Sequence[Sequence[int]] = (),
                   length_penalty: float | None = None) -> Rules:
    """One sentence's rules: its prefix, its glossary terms (target ids: whole words of `pieces`,
    placed before the last of its source's closes + 1 sentences, where attention reads their
    `sources` positions, if known; written in their `elided` form, where one is given, right after
    an apostrophe; the sentence's outputs then ranked by their own `length_penalty`, if given) and
    its numbers: its own
    placeholders at most once (strict: each a term it must write, and no digit of its own), no
    other sentence's."""
    own = spans.own(sentence) if spans is not None else []
    placeholders = [(t,) for t in own] if spans is not None and spans.strict else []
    refused = frozenset(spans.ids).difference(own) | spans.digits if spans is not None else frozenset()
    if not (prefix or terms or own or refused):
        return NO_RULES
    if not (terms or placeholders):
        return Rules(tuple(prefix), frozenset(own), refused)
    elided = tuple(tuple(form) for form in elided)[:len(terms)] if any(elided) else ()
    return TermRules(tuple(prefix), frozenset(own), refused, length_penalty if terms else None,
                     tuple(tuple(t) for t in terms) + tuple(placeholders), len(terms), pieces, closes,
                     tuple(frozenset(where) for where in sources)[:len(terms)], elided)
