"""Protected spans (data.protect): numbers become placeholders on the way in, matched across a
training pair by value, restored in the target's conventions on the way out; search writes only
the placeholders of a sentence's own numbers, once each."""

import random
import re

import pytest
import torch
from conftest import TINY, toy_lines, seed_data, seed_model

from nmt.config import config_from_dict
from nmt.data.protected_numbers import MAX_SPANS, PLACEHOLDERS, SpanProtector, SpanRule
from nmt.data.tokenizer import SubwordTokenizer
from nmt.data.vocab import SPECIALS, Vocab
from nmt.errors import ConfigError
from nmt.evaluation.report import numbers_copied, numbers_invented
from nmt.inference.text.terms import sentence_rules
from nmt.inference.decoding.search import Sources, Specials
from helpers.searches import beam_search, greedy
from nmt.model import build_model

EN_FR = SpanProtector("en", "fr")


@pytest.mark.parametrize("src, tgt, protected_tgt", [
    ("She is 12 years old.", "Elle a 12 ans.", "Elle a ⦅N1⦆ ans."),
    ("I have 2 cats and 3 dogs.", "J'ai 3 chiens et 2 chats.", "J'ai ⦅N2⦆ chiens et ⦅N1⦆ chats."),
    ("It costs 3.5 dollars.", "Ça coûte 3,5 dollars.", "Ça coûte ⦅N1⦆ dollars."),
    ("It costs 30,000 yen.", "Ça coûte 30 000 yens.", "Ça coûte ⦅N1⦆ yens."),
    ("It costs 30,000 yen.", "Ça coûte 30000 yens.", "Ça coûte ⦅N1⦆ yens."),
    ("Come at 7:45.", "Viens à 7h45.", "Viens à ⦅N1⦆."),
    ("Come at 7:45.", "Viens à 7 h 45.", "Viens à ⦅N1⦆."),
    ("It was 2021-08-07.", "C'était le 2021-08-07.", "C'était le ⦅N1⦆."),
])
def test_a_pair_whose_numbers_match_by_value_gets_placeholders_on_both_sides(src, tgt, protected_tgt):
    protected_src, out = EN_FR.protect_pair(src, tgt)
    assert out == protected_tgt
    assert "⦅N1⦆" in protected_src and not re.search(r"\d", re.sub("⦅N\\d⦆", "", protected_src + out))


@pytest.mark.parametrize("src, tgt", [
    ("She is 12 years old.", "Elle a douze ans."),  # a number word: the model learns it as text
    ("She is 12 years old.", "Elle a 21 ans."),  # another value
    ("It costs 3.5 dollars.", "Ça coûte 35 dollars."),  # the decimal mark is part of the value
    ("I have 2 cats.", "J'ai 2 chats et 2 chiens."),  # more numbers in the target
    ("Come at 2:30 p.m.", "Viens à 14h30."),  # another value, though the same time
])
def test_a_pair_whose_numbers_do_not_match_one_to_one_keeps_its_text(src, tgt):
    assert EN_FR.protect_pair(src, tgt) == (src, tgt)


@pytest.mark.parametrize("lang, text, numbers", [
    ("en", "At 7:45 on 2021-08-07, 1,000 or 3.5 or 1 000.", ["7:45", "2021-08-07", "1,000", "3.5", "1 000"]),
    ("fr", "À 7 h 45 le 2021-08-07, 1 000 ou 3,5 ou 7h45.", ["7 h 45", "2021-08-07", "1 000", "3,5", "7h45"]),
    ("de", "Um 7:45 am 2021-08-07, 1 000 oder 3,5.", ["7:45", "2021-08-07", "1 000", "3,5"]),  # verbatim
])
def test_a_number_is_what_its_language_writes_as_one(lang, text, numbers):
    assert [n.text for n in SpanProtector(lang, "fr" if lang != "fr" else "en").numbers(text)] == numbers


def test_a_sentence_with_more_numbers_than_placeholders_keeps_them_all_as_text():
    many = " ".join(str(n) for n in range(MAX_SPANS + 1))
    assert EN_FR.protect_source(many) == (many, [])
    assert EN_FR.protect_pair(many, many) == (many, many)


