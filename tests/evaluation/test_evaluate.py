from sacrebleu.metrics import BLEU

from nmt.data.corpus import Pair
from nmt.evaluation.metrics import group_references, reference_streams, score


def test_group_references_collects_every_translation():
    pairs = [Pair(["go", "."], ["va", "!"], "Go.", "Va !"), Pair(["hi", "."], ["salut", "."], "Hi.", "Salut."),
             Pair(["go", "."], ["marche", "."], "Go .", "Marche."), Pair(["go", "."], ["bouge", "!"], "go.", "Bouge !")]
    refs = group_references(pairs)
    assert refs.sources == ["Go.", "Hi."]  # first-seen form of each source
    assert refs.source_words == [["go", "."], ["hi", "."]]
    assert refs.references == [["Va !", "Marche.", "Bouge !"], ["Salut."]]
    assert refs.legacy_references == [["va !", "marche .", "bouge !"], ["salut ."]]
    assert refs.subset([False, True]).references == [["Salut."]]


def test_standard_bleu_is_cased_and_legacy_is_not():
    refs = [["Tom est à Paris."]]
    assert round(score(["Tom est à Paris."], refs).bleu, 6) == 100.0
    assert score(["tom est à paris."], refs).bleu < 50  # case counts in standard BLEU
    assert round(score(["tom est à paris ."], [["tom est à paris ."]], tokenized=True).bleu, 6) == 100.0


def test_missing_references_repeat_one_never_empty_string():
    streams = reference_streams([["a b", "c d"], ["e f"]])
    assert streams == [["a b", "e f"], ["c d", "e f"]]
    assert all(ref != "" for stream in streams for ref in stream)


def test_short_hypothesis_cannot_escape_the_brevity_penalty():
    # Source 1 has one reference of 6 words and the hypothesis is 2 of them; source 2 has two.
    hyps = ["le chat", "il fait beau ."]
    refs = [["le chat est sur le tapis"], ["il fait beau .", "le temps est beau ."]]
    ours = score(hyps, refs).bleu
    with_empty = BLEU().corpus_score(hyps, [["le chat est sur le tapis", "il fait beau ."],
                                            ["", "le temps est beau ."]]).score
    with_repeat = BLEU().corpus_score(hyps, [["le chat est sur le tapis", "il fait beau ."],
                                             ["le chat est sur le tapis", "le temps est beau ."]]).score
    assert ours == with_repeat
    assert ours < with_empty  # '' is a length-0 reference closest to the 2-word hypothesis


def test_perfect_hypotheses_score_100():
    result = score(["il fait très beau aujourd'hui .", "je suis chez moi ."],
                   [["il fait très beau aujourd'hui ."], ["je rentre .", "je suis chez moi ."]])
    assert round(result.bleu, 6) == 100.0 and round(result.chrf, 6) == 100.0
    assert "nrefs:2" in result.signature and "tok:13a" in result.signature
