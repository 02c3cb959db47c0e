"""The word before a French glossary term that begins with a vowel, as French writes it there.

A model that never read the term writes the words before it for the word it would have written:
"de la voiture", so with "automobile" in its place, "de la automobile". French elides or changes
that word before a vowel: "de l'automobile", "d'automobile", "à l'", "cet", "mon". Search cannot
unwrite a word it has written, so each finished output whose term follows such a word is
rewritten so (`rewritten`), and then scored again by the model (`elided`: forced decoding), so
that its scores are the model's own for the text it returns. Only French targets, terms that begin
with a vowel or a silent h ("l'hôtel"; an aspirated h keeps its article: "le héros"), and the one
word right before the term; after an apostrophe search itself writes the term glued (`Rules.elided`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from nmt.data.tokenizer import WORD_START, Tokenizer
from nmt.data.vocab import Vocab
from nmt.inference.text.glossary import elides_before
from nmt.inference.decoding.search import Hypothesis, Sources, Specials, forced, hypothesis

LANGUAGE = "fr"
BEFORE_A_VOWEL = {"le": "l'", "la": "l'", "de": "d'", "je": "j'", "me": "m'", "te": "t'", "se": "s'", "ne": "n'",
                  "que": "qu'", "jusque": "jusqu'", "lorsque": "lorsqu'", "puisque": "puisqu'",
                  "du": "de l'", "au": "à l'", "ce": "cet ", "ma": "mon ", "ta": "ton ", "sa": "son "}


def rewritten(pieces: Sequence[str], terms: Sequence[Sequence[str]],
              target_tokens: Callable[[list[str]], list[list[str]]]) -> list[str] | None:
    """`pieces` with the word before each of its vowel-initial `terms` (as pieces) written as French
    writes it before a vowel; None where nothing changes."""
    out, changed = list(pieces), False
    for term in terms:
        text = "".join(term).replace(WORD_START, " ").strip()
        if not term or not term[0].startswith(WORD_START) or not elides_before(text):
            continue
        at = next((i for i in range(1, len(out) - len(term) + 1) if list(out[i:i + len(term)]) == list(term)), None)
        word = next((j for j in range(at - 1, -1, -1) if out[j].startswith(WORD_START)), None) if at else None
        if word is None:
            continue
        before = "".join(out[word:at])[len(WORD_START):]
        if (replacement := BEFORE_A_VOWEL.get(before.lower())) is None:
            continue
        if before[0].isupper():
            replacement = replacement[0].upper() + replacement[1:]
        out[word:at + len(term)] = target_tokens([replacement + text])[0]
        changed = True
    return out if changed else None


def elided(model, sources: Sources, specials: Specials, found: list[list[Hypothesis]], vocab: Vocab,
           tokenizer: Tokenizer, length_penalty: float) -> list[list[Hypothesis]]:
    """Each sentence's hypotheses (`found`, one list a source) with the word before each of its
    glossary terms elided where French needs it, best first; a rewritten one scored again by the
    model (normalized as search normalized it: by its rules' own length penalty, else by
    `length_penalty`; without the search's credit for a term in the place of the model's own word).
    `found` itself where nothing changes: another target language, a word tokenizer, no terms."""
    if tokenizer.target_lang != LANGUAGE or tokenizer.kind != "subword" or sources.rules is None:
        return found
    todo: list[tuple[int, int, list[int]]] = []
    for row, (hyps, rules) in enumerate(zip(found, sources.rules)):
        spelled = [vocab.decode(term) for term in rules.terms[:rules.words]] if rules.terms else []
        for place, hyp in enumerate(hyps):
            pieces = rewritten(vocab.decode(hyp.tokens), spelled, tokenizer.target_tokens) if spelled else None
            if pieces is not None and vocab.unk_id not in (ids := vocab.encode(pieces)):
                todo.append((row, place, ids))
    if not todo:
        return found
    rows = torch.tensor([row for row, _, _ in todo], device=sources.ids.device)
    scored = forced(model, sources.ids[rows], sources.lens[rows], specials, [ids for *_, ids in todo])
    out = [list(hyps) for hyps in found]
    for (row, place, ids), (scores, _) in zip(todo, scored):
        out[row][place] = hypothesis(ids, sum(scores), sources.rules[row].ranking_penalty(length_penalty), scores)
    for row in {row for row, _, _ in todo}:
        out[row].sort(key=lambda h: h.normalized, reverse=True)
    return out
