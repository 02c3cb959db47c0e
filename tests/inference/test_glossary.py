"""A glossary (`nmt translate --glossary`, `translate(..., glossary=...)`): every source term found
has its target term in the translation, through the one constrained search (greedy, beam, n-best,
sampling, ensembles, both engines), with the number rules still kept."""

import pytest
import torch
from helpers.engines import engines
from helpers.number_models import BOS, EOS, IDS, WORDS, biased_model, placeholders_written, sources, strict
from typer.testing import CliRunner

import nmt
from nmt.cli import app
from nmt.errors import NmtError
from nmt.inference.constraints import sentence_rules
from nmt.inference.ensemble import Ensemble
from nmt.inference.glossary import Glossary, holds
from nmt.inference.sampling import Sampling, samples
from nmt.inference.search import beam_search, greedy

NEVER = [WORDS[5], WORDS[6], WORDS[7]]  # words the model below never writes on its own


def _biased_against(tokens):
    model = biased_model()
    with torch.no_grad():
        for token in tokens:
            model.decoder.out.bias[token] -= 30.0
    return model


def contains(output, term) -> bool:
    return any(output[i: i + len(term)] == list(term) for i in range(len(output) - len(term) + 1))


def decode(model, terms, how, caps=8, spans=None):
    """Each sentence's outputs (all of its n-best for beam search and samples) under its terms."""
    src, lens = sources(len(terms))
    rules = [sentence_rules(spans, i, terms=t) for i, t in enumerate(terms)]
    caps = torch.full((len(terms),), caps)
    if how == "greedy":
        return [[h.tokens] for h in greedy(model, src, lens, BOS, EOS, caps, rules)]
    if how == "sample":
        return [[h.tokens for h in hyps] for hyps in samples(model, src, lens, BOS, EOS, caps, 3, Sampling(seed=1),
                                                               rules)]
    return [[h.tokens for h in hyps] for hyps in beam_search(model, src, lens, BOS, EOS, caps, 4, nbest=3,
                                                              rules=rules)]


SEARCHES = ["greedy", "beam", "sample"]


@pytest.mark.parametrize("how", SEARCHES)
def test_a_term_the_model_never_writes_is_written_when_asked(how):
    model = _biased_against(NEVER)
    assert not any(set(NEVER) & set(o[0]) for o in decode(model, [(), ()], how))  # what the glossary must change
    terms = [[(NEVER[0],)], [(NEVER[1], NEVER[2])]]  # one piece; two pieces, in order
    for outputs, wanted in zip(decode(model, terms, how), terms):
        assert outputs
        for output in outputs:
            assert all(contains(output, term) for term in wanted), output


@pytest.mark.parametrize("how", SEARCHES)
def test_two_terms_and_overlapping_terms_are_all_written(how):
    model = _biased_against(NEVER)
    both = [(NEVER[0],), (NEVER[1],)]
    overlapping = [(NEVER[0], NEVER[1]), (NEVER[0], NEVER[2])]  # the same first piece
    for outputs, wanted in zip(decode(model, [both, overlapping], how, caps=10), [both, overlapping]):
        assert outputs
        for output in outputs:
            assert all(contains(output, term) for term in wanted) and len(output) <= 10, output


@pytest.mark.parametrize("how", SEARCHES)
def test_a_term_at_the_cap_is_written_within_it_and_a_longer_one_raises_it(how):
    model = _biased_against(NEVER)
    term = (NEVER[0], NEVER[1], NEVER[2])
    for cap in (3, 1):  # exactly its length; shorter than it: the cap grows to hold it
        for outputs in decode(model, [[term]], how, caps=cap):
            assert outputs
            for output in outputs:
                assert contains(output, term) and len(output) == 3, output


@pytest.mark.parametrize("how", SEARCHES)
def test_a_term_and_a_number_in_one_sentence_are_both_kept(how):
    model = _biased_against(NEVER)
    spans = strict([2])
    for outputs in decode(model, [[(NEVER[0],)]], how, caps=8, spans=spans):
        assert outputs
        for output in outputs:
            assert contains(output, (NEVER[0],)) and placeholders_written(output) == [0, 1], output
            assert all(t in IDS or t not in spans.digits for t in output)


def test_an_ensemble_obeys_the_glossary():
    ensemble = Ensemble([_biased_against(NEVER), _biased_against(NEVER[:1])])
    src, lens = sources(2)
    rules = [sentence_rules(None, i, terms=[(NEVER[0],)]) for i in range(2)]
    for hyps in beam_search(ensemble, src, lens, BOS, EOS, torch.full((2,), 6), 3, nbest=2, rules=rules):
        assert hyps and all(NEVER[0] in h.tokens for h in hyps)


def test_the_glossary_file_matches_whole_words_any_case_longest_first():
    glossary = Glossary.parse(["cold\trhume", "a cold\tun rhume", "ice\tglace", "New  York\tNew York"])
    assert glossary.terms("I have A COLD.") == ["un rhume"]  # the longest match wins
    assert glossary.terms("It is cold; ice is colder.") == ["rhume", "glace"]  # 'colder' is not 'cold'
    assert glossary.terms("I love new york and NEW YORK.") == ["New York"]  # once, spaces any
    assert glossary.terms("Nothing here.") == [] and Glossary.parse([]).terms("cold") == []


