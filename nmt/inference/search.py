"""Decoding: one search over many sentences at once; greedy, beam and sampling are its policies.

Every sentence holds up to k live hypotheses (k = 1 for greedy search and sampling), and each
step runs the model once for all of them. The step's constraints (`nmt.inference.constraints`:
prefixes, number placeholders, glossary terms, the length cap) are applied as a mask over the
model's log-probabilities; the policy then proposes each sentence's continuations (`Beam`: the 2k
best of its beams; `ConstrainedBeam`: those and what advances each beam's terms;
`nmt.inference.sampling.Draw`: one drawn per hypothesis), and the search keeps them in the
policy's order: an <eos> among a sentence's k first ends a hypothesis, the others live on, up to k.
A hypothesis that has written a glossary term reads the term's source words no more: its row's
attention mask leaves them out (`Rules.covered`).
Scores are the model's own log-probabilities, whatever the mask did to the ranking, but for one
credit: a glossary term written in the place of the model's own word for its source words is
credited part of that word's score (`TERM_CREDIT`, `_credited`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from nmt.inference.constraints import NO_RULES, Progress, Rules, Step, allowed
from nmt.model import Seq2Seq
from nmt.model.attention import sequence_mask

# Room a step's candidates keep for refused tokens: the number rules refuse a few dozen (digits, other
# sentences' placeholders), all within it; after a glossary term every piece that continues a word is
# refused (thousands), and ranking that many would cost more than the whole search: the best 2k + 64
# tokens hold word starts and punctuation enough
REFUSED_ROOM = 64
# A glossary term written where it was due, whose twin (the same hypothesis writing the model's own
# best token there) then showed that token to be the translation of the term's source words, is
# credited this share of what the model's token scored above the term's first piece: the term took
# that word's place, and the model's low opinion of a word it would not pick should not send the term
# to a worse place (`J'ai clebs mon avis.` for `J'ai perdu mon clebs.`). Not all of it: the term's own
# score also says how it fits the words before it (`Elle oublié` where the model wrote `Elle oublia`).
# 0.5 kept #65's test level (1.0 cost it 0.66 BLEU) and gained 4.4 BLEU on fra-eng's user-style list
TERM_CREDIT = 0.5
Candidate = tuple[float, int, int]  # (the score the policy ranks by, beam within its sentence, column)


@dataclass(frozen=True)
class Hypothesis:
    tokens: list[int]  # without <bos>/<eos>
    score: float  # summed log-probability, <eos> included
    normalized: float  # score / length^length_penalty: what the beams are ranked by at the end
    token_scores: list[float] = field(default_factory=list)  # each token's log-probability, <eos> last


def hypothesis(tokens: list[int], score: float, length_penalty: float,
               token_scores: list[float] | None = None) -> Hypothesis:
    """A finished output with its score divided by its length^length_penalty, <eos> counted."""
    return Hypothesis(tokens, score, score / float(len(tokens) + 1) ** length_penalty, token_scores or [])


@dataclass(frozen=True)
class Specials:
    """The target ids a search treats apart: `bos` starts every output, `eos` ends it and `banned`
    is never written (a subword model's <unk>; None: none)."""
    bos: int
    eos: int
    banned: int | None = None


@dataclass(frozen=True)
class Sources:
    """A batch of sources as a search reads it: `ids` (batch, src_len) padded, `lens` (batch,),
    `caps` (batch,) the most tokens each output may hold, <eos> excluded (raised where a sentence's
    rules need more), and each sentence's `rules` (None: none)."""
    ids: torch.Tensor
    lens: torch.Tensor
    caps: torch.Tensor
    rules: Sequence[Rules] | None = None

    def repeated(self, n: int) -> Sources:
        """Each source n times in a row."""
        rows = torch.arange(self.ids.shape[0], device=self.ids.device).repeat_interleave(n)
        rules = None if self.rules is None else [r for r in self.rules for _ in range(n)]
        return Sources(self.ids[rows], self.lens[rows], self.caps[rows], rules)


@dataclass
class Turn:
    """What a step of the search holds beyond the scores, for a policy that reads the rules: the
    candidates' token ids (n * k, c), each row's `Step`, the sentence of each group of k rows,
    every sentence's rules and where each row's candidates are tokens it owes (`_owed_columns`)."""
    ids: torch.Tensor
    steps: list[Step | None]
    alive: list[int]
    rules: Sequence[Rules]
    owed: torch.Tensor | None = None


class Policy(Protocol):
    beam_size: int  # live hypotheses a sentence keeps

    def width(self) -> int | None:
        """How many candidates of each hypothesis a step needs, best first (None: every token, in
        vocabulary order); search adds room for the tokens the rules may refuse."""

    def propose(self, running: torch.Tensor, chosen: torch.Tensor, turn: Turn) -> list[list[Candidate]]:
        """Each sentence's continuations, best first: running (n, k) the live hypotheses' scores
        (-inf: none), chosen (n * k, c) their candidates' masked log-probabilities."""

    def arrange(self, moves: list[tuple[int, int, float]], beams: list[_Live], rules: Rules
                ) -> list[tuple[int, int, float, Progress]]:
        """A sentence's continuations that do not end, as (beam, token, log-prob, the hypothesis's
        progress after the token), in the order in which they take its k places (the first k at least)."""


class Beam:
    """Beam search: each sentence keeps its k best hypotheses (k = 1: greedy search)."""

    def __init__(self, beam_size: int):
        self.beam_size = beam_size
        self.candidates = 2 * beam_size  # an <eos> among the k best ends a hypothesis; k others live on

    def width(self) -> int:
        return self.candidates

    def propose(self, running: torch.Tensor, chosen: torch.Tensor, turn: Turn | None = None) -> list[list[Candidate]]:
        n, k = running.shape
        columns = chosen.shape[-1]
        total = (running[:, :, None] + chosen.view(n, k, columns)).view(n, -1)
        top, index = total.topk(min(self.candidates, k * columns), dim=-1)
        return [[(s, i // columns, i % columns) for s, i in zip(scores, indices) if s != float("-inf")]
                for scores, indices in zip(top.tolist(), index.tolist())]

    def arrange(self, moves: list[tuple[int, int, float]], beams: list[_Live], rules: Rules
                ) -> list[tuple[int, int, float, Progress]]:
        return advanced(moves[:self.beam_size], beams, rules)  # best first


class ConstrainedBeam(Beam):
    """Beam search for sentences with terms to write (glossary terms; under strict number rules,
    the placeholders): dynamic beam allocation (Post & Vilar 2018, fairseq's
    LexicallyConstrainedBeamSearch). Each beam proposes, besides the sentence's 2k best, every
    token that advances its terms and its own best, so that a beam can begin a term that is not
    among the sentence's best; and the k places go bank by bank (`Rules.bank`: how many term
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

    def arrange(self, moves: list[tuple[int, int, float]], beams: list[_Live], rules: Rules
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


def advanced(moves: list[tuple[int, int, float]], beams: list[_Live], rules: Rules
             ) -> list[tuple[int, int, float, Progress]]:
    """The moves, each with its hypothesis's progress after the token (what a policy's `arrange` returns)."""
    return [(beam, token, log_prob, rules.advance(beams[beam].progress, token)) for beam, token, log_prob in moves]


def beam_for(beam_size: int, rules: Sequence[Rules] | None) -> Beam:
    """The beam policy for sentences under `rules`: `ConstrainedBeam` where one has terms to write
    and the beam holds more than one hypothesis (greedy search takes what it chose)."""
    constrained = beam_size > 1 and rules is not None and any(r.terms for r in rules)
    return ConstrainedBeam(beam_size) if constrained else Beam(beam_size)


@dataclass
class _Live:
    """One live hypothesis."""
    tokens: list[int]
    token_scores: list[float]
    progress: Progress
    reading: frozenset[int] = frozenset()  # the glossary terms due at its last step that its token did not begin
    parent: _Live | None = None  # (where its last step had a term due: the hypothesis it grew from)
    credit: float = 0.0  # it began a due term there: TERM_CREDIT of what the model's best token scored above it


@torch.inference_mode()
def search(model: Seq2Seq, sources: Sources, specials: Specials, policy: Policy, length_penalty: float = 1.0,
           nbest: int = 1) -> list[list[Hypothesis]]:
    """Up to `nbest` hypotheses of each source, best first by normalized score (score /
    length^`length_penalty`, or the sentence's own exponent where its rules hold one).

    A sentence ends once k of its hypotheses have ended, or when its hypotheses reach its cap (then
    they must end). Sentences that end leave the batch, so they cost nothing.
    """
    batch, k, device = sources.ids.shape[0], policy.beam_size, sources.ids.device
    eos_id = specials.eos
    rules = list(sources.rules) if sources.rules is not None else [NO_RULES] * batch
    caps = [max(cap, r.least_length) for cap, r in zip(sources.caps.tolist(), rules)]
    penalties = [r.ranking_penalty(length_penalty) for r in rules]
    state = model.encode(sources.ids, sources.lens).select(torch.arange(batch, device=device).repeat_interleave(k))
    running = torch.full((batch, k), float("-inf"), device=device)
    running[:, 0] = 0.0  # at first every beam holds the same <bos>: expand only one of them
    prev = torch.full((batch * k,), specials.bos, dtype=torch.long, device=device)
    live = [[_Live([], [], Progress()) for _ in range(k)] for _ in range(batch)]
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    alive = list(range(batch))  # the sentence of each group of k rows
    lens, masked = sources.lens.tolist(), False
    covering = any(r.sources for r in rules)  # glossary terms with known source words
    while alive:
        steps = [rules[sent].step(h.progress, len(h.tokens), caps[sent] - len(h.tokens), eos_id)
                 for sent in alive for h in live[sent]]
        if covering:  # once a term is written, its source words are read no more
            covered = [rules[sent].covered(h.progress) for sent in alive for h in live[sent]]
            if masked or any(covered):
                row_lens = [lens[sent] for sent in alive for _ in live[sent]]
                state, masked = _uncovered(state, covered, row_lens, sources.ids.shape[1], device), any(covered)
        width = _width(policy, steps)
        named = _named(steps, eos_id, device) if width is not None else None
        top, ids, eos, state, attention = model.candidates(prev, state, width, specials.banned, eos_id, named)
        top = top.float()
        mask = allowed(ids, steps)
        if named is not None:  # a named token already among the candidates is not proposed twice
            first = _first_of_each(ids, ids.shape[1] - named.shape[1])  # the model ranks at most its vocabulary
            mask = first if mask is None else mask & first
        chosen = top if mask is None else top.masked_fill(~mask, float("-inf"))
        owed = _owed_columns(ids, steps)
        owing = [(row, step) for row, step in enumerate(steps) if step is not None and step.owed and not step.forced]
        reads: dict[int, frozenset[int]] = {}  # the glossary terms due at each row (`_due`)
        if owing:  # an owing hypothesis's wish to end (or close its sentence) goes to the likeliest it owes
            due, skipped = _due(attention, owing, rules, live, alive, k)
            # one hypothesis (greedy search, sampling) writes a due term at once; a beam keeps both the
            # hypothesis that writes it and the one that writes its own word, and drops the second at
            # its next step if that word was the translation of the term's source words
            chosen = _ending_as_owed(chosen, top, ids, eos.float(), owing, owed, [bool(d) and k == 1 for d in due])
            reads = {row: d for (row, _), d in zip(owing, due) if d}
            if k > 1 and any(skipped):
                gone = [row for (row, _), skip in zip(owing, skipped) if skip]
                chosen = _dropped(chosen, gone, running, k)
                twins = [live[alive[row // k]][row % k].parent for row in gone]  # (None: it wrote another token)
                running = _credited(running, live, alive, {id(parent) for parent in twins if parent is not None})
        proposals = policy.propose(running, chosen, Turn(ids, steps, alive, rules, owed))
        keep, next_scores, next_rows, next_tokens = [], [], [], []
        previous = running.tolist()
        bests = top[:, 0].tolist() if reads and k > 1 else None  # (the model's likeliest token's log-prob)
        for i, (sent, moves) in enumerate(zip(alive, _resolved(proposals, top, ids, k))):
            kept, ended = _continue(moves, previous[i], live[sent], rules[sent], policy, i * k, eos_id, reads, bests)
            finished[sent].extend(hypothesis(h.tokens, score, penalties[sent], h.token_scores) for h, score in ended)
            if len(finished[sent]) >= k or not kept:
                continue  # this sentence is done
            kept += [(float("-inf"), *kept[0][1:])] * (k - len(kept))  # dead beams keep every sentence at k rows
            live[sent] = [h for _, _, _, h in kept]
            next_scores.append([s for s, _, _, _ in kept])
            next_rows.extend(row for _, row, _, _ in kept)
            next_tokens.extend(token for _, _, token, _ in kept)
            keep.append(sent)
        same_sources, alive = keep == alive, keep  # no sentence ended: beams moved within their own rows
        if alive:
            running = torch.tensor(next_scores, device=device)
            prev = torch.tensor(next_tokens, dtype=torch.long, device=device)
            if next_rows != list(range(len(steps))):  # greedy search's rows stay put until one ends
                state = state.select(torch.tensor(next_rows, device=device), same_sources)
    return [sorted(f, key=lambda h: h.normalized, reverse=True)[:nbest] for f in finished]


def _width(policy: Policy, steps: list[Step | None]) -> int | None:
    """The best candidates a step asks the model for: the policy's, and room for what the rules may
    refuse (None: every token, in vocabulary order)."""
    width = policy.width()
    if width is None:
        return None
    return width + max((min(len(s.refused), REFUSED_ROOM) for s in steps if s is not None), default=0)


def _named(steps: list[Step | None], eos_id: int, device: torch.device) -> torch.Tensor | None:
    """The tokens each row's rules name (forced or owed), wherever they rank, as further candidate
    columns (rows, m), padded with <eos>; None when no row names any."""
    named = [s.named if s is not None else [] for s in steps]
    width = max(map(len, named), default=0)
    if not width:
        return None
    return torch.tensor([row + [eos_id] * (width - len(row)) for row in named], device=device)


def _owed_columns(ids: torch.Tensor, steps: list[Step | None]) -> torch.Tensor | None:
    """(rows, c): where each row's candidate ids `ids` are tokens its step owes, for every row in
    one comparison (None: no row owes a token)."""
    owed = [s.owed_sorted if s is not None else [] for s in steps]
    width = max(map(len, owed), default=0)
    if not width:
        return None
    table = torch.tensor([row + [-1] * (width - len(row)) for row in owed], device=ids.device)
    return (ids[:, :, None] == table[:, None, :]).any(-1)


def _first_of_each(ids: torch.Tensor, ranked: int) -> torch.Tensor:
    """False at each named column (after the `ranked` first) whose token an earlier column holds."""
    keep = torch.ones_like(ids, dtype=torch.bool)
    named = ids[:, ranked:]
    earlier = torch.arange(ids.shape[1], device=ids.device)[None, :] < torch.arange(
        ranked, ids.shape[1], device=ids.device)[:, None]  # (m, columns): column c before named column j
    keep[:, ranked:] = ~((named[:, :, None] == ids[:, None, :]) & earlier[None]).any(-1)
    return keep


def _uncovered(state, covered: list[frozenset[int]], lens: list[int], src_len: int, device: torch.device):
    """The state reading, in each row, the source positions its hypothesis has not `covered`
    (`Rules.covered`: the source words of the glossary terms it has written); `lens` each row's
    source length. Built whole from the lengths: beams trade rows, and a row's mask is its hypothesis's."""
    mask = sequence_mask(torch.tensor(lens), src_len)  # as `Seq2Seq.encode` builds it
    rows = [row for row, where in enumerate(covered) for _ in where]
    mask[rows, [position for where in covered for position in where]] = False  # every row at once
    return state.reading(mask.to(device))


def _due(attention: torch.Tensor, owing: list[tuple[int, Step]], rules: list[Rules], live: list[list[_Live]],
         alive: list[int], k: int) -> tuple[list[frozenset[int]], list[bool]]:
    """Per owing row, the glossary terms due there (`Rules.read`: it attends most to their source
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
        skipped.append(bool(hyp.reading - due[-1]))
    return due, skipped


def _credited(running: torch.Tensor, live: list[list[_Live]], alive: list[int], confirmed: set[int]) -> torch.Tensor:
    """`running` with each hypothesis's `credit` added where the twin it was made beside (the same
    parent, which wrote the model's own token where the term was due) has just shown that token to be
    the translation of the term's source words (its attention left them: `_due`'s skipped): the term
    took that word's place, so it is scored partly as that word was (TERM_CREDIT). Where the twin still
    reads them (its token was an article or an auxiliary: `J'ai` before `dormi`), or was not kept,
    the term keeps its own score."""
    rows = [(i, beam, h.credit) for i, sent in enumerate(alive) for beam, h in enumerate(live[sent])
            if h.credit and id(h.parent) in confirmed]
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


def _resolved(proposals: list[list[Candidate]], top: torch.Tensor, ids: torch.Tensor, k: int
              ) -> list[list[tuple[int, int, float]]]:
    """The proposals as (beam, token, the model's own log-probability of it), read from the step's
    candidates in one gather (a whole vocabulary's rows are never copied out)."""
    rows = [i * k + beam for i, found in enumerate(proposals) for _, beam, _ in found]
    columns = [column for found in proposals for _, _, column in found]
    index = (torch.tensor(rows, device=ids.device), torch.tensor(columns, device=ids.device))
    tokens, given = ids[index].tolist(), top[index].tolist()
    out, start = [], 0
    for found in proposals:
        out.append([(beam, tokens[start + j], given[start + j]) for j, (_, beam, _) in enumerate(found)])
        start += len(found)
    return out


def _continue(moves: list[tuple[int, int, float]], previous: list[float], beams: list[_Live], rules: Rules,
              policy: Policy, first_row: int, eos_id: int, reads: dict[int, frozenset[int]] | None = None,
              bests: list[float] | None = None) -> tuple[list[tuple[float, int, int, _Live]], list[tuple[_Live, float]]]:
    """One sentence's step: from its proposed continuations, best first, as (beam, token, log-prob),
    those that end (an <eos> among the k first), with their scores, and the hypotheses that live
    on, as (running score, row, token, hypothesis), up to k, in the order the policy arranges. Where
    a row has terms due (`reads`), a hypothesis that begins one keeps its parent and the credit
    `_credited` may give it, and so does its twin, which wrote the row's likeliest token (`bests`:
    each row's likeliest token's log-probability) and whose next step decides that credit."""
    k = policy.beam_size
    ended = [(_Live(beams[beam].tokens, beams[beam].token_scores + [log_prob], beams[beam].progress),
              previous[beam] + log_prob) for beam, token, log_prob in moves[:k] if token == eos_id]
    kept = []
    for beam, token, log_prob, progress in policy.arrange([m for m in moves if m[1] != eos_id], beams, rules)[:k]:
        hyp, due = beams[beam], (reads or {}).get(first_row + beam, frozenset())
        parent, credit = None, 0.0
        if due:  # what it has not begun with this token stays due (`Rules.read` asks the same)
            left = due & rules.unbegun(progress)
            if bests is not None and left != due:  # it began a due term where the model would have written its best
                parent, credit = hyp, TERM_CREDIT * max(0.0, bests[first_row + beam] - log_prob)
            elif bests is not None and log_prob == bests[first_row + beam]:  # it wrote that best token: the twin
                parent = hyp
            due = left
        kept.append((previous[beam] + log_prob, first_row + beam, token,
                     _Live(hyp.tokens + [token], hyp.token_scores + [log_prob], progress, due, parent, credit)))
    return kept, ended


@torch.inference_mode()
def forced(model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor, specials: Specials, outputs: list[list[int]],
           scored: bool = True) -> list[tuple[list[float], torch.Tensor]]:
    """The decoder fed given outputs (from any search, or a person): per row the log-probability
    of each token, <eos> last, on the scale search scores on (`specials.banned` excluded alike), and
    the attention weights (len(output) + 1, src_len). One decoder call a step for the batch.
    Without `scored`, the weights alone (and empty score lists): no step ranks the vocabulary; from a
    model with an alignment head, its weights (`nmt.model.alignment_head`), not the attention's."""
    bos_id, eos_id = specials.bos, specials.eos
    rows, steps = len(outputs), max(len(o) for o in outputs) + 1
    target = torch.full((rows, steps), eos_id, dtype=torch.long)
    for i, output in enumerate(outputs):
        target[i, : len(output)] = torch.tensor(output, dtype=torch.long)
    target = target.to(src.device)
    if not scored and getattr(model, "alignment_head", None) is not None:  # what alignments read: one pass
        tgt_in = torch.cat((torch.full_like(target[:, :1], bos_id), target[:, :-1]), 1)
        aligned = model.aligned(src, src_lens, tgt_in, target).float().cpu()
        return [([], aligned[i, : len(o) + 1, : int(src_lens[i])]) for i, o in enumerate(outputs)]
    state = model.encode(src, src_lens)
    prev = torch.full((rows,), bos_id, dtype=torch.long, device=src.device)
    scores, weights = [], []
    for t in range(steps):
        # every token's log-probability, in vocabulary order, in either engine
        top, _, _, state, step_weights = model.candidates(prev, state, None if scored else 1, specials.banned, eos_id)
        if scored:
            scores.append(top.gather(1, target[:, t, None]).squeeze(1).float().cpu())
        weights.append(step_weights.float().cpu())
        prev = target[:, t]
    weights_by_row = torch.stack(weights, 1)
    scores_by_row = torch.stack(scores, 1).tolist() if scored else [[] for _ in outputs]
    return [(scores_by_row[i][: len(o) + 1], weights_by_row[i, : len(o) + 1, : int(src_lens[i])])
            for i, o in enumerate(outputs)]


def greedy(model: Seq2Seq, sources: Sources, specials: Specials) -> list[Hypothesis]:
    """The most likely token at each step (that the rules allow), one hypothesis per source."""
    return [hyps[0] for hyps in search(model, sources, specials, beam_for(1, sources.rules))]


def beam_search(model: Seq2Seq, sources: Sources, specials: Specials, beam_size: int, length_penalty: float = 1.0,
                nbest: int = 1) -> list[list[Hypothesis]]:
    """Batched beam search: k hypotheses for every sentence advance together, one decoder call a step."""
    return search(model, sources, specials, beam_for(beam_size, sources.rules), length_penalty, nbest)
