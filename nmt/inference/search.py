"""Decoding: batched greedy and beam search over many sentences at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

from nmt.data.protected_numbers import SpanRule
from nmt.model import Seq2Seq

EVERY = 1 << 30  # as candidates' k: every token of the vocabulary, for the steps a prefix forces


@torch.inference_mode()
def greedy(model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor, bos_id: int, eos_id: int,
           max_lens: torch.Tensor, return_attention: bool = False, banned_id: int | None = None,
           scores: list[list[float]] | None = None, spans: SpanRule | None = None,
           prefixes: list[list[int]] | None = None, choose: Chooser | None = None
           ) -> tuple[list[list[int]], list[torch.Tensor] | None]:
    """Pick the most likely token at each step until <eos> or the row's length cap (or, with
    `choose`, the token it picks among the candidates: sampling draws one).

    src (batch, src_len), src_lens (batch,), max_lens (batch,) output caps, <eos> excluded.
    Returns the token ids of each row (no <bos>/<eos>) and, if asked, each row's attention
    weights (out_len, src_len). Finished rows leave the batch so they cost nothing.
    `banned_id` is never produced (a subword model's <unk>). A `scores` list is filled with each
    row's log-probability of every token it chose, <eos> last. `spans` holds the number rules (which
    placeholders each row may write and, strict, that it writes each and no digit of its own: the
    most likely token they allow is taken); each row's output starts with its `prefixes` tokens
    (forced, scored as the model scores them).
    """
    batch = src.shape[0]
    state = model.encode(src, src_lens)
    prev = torch.full((batch,), bos_id, dtype=torch.long, device=src.device)
    alive = torch.arange(batch, device=src.device)  # original row of each live row
    outputs: list[list[int]] = [[] for _ in range(batch)]
    attention: list[list[torch.Tensor]] = [[] for _ in range(batch)]
    max_lens = max_lens.to(src.device)
    if scores is not None:
        scores[:] = [[] for _ in range(batch)]
    max_lens = _room(max_lens, spans, prefixes)
    caps = max_lens.tolist()
    # enough candidates that one is always allowed
    width = choose.width(spans) if choose else 1 + (spans.blockable if spans else 0)
    watched = torch.tensor(sorted(_watched(spans)), dtype=torch.long, device=src.device)
    for t in range(int(max_lens.max().item()) + 1):
        rows = alive.tolist()
        forcing = prefixes is not None and any(t < len(prefixes[row]) for row in rows)
        # a row left with only enough room for its missing placeholders ranks the whole vocabulary
        placing = spans is not None and any(spans.must_place(row, outputs[row], caps[row] - t) for row in rows)
        k = EVERY if forcing or placing else width
        before = state
        top, ids, _, state, weights = model.candidates(prev, state, k, banned_id, eos_id)
        if choose is not None:
            column = choose(top, ids, rows, outputs, [caps[row] - t for row in rows], spans, prefixes)
            top, ids = top.gather(1, column), ids.gather(1, column)
        # rows whose best token the number rules watch may have to take another: only then, row by row
        elif forcing or placing or (spans and torch.isin(ids[:, 0], watched).any()):
            choice = torch.tensor([_column(ids[i], sentence, outputs[sentence], spans, prefixes, caps[sentence] - t)
                                   for i, sentence in enumerate(rows)], device=ids.device)
            top, ids = top.gather(1, choice[:, None]), ids.gather(1, choice[:, None])
        if spans is not None and spans.strict:  # <eos> before every number is written: the numbers first
            owing = {i: owed for i, (row, token) in enumerate(zip(rows, ids[:, 0].tolist()))
                     if token == eos_id and (owed := spans.missing(row, outputs[row]))}
            if owing:
                top, ids = top.clone(), ids.clone()
                for i, (score, token) in _owed_instead(model, prev, before, owing, banned_id, eos_id).items():
                    top[i, 0], ids[i, 0] = score, token
        prev = ids[:, 0]
        # A row stops at <eos>, or when it has produced its cap (the cap-th step may still say <eos>).
        done = (prev == eos_id) | (max_lens[alive] <= t)
        rows, tokens, done_list = alive.tolist(), prev.tolist(), done.tolist()
        step_scores = top[:, 0].tolist() if scores is not None else None
        for i, (row, token, finished) in enumerate(zip(rows, tokens, done_list)):
            kept = not (finished and token != eos_id)  # a token past the cap is not part of the output
            if return_attention and kept:
                attention[row].append(weights[i, : src_lens[i]].float().cpu())
            if step_scores is not None and kept:
                scores[row].append(step_scores[i])
            if not finished:
                outputs[row].append(token)
        if all(done_list):
            break
        if any(done_list):
            keep = (~done).nonzero().squeeze(1)
            state, prev, alive, src_lens = state.select(keep), prev[keep], alive[keep], src_lens[keep]
    if not return_attention:
        return outputs, None
    return outputs, [torch.stack(rows) if rows else torch.zeros(0, 0) for rows in attention]


def _owed_instead(model: Seq2Seq, prev: torch.Tensor, state, owing: dict[int, list[int]], banned_id: int | None,
                  eos_id: int) -> dict[int, tuple[float, int]]:
    """For rows that chose <eos> while placeholders of theirs are missing: the most likely of those,
    with its log-probability at this step, to write instead (the step is run again for these rows
    alone, from `state` before it, ranking the whole vocabulary)."""
    rows = torch.tensor(list(owing), device=prev.device)
    top, ids, _, _, _ = model.candidates(prev[rows], state.select(rows), EVERY, banned_id, eos_id)
    instead = {}
    for j, (i, owed) in enumerate(owing.items()):
        column = int(torch.isin(ids[j], torch.tensor(owed, device=ids.device)).nonzero()[0, 0])
        instead[i] = (float(top[j, column]), int(ids[j, column]))
    return instead


class Chooser(Protocol):
    """How a search like greedy's picks each row's next token among its candidates."""

    def width(self, spans: SpanRule | None) -> int:
        """How many candidates a step needs (EVERY: the whole vocabulary)."""

    def __call__(self, top: torch.Tensor, ids: torch.Tensor, rows: list[int], outputs: list[list[int]],
                 rooms: list[int], spans: SpanRule | None, prefixes: list[list[int]] | None) -> torch.Tensor:
        """The column (rows, 1) of each row's pick in `top`/`ids` (a prefix's token where it forces one)."""


def _column(ids: torch.Tensor, sentence: int, output: list[int], spans: SpanRule | None,
            prefixes: list[list[int]] | None, room: int) -> int:
    """Which of a row's candidate tokens `ids` greedy search takes: its prefix's next token, or
    the most likely one the number rules allow (`room`: tokens left before the row's cap)."""
    if prefixes is not None and len(output) < len(prefixes[sentence]):
        return int((ids == prefixes[sentence][len(output)]).nonzero()[0, 0])
    if spans is None:
        return 0
    return next(c for c, token in enumerate(ids.tolist()) if not spans.blocks(sentence, token, output, room))


def _watched(spans: SpanRule | None) -> set[int]:
    """The tokens the number rules may refuse: placeholders, and when strict digits."""
    return set(spans.ids) | set(spans.digits) if spans is not None else set()


def _room(max_lens: torch.Tensor, spans: SpanRule | None, prefixes: list[list[int]] | None) -> torch.Tensor:
    """Length caps with room for every placeholder a sentence must write, after its prefix."""
    if spans is None or not spans.strict:
        return max_lens
    need = torch.tensor(spans.counts) + torch.tensor([len(p) for p in prefixes] if prefixes else 0)
    return torch.maximum(max_lens, need.to(max_lens.device))


@torch.inference_mode()
def forced(model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor, bos_id: int, eos_id: int,
           outputs: list[list[int]], banned_id: int | None = None, scored: bool = True
           ) -> list[tuple[list[float], torch.Tensor]]:
    """The decoder fed given outputs (from any search, or a person): per row the log-probability
    of each token, <eos> last, on the scale search scores on (`banned_id` excluded alike), and
    the attention weights (len(output) + 1, src_len). One decoder call a step for the batch.
    Without `scored`, the weights alone (and empty score lists): no step ranks the vocabulary."""
    rows, steps = len(outputs), max(len(o) for o in outputs) + 1
    target = torch.full((rows, steps), eos_id, dtype=torch.long)
    for i, output in enumerate(outputs):
        target[i, : len(output)] = torch.tensor(output, dtype=torch.long)
    target = target.to(src.device)
    state = model.encode(src, src_lens)
    prev = torch.full((rows,), bos_id, dtype=torch.long, device=src.device)
    scores, weights = [], []
    for t in range(steps):
        # every token's log-probability: the model's k best with k the vocabulary, in either engine
        top, ids, _, state, step_weights = model.candidates(prev, state, EVERY if scored else 1, banned_id, eos_id)
        if scored:
            scores.append(top.masked_fill(ids != target[:, t, None], 0.0).sum(-1).float().cpu())
        weights.append(step_weights.float().cpu())
        prev = target[:, t]
    weights_by_row = torch.stack(weights, 1)
    scores_by_row = torch.stack(scores, 1).tolist() if scored else [[] for _ in outputs]
    return [(scores_by_row[i][: len(o) + 1], weights_by_row[i, : len(o) + 1, : int(src_lens[i])])
            for i, o in enumerate(outputs)]


@dataclass(frozen=True)
class Hypothesis:
    tokens: list[int]  # without <bos>/<eos>
    score: float  # summed log-probability, <eos> included
    normalized: float  # score / length^length_penalty: what the beams are ranked by at the end
    token_scores: list[float] = field(default_factory=list)  # each token's log-probability, <eos> last


def _length_penalty(length: int, alpha: float) -> float:
    """Divide a log-probability by length^alpha (0: raw scores, 1: per-token average)."""
    return float(length) ** alpha


def hypothesis(tokens: list[int], score: float, length_penalty: float,
               token_scores: list[float] | None = None) -> Hypothesis:
    """A finished output with its score normalized over its length, <eos> counted."""
    return Hypothesis(tokens, score, score / _length_penalty(len(tokens) + 1, length_penalty), token_scores or [])


def _expand(scores: torch.Tensor, top: torch.Tensor, ids: torch.Tensor, eos: torch.Tensor, forced: torch.Tensor,
            eos_id: int, keep: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Score the continuations of every beam and keep the `keep` best of each sentence.

    scores (n, k) running log-probs; top and ids (n*k, c) each beam's c best next tokens (c = keep,
    or the vocabulary if smaller): the `keep` best of a sentence are among them, since each is among
    the `keep` best of its own beam; eos (n*k,) the log-prob of <eos>; forced (n,) sentences at their
    length cap, which may only end. Returns candidate scores, source beams and tokens, each (n, keep).
    """
    n, k = scores.shape
    cand = scores.unsqueeze(-1) + top.view(n, k, -1)
    ids = ids.view(n, k, -1)
    if forced.any():  # a forced sentence's one continuation per beam is <eos>
        ending = (scores + eos.view(n, k)).unsqueeze(-1)
        only_eos = torch.cat((ending, torch.full_like(cand[..., 1:], float("-inf"))), -1)
        cand = torch.where(forced[:, None, None], only_eos, cand)
        ids = ids.masked_fill(forced[:, None, None], eos_id)
    width = cand.shape[-1]
    top_scores, top_index = cand.view(n, -1).topk(min(keep, k * width), dim=-1)
    return top_scores, top_index // width, ids.view(n, -1).gather(1, top_index)


def _placing(spans: SpanRule, alive: list[int], history: list[list[list[int]]], caps: list[int], t: int
             ) -> dict[int, list[int]]:
    """Row (i * k + beam) -> the placeholders it must write now, for the beams with room left only
    for those (strict number rules)."""
    return {i * len(history[sent]) + beam: must for i, sent in enumerate(alive)
            for beam, output in enumerate(history[sent]) if (must := spans.must_place(sent, output, caps[sent] - t))}


def _only(top: torch.Tensor, ids: torch.Tensor, placing: dict[int, list[int]]) -> torch.Tensor:
    """`top` with every candidate of a placing row but its placeholders at -inf."""
    top = top.clone()
    for row, tokens in placing.items():
        top[row].masked_fill_(~torch.isin(ids[row], torch.tensor(tokens, device=ids.device)), float("-inf"))
    return top


def _finalize(finished: list[Hypothesis], nbest: int) -> list[Hypothesis]:
    return sorted(finished, key=lambda h: h.normalized, reverse=True)[:nbest]


@torch.inference_mode()
def beam_search(model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor, bos_id: int, eos_id: int,
                max_lens: torch.Tensor, beam_size: int, length_penalty: float = 1.0, nbest: int = 1,
                banned_id: int | None = None, spans: SpanRule | None = None,
                prefixes: list[list[int]] | None = None) -> list[list[Hypothesis]]:
    """Batched beam search: k hypotheses for every sentence advance together, one decoder call a step.

    A sentence ends once k of its hypotheses have produced <eos> among its k best candidates,
    or when its hypotheses reach the sentence's cap in `max_lens` (then they must end).
    Returns up to `nbest` hypotheses per sentence, best first. With k = 1 this is greedy search.
    A candidate the number rules `spans` refuse is passed over: each beam proposes 2k + B (B: the
    most candidates the rules can refuse it, `SpanRule.blockable`); digit pieces are refused at once
    (-inf), and a sentence keeps 2k + k(P + 1) of the rest (P placeholders, and an <eos> a beam owing
    numbers turns into one of them), so 2k allowed ones remain; a beam with room left only for its
    missing placeholders proposes those alone, from the whole vocabulary, so every sentence finishes
    within its cap.
    A sentence's `prefixes` tokens are forced first, on its one live beam (scored by the model).
    """
    batch, k, device = src.shape[0], beam_size, src.device
    state = model.encode(src, src_lens).select(torch.arange(batch, device=device).repeat_interleave(k))
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # at first every beam holds the same <bos>: expand only one of them
    prev = torch.full((batch * k,), bos_id, dtype=torch.long, device=device)
    history = [[[] for _ in range(k)] for _ in range(batch)]  # tokens of each live beam
    steps = [[[] for _ in range(k)] for _ in range(batch)]  # and their log-probabilities
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    alive = list(range(batch))  # original sentence of each live row group
    max_lens = _room(max_lens.to(device), spans, prefixes)
    caps = max_lens.tolist()
    blockable = spans.blockable if spans else 0
    digits = torch.tensor(sorted(spans.digits), device=device) if spans and spans.digits else None
    refusable = len(spans.ids) + 1 if spans else 0  # what the loop below can still pass over, a beam
    for t in range(int(max_lens.max().item()) + 1):
        forcing = prefixes is not None and any(t < len(prefixes[sent]) for sent in alive)
        placing = _placing(spans, alive, history, caps, t) if spans else {}
        width = EVERY if forcing or placing else 2 * k + blockable
        before, inputs = state, prev
        top, ids, eos, state, _ = model.candidates(prev, state, width, banned_id, eos_id)
        given = top  # the model's own scores, for a prefix's tokens
        if digits is not None:  # never written: refused here at once, not one candidate at a time below
            top = top.masked_fill(torch.isin(ids, digits), float("-inf"))
        if placing:  # a beam with room only for its missing placeholders proposes those alone
            top = _only(top, ids, placing)
        forced = max_lens[alive] <= t
        top_scores, top_beams, top_tokens = _expand(scores, top, ids, eos, forced, eos_id, k * (2 + refusable))
        next_scores, next_rows, next_tokens, keep = [], [], [], []
        previous = scores.tolist()
        for i, sent in enumerate(alive):
            new_scores, new_beams, new_tokens, new_history, new_steps = [], [], [], [], []
            rank = -1  # among the allowed candidates
            taken: set[tuple[int, int]] = set()  # (beam, token) continuations already kept
            candidates = zip(top_scores[i].tolist(), top_beams[i].tolist(), top_tokens[i].tolist())
            if prefixes is not None and t < len(prefixes[sent]):  # one live beam takes the prefix's next token
                token = prefixes[sent][t]
                log_prob = given[i * k][ids[i * k] == token]
                candidates = zip([previous[i][0] + float(log_prob[0])], [0], [token])
            for s, beam, token in candidates:
                if s == float("-inf") or len(new_scores) == k:
                    break
                if spans and spans.blocks(sent, token, history[sent][beam], caps[sent] - t):
                    continue
                rank += 1
                if token == eos_id and rank < k and spans and (owed := spans.missing(sent, history[sent][beam])):
                    # it would end owing numbers: it writes the most likely of them instead, at its own score
                    log_prob, token = _owed_instead(model, inputs, before, {i * k + beam: owed}, banned_id,
                                                    eos_id)[i * k + beam]
                    s = previous[i][beam] + log_prob
                    if (beam, token) in taken:
                        continue
                taken.add((beam, token))
                step = steps[sent][beam] + [s - previous[i][beam]]
                if token == eos_id:
                    if rank < k:  # only an <eos> among the k best ends a hypothesis
                        finished[sent].append(hypothesis(history[sent][beam], s, length_penalty, step))
                    continue
                new_scores.append(s)
                new_beams.append(i * k + beam)
                new_tokens.append(token)
                new_history.append(history[sent][beam] + [token])
                new_steps.append(step)
            if len(finished[sent]) >= k or forced[i].item() or not new_scores:
                continue  # this sentence is done
            while len(new_scores) < k:  # pad with dead beams so every sentence keeps k rows
                new_scores.append(float("-inf"))
                new_beams.append(new_beams[0])
                new_tokens.append(new_tokens[0])
                new_history.append(new_history[0])
                new_steps.append(new_steps[0])
            history[sent], steps[sent] = new_history, new_steps
            next_scores.append(new_scores)
            next_rows.extend(new_beams)
            next_tokens.extend(new_tokens)
            keep.append(sent)
        if not keep:
            break
        alive = keep
        scores = torch.tensor(next_scores, device=device)
        prev = torch.tensor(next_tokens, dtype=torch.long, device=device)
        state = state.select(torch.tensor(next_rows, device=device))
    return [_finalize(f, nbest) for f in finished]