@pytest.mark.parametrize("lines, message", [
    (["cold\trhume", "ice glace"], "line 2: 1 tab-separated columns"),
    (["cold\trhume\textra"], "line 1: 3 tab-separated columns"),
    (["\trhume"], "line 1: an empty source term"),
    (["cold\t "], "line 1: an empty target term"),
    (["cold\trhume", "Cold\tfroid"], "line 2: 'Cold' is listed twice"),
])
def test_a_bad_glossary_is_one_error_naming_the_line(lines, message):
    with pytest.raises(NmtError, match=message):
        Glossary.parse(lines)


def test_a_real_model_writes_the_terms_with_both_engines_and_keeps_its_numbers(protected_run):
    for engine in engines(protected_run):
        model = nmt.load(protected_run, engine=engine)
        plain = model.translate(["I see a cat.", "I have 23 cats."], beam=4)
        assert "chien" not in " ".join(plain)  # what the glossary must change
        for beam in (1, 4):
            found = model.nbest(["I see a cat.", "I have 23 cats."], n=2, beam=beam,
                                glossary={"cat": "chien", "cats": "chiens"})
            for hyps, term in zip(found, ("chien", "chiens")):
                assert hyps
                for hyp in hyps:  # as a word: "chiens" does not hold the term "chien"
                    assert holds(hyp.text, term), (engine, beam, hyp.text)
            with_number = model.translate("I have 23 cats.", beam=beam, glossary={"cats": "chiens"})
            assert holds(with_number, "chiens") and "23" in with_number, with_number


def test_an_empty_glossary_decodes_exactly_as_none(protected_run):
    model = nmt.load(protected_run)
    texts = ["I see a cat.", "I have 23 cats.", "You like the small bird again."]
    for glossary in (Glossary(()), {"zebra": "zèbre"}):  # none, and one that matches nothing
        for beam in (1, 4):
            assert [[(h.text, h.score) for h in hs] for hs in model.nbest(texts, n=2, beam=beam, glossary=glossary)] \
                == [[(h.text, h.score) for h in hs] for hs in model.nbest(texts, n=2, beam=beam)]


def test_nmt_translate_takes_a_glossary_file_and_says_what_is_wrong_with_one(protected_run, tmp_path):
    runner = CliRunner()
    terms = tmp_path / "terms.tsv"
    terms.write_text("cat\tchien\n", encoding="utf-8")
    result = runner.invoke(app, ["translate", "I see a cat.", "-c", str(protected_run), "--glossary", str(terms)])
    assert result.exit_code == 0 and holds(result.stdout, "chien"), result.output
    terms.write_text("cat\tchien\nbird oiseau\n", encoding="utf-8")
    for path, message in ((terms, "line 2: 1 tab-separated columns"), (tmp_path / "none.tsv", "not found")):
        result = runner.invoke(app, ["translate", "I see a cat.", "-c", str(protected_run), "--glossary", str(path)])
        assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output, result.output


def test_a_stream_longer_than_a_chunk_takes_one_glossary_a_line(protected_run):
    """Each line keeps its own glossary across chunks: the list is sliced with the lines."""
    model = nmt.load(protected_run)
    lines = ["I see a cat.", "I see a dog.", "I see a cat.", "I see the car.", "I see a cat."]
    glossaries = [{"cat": "chien"}, None, {"cat": "oiseau"}, {"car": "bateau"}, {}]
    per_line = list(model.translate_stream(lines, beam=1, chunk_size=2, glossary=glossaries))
    one_by_one = [model.translate(line, beam=1, glossary=g) for line, g in zip(lines, glossaries)]
    assert per_line == one_by_one
    assert holds(per_line[0], "chien") and holds(per_line[2], "oiseau") and holds(per_line[3], "bateau")
    with pytest.raises(NmtError, match="1 glossaries for 2 sentences"):
        list(model.translate_stream(lines, chunk_size=2, glossary=glossaries[:3]))


def test_a_glossary_saved_as_spreadsheets_save_it_is_read_as_written_and_a_non_utf8_one_is_one_error(tmp_path):
    path = tmp_path / "terms.tsv"
    path.write_bytes("\ufeffcold\trhume\nice\tglace\n".encode("utf-8"))  # "UTF-8 TSV" with a byte-order mark
    assert Glossary.read(path).terms("I have a cold and ice.") == ["rhume", "glace"]
    path.write_bytes("café\tcafé\n".encode("latin-1"))
    with pytest.raises(NmtError, match=r"terms.tsv is not UTF-8 .*save it as UTF-8"):
        Glossary.read(path)


def test_a_term_the_vocabulary_spells_only_in_bytes_is_refused_with_one_warning(protected_run, caplog):
    model = nmt.load(protected_run)
    with caplog.at_level("WARNING"):
        out = model.translate(["I see a cat."], beam=4, glossary={"cat": "🐈"})[0]
    assert out == model.translate(["I see a cat."], beam=4)[0] and "\ufffd" not in out
    assert "glossary term '🐈' holds a character the target vocabulary cannot write" in caplog.text
