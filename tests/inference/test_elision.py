"""The word before a French glossary term that begins with a vowel: "de l'automobile", not "de la
automobile" (nmt/inference/text/elision.py), rewritten after search and scored again by the model."""

from types import SimpleNamespace

import pytest
import torch

import nmt
from nmt.data.vocab import SPECIALS, Vocab
from nmt.inference.text.terms import sentence_rules
from nmt.inference.text.elision import elided, rewritten
from nmt.inference.decoding.search import Sources, Specials, forced, hypothesis
from nmt.model import build_model
from conftest import seed_model


@pytest.fixture(scope="module")
def target_tokens(protected_run):
    return nmt.load(protected_run).tokenizer.target_tokens  # a real French SentencePiece model's


def _text(pieces):
    return "".join(pieces).replace("▁", " ").strip()


@pytest.mark.parametrize("before, term, after", [("Il voit de la amis .", "amis", "Il voit de l'amis ."),
                                                 ("Je amis .", "amis", "J'amis ."),  # a capital kept
                                                 ("Il parle du amis .", "amis", "Il parle de l'amis ."),
                                                 ("Il voit ce amis .", "amis", "Il voit cet amis ."),
                                                 ("Il voit ma amis .", "amis", "Il voit mon amis ."),
                                                 ("Il voit la habits .", "habits", "Il voit l'habits .")])  # silent h
def test_the_word_before_a_vowel_term_is_written_as_french_writes_it_there(target_tokens, before, term, after):
    # (the toy tokenizer spells "à" and most capitals in bytes: "au" -> "à l'" is the table's too)
    assert _text(rewritten(target_tokens([before])[0], [target_tokens([term])[0]], target_tokens)) == after


def test_words_and_terms_french_does_not_change_are_left_as_they_are(target_tokens):
    for text, term in [("Il voit les amis .", "amis"), ("amis de la maison", "amis"),  # nothing to elide
                       ("Il voit la chats .", "chats"),  # a consonant
                       ("Il voit le héros .", "héros"), ("la hache", "hache")]:  # an aspirated h keeps its article
        assert rewritten(target_tokens([text])[0], [target_tokens([term])[0]], target_tokens) is None, text


def test_a_rewritten_output_is_scored_again_by_the_model_and_ranked_by_that_score():
    vocab = Vocab(list(SPECIALS) + ["▁la", "▁l", "'", "▁ami", "ami", "▁vu"])
    torch.manual_seed(0)
    model = build_model(seed_model(embed_size=8, hidden_size=16, num_layers=1), vocab, vocab).eval()
    specials = Specials(vocab.bos_id, vocab.eos_id)
    src, lens = torch.tensor([[vocab.stoi["▁vu"], vocab.eos_id]]), torch.tensor([2])
    sources = Sources(src, lens, torch.tensor([6]), [sentence_rules(None, 0, terms=[vocab.encode(["▁ami"])])])
    unelided, other = vocab.encode(["▁vu", "▁la", "▁ami"]), vocab.encode(["▁vu", "▁ami"])
    found = [[hypothesis(tokens, -1.0 - i, 1.0, [-0.5] * len(tokens) + [-0.5 - i]) for i, tokens in
              enumerate([unelided, other])]]
    spell = {"l'ami": ["▁l", "'", "ami"]}  # as a French SentencePiece model writes it
    french = SimpleNamespace(target_lang="fr", kind="subword", target_tokens=lambda texts: [spell[t] for t in texts])

    out = elided(model, sources, specials, found, vocab, french, 1.0)[0]
    fixed = next(h for h in out if h.tokens != other)
    assert vocab.decode(fixed.tokens) == ["▁vu", "▁l", "'", "ami"]
    scores = forced(model, src, lens, specials, [fixed.tokens])[0][0]
    assert fixed.token_scores == scores and fixed.score == pytest.approx(sum(scores))  # the model's own
    assert [h.normalized for h in out] == sorted((h.normalized for h in out), reverse=True)
    assert next(h for h in out if h.tokens == other) is found[0][1]  # untouched
    german = SimpleNamespace(target_lang="de", kind="subword", target_tokens=french.target_tokens)
    assert elided(model, sources, specials, found, vocab, german, 1.0) is found  # French only
    plain = Sources(src, lens, torch.tensor([6]), [sentence_rules(None, 0)])
    assert elided(model, plain, specials, found, vocab, french, 1.0) is found  # no terms, nothing to do
