"""Steering a search toward the terms a sentence owes: glossary terms (`nmt.inference.text.glossary`)
and, under decode.strict_numbers, its number placeholders (`nmt.inference.text.terms`: each a term
of one token).

The road decodes a batch with the beam its rules ask for (`beam_for`) and, where a sentence owes
terms, this steering as the search's hooks (`steering_for`, `nmt.inference.decoding.policies.Hooks`),
so that the search itself names no feature. A search's step asks its `Steering` twice. Before the model runs (`reading`): a hypothesis that has
written a glossary term reads the term's source words no more, its row's attention mask leaves
them out (`TermRules.covered`). After (`steered`): a hypothesis that would end, or close its sentence,
while it owes a term writes what it owes instead (`_ending_as_owed`); a glossary term is due where
a hypothesis attends most to its source words (`TermRules.read`), and there one hypothesis (greedy
search, sampling) writes it at once, while a beam keeps both the hypothesis that writes it and its
twin, which writes the model's own word, and drops the twin at its next step if that word was the
translation of the term's source words (`_dropped`), crediting the term part of that word's score
(`TERM_CREDIT`, `_credited`). Scores are otherwise the model's own log-probabilities, whatever the
mask did to the ranking. `marks` records on each new hypothesis what the next step reads of it.

With a beam, sentences with terms are searched by `ConstrainedBeam` (dynamic beam allocation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from nmt.inference.decoding.constraints import Progress, Rules, Step
from nmt.inference.decoding.policies import Beam, Candidate, Hooks, Live, Steer, Turn, advanced
from nmt.inference.text.terms import TermProgress, TermRules
from nmt.model.attention import sequence_mask

# A glossary term written where it was due, whose twin (the same hypothesis writing the model's own
# best token there) then showed that token to be the translation of the term's source words, is
# credited this share of what the model's token scored above the term's first piece: the term took
# that word's place, and the model's low opinion of a word it would not pick should not send the term
# to a worse place (`J'ai clebs mon avis.` for `J'ai perdu mon clebs.`). Not all of it: the term's own
# score also says how it fits the words before it (`Elle oublié` where the model wrote `Elle oublia`),
# and the whole of that score cost test BLEU where the two were measured against each other
TERM_CREDIT = 0.5


@dataclass(frozen=True)
class TermMarks:
    """What the steering keeps of a hypothesis: the glossary terms due at its last step that its
    token did not begin; where its last step had a term due, the hypothesis it grew from; and, if it
    began a due term there, TERM_CREDIT of what the model's best token scored above it."""
    reading: frozenset[int] = frozenset()
    parent: Live | None = None
    credit: float = 0.0


NO_MARKS = TermMarks()


def marks_of(hyp: Live) -> TermMarks:
    return hyp.marks or NO_MARKS


