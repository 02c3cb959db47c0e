"""Decoding: one search over many sentences at once; greedy, beam and sampling are its policies.

Every sentence holds up to k live hypotheses (k = 1 for greedy search and sampling), and each
step runs the model once for all of them. The step's rules (`nmt.inference.decoding.constraints`:
prefixes, number placeholders, the length cap; the terms an output must write are rules of their own
kind, which it asks the same questions) are applied as a mask over the model's log-probabilities, and a caller's hooks may turn the scores further (the glossary's steering
toward the terms a hypothesis owes, `nmt.inference.text.steering`: the search names no feature);
the policy then proposes each sentence's continuations (`nmt.inference.decoding.policies.Beam`: the 2k
best of its beams; `nmt.inference.decoding.sampling.Draw`: one drawn per hypothesis), and the search keeps
them in the policy's order: an <eos> among a sentence's k first ends a hypothesis, the others live
on, up to k. Scores are the model's own log-probabilities, whatever the mask did to the ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from nmt.inference.decoding.constraints import NO_RULES, Rules, Step, allowed
from nmt.inference.decoding.policies import NO_HOOKS, Candidate, Hooks, Live, Policy, Steer, Turn
from nmt.model import Seq2Seq

# Room a step's candidates keep for refused tokens: the number rules refuse a few dozen (digits, other
# sentences' placeholders), all within it; after a glossary term every piece that continues a word is
# refused (thousands), and ranking that many would cost more than the whole search: the best 2k + 64
# tokens hold word starts and punctuation enough
REFUSED_ROOM = 64


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


@torch.inference_mode()
def search(model: Seq2Seq, sources: Sources, specials: Specials, policy: Policy, length_penalty: float = 1.0,
           nbest: int = 1, steer: Steer | None = None) -> list[list[Hypothesis]]:
    """Up to `nbest` hypotheses of each source, best first by normalized score (score /
    length^`length_penalty`, or the sentence's own exponent where its rules hold one); `steer`
    makes the hooks each step calls (`policies.Hooks`; None: none).

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
    live = [[Live([], [], rules[sent].start()) for _ in range(k)] for sent in range(batch)]
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    alive = list(range(batch))  # the sentence of each group of k rows
    steering = steer(rules, sources.lens.tolist(), sources.ids.shape[1], k, live, device) if steer else NO_HOOKS
    while alive:
        steps = [rules[sent].step(h.progress, len(h.tokens), caps[sent] - len(h.tokens), eos_id)
                 for sent in alive for h in live[sent]]
        state = steering.reading(state, alive)
        width = _width(policy, steps)
        named = _named(steps, eos_id, device) if width is not None else None
        top, ids, eos, state, attention = model.candidates(prev, state, width, specials.banned, eos_id, named)
        top = top.float()
        mask = allowed(ids, steps)
        if named is not None:  # a named token already among the candidates is not proposed twice
            first = _first_of_each(ids, ids.shape[1] - named.shape[1])  # the model ranks at most its vocabulary
            mask = first if mask is None else mask & first
        chosen = top if mask is None else top.masked_fill(~mask, float("-inf"))
        chosen, running = steering.steered(chosen, running, top, ids, eos, attention, steps, alive)
        proposals = policy.propose(running, chosen, Turn(ids, steps, alive, rules, steering.owed))
        keep, next_scores, next_rows, next_tokens = [], [], [], []
        previous = running.tolist()
        for i, (sent, moves) in enumerate(zip(alive, _resolved(proposals, top, ids, k))):
            kept, ended = _continue(moves, previous[i], live[sent], rules[sent], policy, i * k, eos_id, steering)
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


def _first_of_each(ids: torch.Tensor, ranked: int) -> torch.Tensor:
    """False at each named column (after the `ranked` first) whose token an earlier column holds."""
    keep = torch.ones_like(ids, dtype=torch.bool)
    named = ids[:, ranked:]
    earlier = torch.arange(ids.shape[1], device=ids.device)[None, :] < torch.arange(
        ranked, ids.shape[1], device=ids.device)[:, None]  # (m, columns): column c before named column j
    keep[:, ranked:] = ~((named[:, :, None] == ids[:, None, :]) & earlier[None]).any(-1)
    return keep


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


def _continue(moves: list[tuple[int, int, float]], previous: list[float], beams: list[Live], rules: Rules,
              policy: Policy, first_row: int, eos_id: int, steering: Hooks
              ) -> tuple[list[tuple[float, int, int, Live]], list[tuple[Live, float]]]:
    """One sentence's step: from its proposed continuations, best first, as (beam, token, log-prob),
    those that end (an <eos> among the k first), with their scores, and the hypotheses that live
    on, as (running score, row, token, hypothesis), up to k, in the order the policy arranges."""
    k = policy.beam_size
    ended = [(Live(beams[beam].tokens, beams[beam].token_scores + [log_prob], beams[beam].progress),
              previous[beam] + log_prob) for beam, token, log_prob in moves[:k] if token == eos_id]
    kept = []
    for beam, token, log_prob, progress in policy.arrange([m for m in moves if m[1] != eos_id], beams, rules)[:k]:
        hyp, row = beams[beam], first_row + beam
        grown = Live(hyp.tokens + [token], hyp.token_scores + [log_prob], progress,
                     steering.marks(row, hyp, log_prob, progress, rules))
        kept.append((previous[beam] + log_prob, row, token, grown))
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

