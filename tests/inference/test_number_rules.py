"""Every number exactly once (decode.strict_numbers, on with data.protect): search writes digits only
through the source's placeholders, ends no hypothesis while one is missing, and still finishes
within the length cap; sentences without numbers decode as they did."""

import re

import pytest
import torch
from conftest import toy_lines
from helpers.engines import engines
from helpers.number_models import (
    DIGIT_IDS,
    EOS,
    IDS,
    TARGET_IDS,
    VOCAB,
    WORDS,
    biased_model,
    placeholders_written,
    rules_of,
    sources,
    strict,
)

from nmt.data.protected_numbers import PLACEHOLDERS, SpanRule
from nmt.inference.decoding.search import Sources
from helpers.searches import beam_search, greedy


def decode(model, counts, search, caps, nbest=1, prefixes=None, spans=None):
    """Each sentence's outputs (n-best for beam search) under the strict rule."""
    src, lens = sources(len(counts))
    spans = spans or strict(counts)
    caps = torch.tensor(caps)
    rules = rules_of(spans, prefixes)
    if search == "greedy":
        return [[h.tokens] for h in greedy(model, Sources(src, lens, caps, rules), TARGET_IDS)]
    found = beam_search(model, Sources(src, lens, caps, rules), TARGET_IDS, 4, nbest=nbest)
    return [[h.tokens for h in hyps] for hyps in found]


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_model_that_prefers_digits_writes_none_outside_placeholders(search):
    model, counts = biased_model(digits=30.0), [0, 2, 3]
    src, lens = sources(3)
    unruled = Sources(src, lens, torch.tensor([8, 8, 8]), rules_of(SpanRule(IDS, counts)))
    loose = [h.tokens for h in greedy(model, unruled, TARGET_IDS)]
    assert all(any(t in DIGIT_IDS for t in o) for o in loose)  # what the rule has to prevent
    for outputs, count in zip(decode(model, counts, search, [8, 8, 8], nbest=3), counts):
        assert outputs
        for output in outputs:
            assert not DIGIT_IDS & set(output), output
            assert placeholders_written(output) == list(range(count)), output


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_model_that_prefers_to_stop_still_places_every_placeholder(search):
    model, counts = biased_model(eos=40.0), [0, 1, 4]
    src, lens = sources(3)
    unruled = Sources(src, lens, torch.tensor([8, 8, 8]), rules_of(SpanRule(IDS, counts)))
    loose = [h.tokens for h in greedy(model, unruled, TARGET_IDS)]
    assert loose == [[], [], []]  # unconstrained, it drops every number
    for outputs, count in zip(decode(model, counts, search, [8, 8, 8], nbest=3), counts):
        assert outputs
        for output in outputs:
            assert placeholders_written(output) == list(range(count)) and len(output) <= 8, output
        assert len(outputs[0]) == count  # its <eos> became the numbers it owed: nothing else was written


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_nine_numbers_are_all_kept_even_past_a_short_length_cap(search):
    """The cap grows to hold every placeholder; each is placed before <eos>."""
    for model in (biased_model(eos=40.0), biased_model(digits=30.0)):
        for outputs in decode(model, [9], search, [4], nbest=2):
            for output in outputs:
                assert placeholders_written(output) == list(range(9)), output
                assert not DIGIT_IDS & set(output)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_placeholder_is_placed_before_the_cap_even_when_the_model_would_not(search):
    """A model that never wants a placeholder writes the missing ones by the cap: greedy search in
    its last tokens; beam search keeps a place for hypotheses that wrote them earlier (banks)."""
    model = biased_model(placeholders=-40.0, eos=-40.0)
    for outputs in decode(model, [2], search, [6], nbest=2):
        for output in outputs:
            assert len(output) <= 6 and placeholders_written(output) == [0, 1], output
            if search == "greedy":
                assert output[-2:] == [t for t in output if t in IDS]  # at the end: as late as the cap allows


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_prefix_with_digits_is_honoured(search):
    model = biased_model()
    prefix = [VOCAB.stoi["1"], VOCAB.stoi["9"], WORDS[0]]
    for outputs in decode(model, [1], search, [8], nbest=2, prefixes=[prefix]):
        for output in outputs:
            assert output[:3] == prefix
            assert not DIGIT_IDS & set(output[3:]) and placeholders_written(output) == [0], output


def test_the_rules_tell_what_they_force_and_refuse():
    rules = rules_of(strict([2]))[0]
    n1, n2, n3 = (VOCAB.stoi[p] for p in PLACEHOLDERS[:3])
    fresh = rules.start()
    step = rules.step(fresh, written=0, room=8, eos_id=EOS)
    assert step.forced is None and {VOCAB.stoi["7"], n3, EOS} <= step.refused and step.owed == {n1, n2}
    after_n1 = rules.advance(fresh, n1)
    step = rules.step(after_n1, written=1, room=8, eos_id=EOS)
    assert n1 in step.refused and step.owed == {n2}  # once each; <eos> still refused: n2 is owed
    assert rules.step(after_n1, written=1, room=1, eos_id=EOS).forced == {n2}  # no room left for anything else
    assert rules.step(after_n1, written=1, room=2, eos_id=EOS).forced is None
    done = rules.advance(after_n1, n2)
    assert EOS not in rules.step(done, written=2, room=8, eos_id=EOS).refused
    assert rules.step(done, written=8, room=0, eos_id=EOS).forced == {EOS}  # at the cap it may only end
    loose = rules_of(SpanRule(IDS, [2]))[0]
    assert rules.bank(done) == 2 and not loose.terms
    assert loose.step(fresh, written=0, room=8, eos_id=EOS).refused == frozenset(IDS) - {n1, n2}


NINE = "I have 11 cats, 22 dogs, 33 birds, 44 cars, 55 boats, 66 houses, 77 apples, 88 teas and 99 days."


def test_a_real_model_keeps_all_nine_numbers_with_both_engines(protected_run):
    import nmt

    for engine in engines(protected_run):
        model = nmt.load(protected_run, engine=engine)
        for beam in (1, 4):
            for hyp in model.nbest(NINE, n=2, beam=beam)[0]:
                assert sorted(re.findall(r"\d+", hyp.text)) == [str(11 * i) for i in range(1, 10)], (engine, hyp.text)


def test_sentences_without_numbers_decode_exactly_as_before(protected_run):
    """Same outputs and the same scores with the rules on and off, on the toy model's sentences."""
    import nmt

    texts = [line.split("\t")[0] for line in toy_lines()[::7]]
    for engine in engines(protected_run):
        on, off = nmt.load(protected_run, engine=engine), nmt.load(protected_run, engine=engine, strict_numbers=False)
        for beam in (1, 4):
            strict_hyps, loose_hyps = on.nbest(texts, n=2, beam=beam), off.nbest(texts, n=2, beam=beam)
            assert [[(h.text, h.score) for h in hs] for hs in strict_hyps] == \
                   [[(h.text, h.score) for h in hs] for hs in loose_hyps]