class Steering(Hooks):
    """One search's steering: its sentences' rules, their source lengths (`lens`, the padded
    `src_len`), k hypotheses a sentence, each sentence's live hypotheses (the search's own list,
    which it updates in place); between the two calls of a step, what the second found (each owing
    row's due terms, `reads`; the model's likeliest token's log-prob, `bests`) for `marks`."""

    def __init__(self, rules: list[Rules], lens: list[int], src_len: int, k: int, live: list[list[Live]],
                 device: torch.device):
        self.rules, self.lens, self.src_len, self.k, self.live, self.device = rules, lens, src_len, k, live, device
        self.covering = any(r.terms and r.sources for r in rules)  # glossary terms with known source words
        self.masked = False  # a row's mask leaves source words out
        self.owed: torch.Tensor | None = None  # (rows, c): the step's candidates that rows owe
        self.reads: dict[int, frozenset[int]] = {}
        self.bests: list[float] | None = None

    def reading(self, state, alive: list[int]):
        """The decoder state reading, in each row, the source words its hypothesis has not covered
        (`alive`: the sentence of each group of k rows)."""
        if not self.covering:
            return state
        covered = [self.rules[sent].covered(h.progress) if self.rules[sent].terms else frozenset()
                   for sent in alive for h in self.live[sent]]
        if self.masked or any(covered):
            row_lens = [self.lens[sent] for sent in alive for _ in self.live[sent]]
            state, self.masked = _uncovered(state, covered, row_lens, self.src_len, self.device), any(covered)
        return state

    def steered(self, chosen: torch.Tensor, running: torch.Tensor, top: torch.Tensor, ids: torch.Tensor,
                eos: torch.Tensor, attention: torch.Tensor, steps: list[Step | None], alive: list[int]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """`chosen` (the masked log-probabilities of the candidates `ids`; `top` unmasked, `eos`
        each row's <eos>) and `running` (the hypotheses' scores) as the owed terms turn them."""
        k, live = self.k, self.live
        self.owed, self.reads, self.bests = _owed_columns(ids, steps), {}, None
        owing = [(row, step) for row, step in enumerate(steps) if step is not None and step.owed and not step.forced]
        if not owing:
            return chosen, running
        due, skipped = _due(attention, owing, self.rules, live, alive, k)
        chosen = _ending_as_owed(chosen, top, ids, eos.float(), owing, self.owed, [bool(d) and k == 1 for d in due])
        self.reads = {row: d for (row, _), d in zip(owing, due) if d}
        if k > 1 and any(skipped):
            gone = [row for (row, _), skip in zip(owing, skipped) if skip]
            chosen = _dropped(chosen, gone, running, k)
            twins = [marks_of(live[alive[row // k]][row % k]).parent for row in gone]  # (None: it wrote another token)
            running = _credited(running, live, alive, {id(parent) for parent in twins if parent is not None})
        if self.reads and k > 1:
            self.bests = top[:, 0].tolist()
        return chosen, running

    def marks(self, row: int, hyp: Live, log_prob: float, progress: TermProgress, rules: TermRules) -> TermMarks:
        """What the next step reads of the hypothesis that `hyp` (row `row`) grows into with a token of
        `log_prob`, its progress then `progress`: where terms were due, a hypothesis that begins one keeps
        its parent and the credit `_credited` may give it, and so does its twin, which wrote the row's
        likeliest token and whose next step decides that credit."""
        due = self.reads.get(row)
        if not due:
            return NO_MARKS
        left = due & rules.unbegun(progress)  # what it has not begun with this token stays due (`TermRules.read`)
        if self.bests is not None and left != due:  # it began a due term where the model would have written its best
            return TermMarks(left, hyp, TERM_CREDIT * max(0.0, self.bests[row] - log_prob))
        if self.bests is not None and log_prob == self.bests[row]:  # it wrote that best token: the twin
            return TermMarks(left, hyp)
        return TermMarks(left)


class ConstrainedBeam(Beam):
    """Beam search for sentences with terms to write (glossary terms; under strict number rules,
    the placeholders): dynamic beam allocation (Post & Vilar 2018, fairseq's
    LexicallyConstrainedBeamSearch). Each beam proposes, besides the sentence's 2k best, every
    token that advances its terms and its own best, so that a beam can begin a term that is not
    among the sentence's best; and the k places go bank by bank (`TermRules.bank`: how many term
    pieces a hypothesis has written), each bank's best first, then each one's second, and so on,
    so that hypotheses which have written more of their terms keep a place. A sentence without
    terms is searched as by `Beam`."""

    def propose(self, running: torch.Tensor, chosen: torch.Tensor, turn: Turn | None = None) -> list[list[Candidate]]:
        proposals = super().propose(running, chosen)
        k, previous, best = self.beam_size, running.tolist(), chosen.argmax(-1).tolist()
        owed_at: dict[int, list[int]] = {}  # each row's owed columns (a repeated one is -inf in `chosen`)
        for row, column in (turn.owed.nonzero().tolist() if turn.owed is not None else ()):
            owed_at.setdefault(row, []).append(column)
        asked = [(i, beam, column) for i, sent in enumerate(turn.alive) if turn.rules[sent].terms for beam in range(k)
                 if previous[i][beam] != float("-inf") and turn.steps[i * k + beam] is not None
                 for column in dict.fromkeys([best[i * k + beam], *owed_at.get(i * k + beam, ())])]
        if not asked:
            return proposals
        rows = torch.tensor([i * k + beam for i, beam, _ in asked], device=chosen.device)
        columns = torch.tensor([column for *_, column in asked], device=chosen.device)
        extra: dict[int, list[Candidate]] = {}
        for (i, beam, column), value in zip(asked, chosen[rows, columns].tolist()):  # one read, not one a pair
            if value != float("-inf"):
                extra.setdefault(i, []).append((previous[i][beam] + value, beam, column))
        out = []
        for i, found in enumerate(proposals):
            seen = {(beam, column) for _, beam, column in found} if i in extra else ()
            more = [c for c in extra.get(i, ()) if (c[1], c[2]) not in seen]
            out.append(sorted(found + more, key=lambda c: c[0], reverse=True) if more else found)
        return out

    def arrange(self, moves: list[tuple[int, int, float]], beams: list[Live], rules: Rules
                ) -> list[tuple[int, int, float, Progress]]:
        if not rules.terms:
            return super().arrange(moves, beams, rules)
        moved = advanced(moves, beams, rules)
        places, counts, banks = [], {}, {}  # (most moves leave their hypothesis's progress as it was: one bank each)
        for *_, progress in moved:
            bank = banks.get(id(progress))
            if bank is None:
                bank = banks[id(progress)] = rules.bank(progress)
            places.append((counts.get(bank, 0), -bank))
            counts[bank] = counts.get(bank, 0) + 1
        return [move for _, move in sorted(zip(places, moved), key=lambda pair: pair[0])]


def steering_for(rules: Sequence[Rules] | None) -> Steer | None:
    """The hooks a search of sentences under `rules` needs: `Steering` where one owes terms (glossary
    terms, strict numbers' placeholders), else none."""
    return Steering if rules is not None and any(r.terms for r in rules) else None


def beam_for(beam_size: int, rules: Sequence[Rules] | None) -> Beam:
    """The beam policy for sentences under `rules`: `ConstrainedBeam` where one has terms to write
    and the beam holds more than one hypothesis (greedy search takes what it chose)."""
    constrained = beam_size > 1 and rules is not None and any(r.terms for r in rules)
    return ConstrainedBeam(beam_size) if constrained else Beam(beam_size)


def _owed_columns(ids: torch.Tensor, steps: list[Step | None]) -> torch.Tensor | None:
    """(rows, c): where each row's candidate ids `ids` are tokens its step owes, for every row in
    one comparison (None: no row owes a token)."""
    owed = [s.owed_sorted if s is not None else [] for s in steps]
    width = max(map(len, owed), default=0)
    if not width:
        return None
    table = torch.tensor([row + [-1] * (width - len(row)) for row in owed], device=ids.device)
    return (ids[:, :, None] == table[:, None, :]).any(-1)


def _uncovered(state, covered: list[frozenset[int]], lens: list[int], src_len: int, device: torch.device):
    """The state reading, in each row, the source positions its hypothesis has not `covered`
    (`TermRules.covered`: the source words of the glossary terms it has written); `lens` each row's
    source length. Built whole from the lengths: beams trade rows, and a row's mask is its hypothesis's."""
    mask = sequence_mask(torch.tensor(lens), src_len)  # as `Seq2Seq.encode` builds it
    rows = [row for row, where in enumerate(covered) for _ in where]
    mask[rows, [position for where in covered for position in where]] = False  # every row at once
    return state.reading(mask.to(device))


def _due(attention: torch.Tensor, owing: list[tuple[int, Step]], rules: list[Rules], live: list[list[Live]],
         alive: list[int], k: int) -> tuple[list[frozenset[int]], list[bool]]:
    """Per owing row, the glossary terms due there (`TermRules.read`: it attends most to their source
    words), and whether it skipped one: a term due at its last step that it did not begin, whose
    words it no longer reads (so the word it wrote was their translation, and the term belonged in
    its place). Row r is hypothesis r % k of sentence alive[r // k]."""
    if not any(rules[alive[row // k]].sources for row, _ in owing):
        return [frozenset()] * len(owing), [False] * len(owing)
    at = attention.argmax(-1).tolist()
    due, skipped = [], []
    for row, _ in owing:
        rule, hyp = rules[alive[row // k]], live[alive[row // k]][row % k]
        due.append(rule.read(hyp.progress, at[row]))
        skipped.append(bool(marks_of(hyp).reading - due[-1]))
    return due, skipped


def _credited(running: torch.Tensor, live: list[list[Live]], alive: list[int], confirmed: set[int]) -> torch.Tensor:
    """`running` with each hypothesis's `credit` added where the twin it was made beside (the same
    parent, which wrote the model's own token where the term was due) has just shown that token to be
    the translation of the term's source words (its attention left them: `_due`'s skipped): the term
    took that word's place, so it is scored partly as that word was (TERM_CREDIT). Where the twin still
    reads them (its token was an article or an auxiliary: `J'ai` before `dormi`), or was not kept,
    the term keeps its own score."""
    rows = [(i, beam, marks.credit) for i, sent in enumerate(alive) for beam, h in enumerate(live[sent])
            if (marks := marks_of(h)).credit and id(marks.parent) in confirmed]
    if not rows:
        return running
    running = running.clone()
    for i, beam, credit in rows:
        running[i, beam] += credit
    return running


def _dropped(chosen: torch.Tensor, rows: list[int], running: torch.Tensor, k: int) -> torch.Tensor:
    """`chosen` with nothing left to the `rows` (those hypotheses end here), unless they are all
    of their sentence's live hypotheses: a sentence keeps one at least."""
    live = (running.view(-1) != float("-inf")).tolist()
    by_sentence: dict[int, list[int]] = {}
    for row in rows:
        by_sentence.setdefault(row // k, []).append(row)
    drop = [row for sent, found in by_sentence.items()
            if any(live[r] and r not in found for r in range(sent * k, sent * k + k)) for row in found]
    if not drop:
        return chosen
    chosen = chosen.clone()
    chosen[torch.tensor(drop, device=chosen.device)] = float("-inf")
    return chosen


def _ending_as_owed(chosen: torch.Tensor, top: torch.Tensor, ids: torch.Tensor, eos: torch.Tensor,
                    owing: list[tuple[int, Step]], owed: torch.Tensor, due: list[bool]) -> torch.Tensor:
    """Each owing row's best owed token (`owed`: `_owed_columns`) ranked as its <eos> would have
    been, if that was higher: a hypothesis about to stop writes what it owes instead (its score stays
    its own). A row whose likeliest token (`top`: the candidates unmasked) would close its sentence
    while it owes a glossary term (`Step.closing`) or end it writes only what it owes: the term goes
    where the sentence would have ended, not into words made up to put off the end; and so does a
    row whose term is `due` (its attention on the term's source words; asked only where a sentence
    keeps one hypothesis): the term takes the place of the word the model would write for them. All
    owing rows at once: a step of beam 5 over a batch holds hundreds."""
    rows = torch.tensor([row for row, _ in owing], device=chosen.device)
    only_owed = chosen[rows].masked_fill(~owed[rows], float("-inf"))
    best_score, best_column = top[rows].max(-1)
    likeliest = ids[rows].gather(1, best_column[:, None]).squeeze(1).tolist()
    ends = (eos[rows] >= best_score).tolist()
    closing = torch.tensor([here or bool(step.closing) and (end or token in step.closing)
                            for (_, step), end, token, here in zip(owing, ends, likeliest, due)], device=chosen.device)
    raised = chosen[rows]
    best = only_owed.argmax(-1, keepdim=True)
    raised.scatter_(1, best, torch.maximum(raised.gather(1, best), eos[rows][:, None]))
    chosen = chosen.clone()
    chosen[rows] = torch.where(closing[:, None], only_owed, raised)
    return chosen