@pytest.mark.parametrize("protector, source, output, restored", [
    (EN_FR, "It costs 3.5 dollars.", "Ça coûte ⦅N1⦆ dollars.", "Ça coûte 3,5 dollars."),
    (EN_FR, "It costs 1,250,000 yen.", "Ça coûte ⦅N1⦆ yens.", "Ça coûte 1 250 000 yens."),
    (EN_FR, "I was born in 1980.", "Je suis né en ⦅N1⦆.", "Je suis né en 1980."),  # no mark, none added
    (EN_FR, "Come at 7:45.", "Viens à ⦅N1⦆.", "Viens à 7h45."),
    (EN_FR, "Version 1.2.3 is out.", "La version ⦅N1⦆ est sortie.", "La version 1.2.3 est sortie."),
    (EN_FR, "2 by 3", "⦅N2⦆ sur ⦅N1⦆", "3 sur 2"),
    (SpanProtector("fr", "en"), "Ça coûte 30 000 yens à 7 h 45.", "It costs ⦅N1⦆ yen at ⦅N2⦆.",
     "It costs 30,000 yen at 7:45."),
    # every other language as CLDR writes it (Babel): German's decimal comma and thousands dot, Finnish's
    # time dot, Russian's no-break space between thousands; a language CLDR does not know, verbatim
    (SpanProtector("en", "de"), "It costs 3.5 dollars.", "Es kostet ⦅N1⦆ Dollar.", "Es kostet 3,5 Dollar."),
    (SpanProtector("en", "de"), "I paid 30,000 at 7:45.", "Ich zahlte ⦅N1⦆ um ⦅N2⦆.", "Ich zahlte 30.000 um 7:45."),
    (SpanProtector("de", "en"), "Ich zahlte 30.000 und 3,5.", "I paid ⦅N1⦆ and ⦅N2⦆.", "I paid 30,000 and 3.5."),
    (SpanProtector("en", "fi"), "Come at 7:45 with 2.5 kg.", "Tule ⦅N1⦆ ⦅N2⦆ kg.", "Tule 7.45 2,5 kg."),
    (SpanProtector("en", "ru"), "It costs 30,000.", "Стоит ⦅N1⦆.", "Стоит 30\u00a0000."),
    (SpanProtector("en", "xx"), "It costs 3.5 and 30,000.", "⦅N1⦆ ⦅N2⦆", "3.5 30,000"),
    (EN_FR, "She is 12.", "Elle a ⦅N1⦆ ans, ⦅N2⦆ mois.", "Elle a 12 ans, mois."),  # no number for ⦅N2⦆
    (EN_FR, "2 by 3", "⦅N1⦆⦅N2⦆ fois", "2 3 fois"),  # side by side, never one number "23"
    (EN_FR, "In 1939 and 1914.", "En la⦅N1⦆.⦅N2⦆", "En la 1939. 1914"),  # never part of a word
    (EN_FR, "It is 12% (5 kg).", "C'est ⦅N1⦆% (⦅N2⦆ kg).", "C'est 12% (5 kg)."),  # what may touch a number
])
def test_restored_in_the_targets_conventions(protector, source, output, restored):
    _, numbers = protector.protect_source(source)
    assert protector.restore(output, numbers) == restored
    assert numbers_copied(source, restored) and not numbers_invented(source, restored)


def test_numbers_invented():
    assert numbers_invented("She is 12.", "Elle a 21 ans.")
    assert numbers_invented("She is twelve.", "Elle a 12 ans.")
    assert not numbers_invented("It costs 30,000 yen.", "Ça coûte 30 000 yens.")
    assert not numbers_invented("Go.", "Va !")


def test_placeholders_are_one_piece_each_on_both_sides():
    rng = random.Random(0)
    lines = [line.split("\t") for line in toy_lines()]
    numbered = [(f"I have {n} cats.", f"J'ai {n} chats.") for n in (rng.randrange(1000) for _ in range(200))]
    src, tgt = EN_FR.protect_pairs(*zip(*(lines + numbered)))
    cfg = seed_data(tokenizer="subword", vocab_size=300, subword_type="bpe", split_digits=True, protect=True)
    tokenizer = SubwordTokenizer.train(src, tgt, cfg)
    for text, tokens in ((src[-1], tokenizer.source_tokens([src[-1]])[0]),
                         (tgt[-1], tokenizer.target_tokens([tgt[-1]])[0])):
        assert "⦅N1⦆" in text and "⦅N1⦆" in tokens, tokens
    assert all(p in vocab.stoi for vocab in tokenizer.vocabularies() for p in PLACEHOLDERS)


