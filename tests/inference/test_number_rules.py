"""Every number exactly once (decode.strict_numbers, on with data.protect): search writes digits only
through the source's placeholders, ends no hypothesis while one is missing, and still finishes
within the length cap; sentences without numbers decode as they did."""

import random
import re

import pytest
import torch
import yaml
from conftest import TINY, toy_lines, write_corpus_zip

from nmt.config import ModelConfig
from nmt.data.protected_numbers import PLACEHOLDERS, SpanRule
from nmt.data.vocab import SPECIALS, Vocab
from nmt.inference.search import beam_search, greedy
from nmt.model import build_model

DIGITS = [str(d) for d in range(10)] + ["▁1", "1er"]
VOCAB = Vocab(list(SPECIALS) + list(PLACEHOLDERS) + DIGITS + [f"w{i}" for i in range(8)])
IDS = {VOCAB.stoi[p]: i for i, p in enumerate(PLACEHOLDERS)}
DIGIT_IDS = frozenset(VOCAB.stoi[d] for d in DIGITS)
WORDS = [VOCAB.stoi[f"w{i}"] for i in range(8)]
BOS, EOS = VOCAB.bos_id, VOCAB.eos_id


def biased_model(**bias: float):
    """A real model whose output layer prefers some tokens: 'digits', 'eos' or 'placeholders'."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(embed_size=8, hidden_size=16, num_layers=1), VOCAB, VOCAB).eval()
    with torch.no_grad():
        for name, value in bias.items():
            ids = {"digits": DIGIT_IDS, "eos": [EOS], "placeholders": IDS}[name]
            for token in ids:
                model.decoder.out.bias[token] += value
    return model


def strict(counts: list[int]) -> SpanRule:
    return SpanRule(IDS, counts, DIGIT_IDS, EOS)


def sources(rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([[WORDS[i % 8], WORDS[(i + 3) % 8], EOS] for i in range(rows)])
    return src, torch.full((rows,), 3)


def decode(model, counts, search, caps, nbest=1, prefixes=None, spans=None):
    """Each sentence's outputs (n-best for beam search) under the strict rule."""
    src, lens = sources(len(counts))
    spans = spans or strict(counts)
    caps = torch.tensor(caps)
    if search == "greedy":
        return [[o] for o in greedy(model, src, lens, BOS, EOS, caps, spans=spans, prefixes=prefixes)[0]]
    found = beam_search(model, src, lens, BOS, EOS, caps, 4, nbest=nbest, spans=spans, prefixes=prefixes)
    return [[h.tokens for h in hyps] for hyps in found]


def placeholders_written(output: list[int]) -> list[int]:
    return sorted(IDS[t] for t in output if t in IDS)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_model_that_prefers_digits_writes_none_outside_placeholders(search):
    model, counts = biased_model(digits=30.0), [0, 2, 3]
    src, lens = sources(3)
    loose = greedy(model, src, lens, BOS, EOS, torch.tensor([8, 8, 8]), spans=SpanRule(IDS, counts))[0]
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
    loose = greedy(model, src, lens, BOS, EOS, torch.tensor([8, 8, 8]), spans=SpanRule(IDS, counts))[0]
    assert loose == [[], [], []]  # unconstrained, it drops every number
    for outputs, count in zip(decode(model, counts, search, [8, 8, 8], nbest=3), counts):
        assert outputs
        for output in outputs:
            assert placeholders_written(output) == list(range(count)) and len(output) <= 8, output


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
    """A model that never wants a placeholder writes the missing ones in its last tokens."""
    model = biased_model(placeholders=-40.0, eos=-40.0)
    for outputs in decode(model, [2], search, [6], nbest=2):
        for output in outputs:
            assert len(output) <= 6 and placeholders_written(output) == [0, 1], output
            assert output[-2:] == [t for t in output if t in IDS]  # at the end: as late as the cap allows


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_prefix_with_digits_is_honoured(search):
    model = biased_model()
    prefix = [VOCAB.stoi["1"], VOCAB.stoi["9"], WORDS[0]]
    for outputs in decode(model, [1], search, [8], nbest=2, prefixes=[prefix]):
        for output in outputs:
            assert output[:3] == prefix
            assert not DIGIT_IDS & set(output[3:]) and placeholders_written(output) == [0], output


def test_the_rule_tells_what_it_refuses():
    rule = strict([2])
    n1, n2, n3 = (VOCAB.stoi[p] for p in PLACEHOLDERS[:3])
    assert rule.blocks(0, VOCAB.stoi["7"], [], None) and rule.blocks(0, EOS, [n1], None)
    assert not rule.blocks(0, EOS, [n2, n1], None) and rule.blocks(0, n3, [], None)
    assert rule.blocks(0, n1, [n1], None)  # once each
    assert rule.blocks(0, WORDS[0], [n1], room=1) and not rule.blocks(0, n2, [n1], room=1)  # no room left
    assert not rule.blocks(0, WORDS[0], [n1], room=2)
    loose = SpanRule(IDS, [2])
    assert not loose.blocks(0, VOCAB.stoi["7"], []) and not loose.blocks(0, EOS, [])


@pytest.fixture(scope="module")
def protected_run(tmp_path_factory):
    """The tiny subword model with data.protect of test_protect.py, exported for ONNX Runtime."""
    from typer.testing import CliRunner

    from nmt.cli import app

    root = tmp_path_factory.mktemp("strict")
    rng = random.Random(1)
    numbered = [f"I have {n} cats.\tJ'ai {n} chats." for n in rng.sample(range(10, 1000), 150)]
    corpus = write_corpus_zip(root / "toy.zip", toy_lines() + numbered)
    config = root / "c.yaml"
    data = {**TINY["data"], "tokenizer": "subword", "vocab_size": 340, "max_len": 24, "protect": True}
    config.write_text(yaml.safe_dump({**TINY, "data": data, "train": {**TINY["train"], "epochs": 12}}))
    args = ["train", str(config), "--data", str(corpus), "--out", str(root / "run"), "--quiet"]
    assert CliRunner().invoke(app, args).exit_code == 0
    return root / "run"


def engines(run) -> list[str]:
    pytest.importorskip("onnxruntime")
    from nmt.inference.onnx_export import export_run

    export_run(run)
    return ["torch", "onnx-fp32"]


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