def test_the_digit_pieces_strict_search_refuses_are_those_whose_text_holds_a_digit():
    lines = [line.split("\t") for line in toy_lines()]
    numbered = [(f"I have {n} cats.", f"J'ai {n} chats, le {n}e.") for n in range(10, 400, 7)]
    src, tgt = EN_FR.protect_pairs(*zip(*(lines + numbered)))
    cfg = seed_data(tokenizer="subword", vocab_size=400, subword_type="bpe", split_digits=True, protect=True)
    tokenizer = SubwordTokenizer.train(src, tgt, cfg)
    pieces = {tokenizer.tgt.id_to_piece(i) for i in tokenizer.protector.digit_ids}
    assert {str(d) for d in range(10)} | {f"<0x{0x30 + d:02X}>" for d in range(10)} <= pieces
    assert all(any(c.isdigit() for c in p) for p in pieces if not p.startswith("<0x"))
    assert not {p for p in pieces if p.startswith("<0x") and not "<0x30>" <= p <= "<0x39>"}  # ò's bytes spell on
    assert not pieces & set(PLACEHOLDERS)


def test_protect_needs_subwords():
    with pytest.raises(ConfigError, match=r"data.protect \(on by default\) needs data.tokenizer: subword"):
        config_from_dict({**TINY, "data": {**TINY["data"], "protect": True}})


VOCAB = Vocab(list(SPECIALS) + list(PLACEHOLDERS) + [f"w{i}" for i in range(8)])
TARGET_IDS = Specials(VOCAB.bos_id, VOCAB.eos_id)
IDS = {VOCAB.stoi[p]: i for i, p in enumerate(PLACEHOLDERS)}


def _eager_model():
    """A real model whose output layer prefers the placeholders, ⦅N9⦆ most: unconstrained, it
    writes numbers its sources do not hold, and the same one again and again."""
    torch.manual_seed(0)
    model = build_model(seed_model(embed_size=8, hidden_size=16, num_layers=1), VOCAB, VOCAB).eval()
    with torch.no_grad():
        for token, index in IDS.items():
            model.decoder.out.bias[token] = 20.0 + index
    return model


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_search_writes_only_the_sentences_own_placeholders_once_each(search):
    model, counts = _eager_model(), [0, 1, 3]
    src = torch.tensor([[8 + 4, VOCAB.eos_id, 0], [9 + 4, 10 + 4, VOCAB.eos_id], [15, 16, VOCAB.eos_id]])
    lens, caps = torch.tensor([2, 3, 3]), torch.tensor([6, 6, 6])
    free = [h.tokens for h in greedy(model, Sources(src, lens, caps), TARGET_IDS)]
    assert all(o and o[0] == VOCAB.stoi["⦅N9⦆"] for o in free)  # what the rule has to prevent
    rules = [sentence_rules(SpanRule(IDS, counts), i) for i in range(len(counts))]
    if search == "greedy":
        outputs = [h.tokens for h in greedy(model, Sources(src, lens, caps, rules), TARGET_IDS)]
    else:
        outputs = [h[0].tokens for h in beam_search(model, Sources(src, lens, caps, rules), TARGET_IDS, 3)]
    for output, count in zip(outputs, counts):
        written = [IDS[t] for t in output if t in IDS]
        assert sorted(written) == list(range(count)), (output, count)  # each of its own, once: it is eager


UNSEEN = ["I have 73154 cats.", "I have 3.5 cats.", "I have 12,500 cats.", "I have 7:45 cats."]


def test_a_protected_model_copies_numbers_it_never_saw(protected_run):
    """Unseen numbers, other forms included, come out exactly, in French conventions; the
    attention shows numbers, not placeholders."""
    import nmt

    model = nmt.load(protected_run)
    for beam in (1, 3):
        outputs = model.translate(UNSEEN, beam=beam)
        assert outputs == ["J'ai 73154 chats.", "J'ai 3,5 chats.", "J'ai 12 500 chats.", "J'ai 7h45 chats."], outputs
    attention = model.attention("I have 73154 cats.")
    assert "73154" in attention.src_tokens and "73154" in attention.tgt_tokens
    assert not any("⦅" in t for t in attention.src_tokens + attention.tgt_tokens)


def test_the_onnx_engine_restores_numbers_as_torch_does(protected_run):
    pytest.importorskip("onnxruntime")
    from nmt.inference.onnx_export import export_run
    from nmt.inference.translator import Translator

    export_run(protected_run)
    torch_engine = Translator.load(str(protected_run), "cpu")
    onnx_engine = Translator.load(str(protected_run), "cpu", engine="onnx-fp32")
    for beam in (1, 3):
        assert onnx_engine.translate(UNSEEN, beam=beam) == torch_engine.translate(UNSEEN, beam=beam)
