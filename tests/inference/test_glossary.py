"""A glossary (`nmt translate --glossary`, `translate(..., glossary=...)`): every source term found
has its target term in the translation, through the one constrained search (greedy, beam, n-best,
sampling, ensembles, both engines), with the number rules still kept."""

import dataclasses

import pytest
import torch
from helpers.engines import engines
from helpers.number_models import IDS, TARGET_IDS, WORDS, biased_model, placeholders_written, sources, strict
from typer.testing import CliRunner

import nmt
from nmt.cli import app
from nmt.data.vocab import SPECIALS, Vocab
from nmt.errors import NmtError
from nmt.inference.text.terms import Pieces, sentence_rules
from nmt.inference.text.terms import TermProgress as Progress
from nmt.inference.ensemble import Ensemble
from nmt.inference.text.glossary import Glossary, closes, elided_form, elides_before, holds, pieces_of
from nmt.inference.decoding.sampling import Sampling, samples
from nmt.inference.decoding.search import Sources, Specials, forced
from nmt.inference.text.steering import steering_for
from nmt.model import build_model
from helpers.searches import beam_search, greedy
from conftest import seed_model

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
        return [[h.tokens] for h in greedy(model, Sources(src, lens, caps, rules), TARGET_IDS)]
    if how == "sample":
        return [[h.tokens for h in hyps] for hyps in samples(model, Sources(src, lens, caps, rules), TARGET_IDS, 3,
                                                               Sampling(seed=1), steer=steering_for(rules))]
    return [[h.tokens for h in hyps] for hyps in beam_search(model, Sources(src, lens, caps, rules), TARGET_IDS, 4,
                                                              nbest=3)]


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
    for hyps in beam_search(ensemble, Sources(src, lens, torch.full((2,), 6), rules), TARGET_IDS, 3, nbest=2):
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


PIECES_VOCAB = Vocab(list(SPECIALS) + ["▁le", "▁chat", "▁long", "ue", "s", ".", "!", "▁mot", "⦅N0⦆"])
LONG, UE, DOT, MOT = (PIECES_VOCAB.stoi[p] for p in ("▁long", "ue", ".", "▁mot"))
PIECES = pieces_of(PIECES_VOCAB.itos, subword=True)


def _pieces_model(**bias: float):
    """A real model whose output layer prefers some pieces (by name) and never writes ▁mot unasked."""
    torch.manual_seed(0)
    model = build_model(seed_model(embed_size=8, hidden_size=16, num_layers=1), PIECES_VOCAB, PIECES_VOCAB).eval()
    with torch.no_grad():
        for piece, value in {**bias, "▁mot": -30.0}.items():
            model.decoder.out.bias[PIECES_VOCAB.stoi[piece]] += value
    return model


def _pieces_decode(model, term, how, pieces, closes=0, cap=8):
    src = torch.tensor([[PIECES_VOCAB.stoi["▁le"], PIECES_VOCAB.stoi["▁chat"], PIECES_VOCAB.eos_id]] * 2)
    rules = [sentence_rules(None, i, terms=[term], pieces=pieces, closes=closes) for i in range(2)]
    batch, ids = Sources(src, torch.full((2,), 3), torch.full((2,), cap), rules), Specials(PIECES_VOCAB.bos_id,
                                                                                         PIECES_VOCAB.eos_id)
    if how == "greedy":
        return [h.tokens for h in greedy(model, batch, ids)]
    if how == "sample":
        return [h.tokens for hyps in samples(model, batch, ids, 3, Sampling(seed=1), steer=steering_for(rules)) for h in hyps]
    return [h.tokens for hyps in beam_search(model, batch, ids, 4, nbest=3) for h in hyps]


def test_the_vocabularys_pieces_that_continue_a_word_and_that_close_a_sentence():
    assert {PIECES_VOCAB.itos[i] for i in PIECES.glued} == {"ue", "s"}  # not specials, placeholders, ▁-pieces
    assert {PIECES_VOCAB.itos[i] for i in PIECES.closers} == {".", "!"}
    assert not pieces_of(["<pad>", "le", "chats", "."], subword=False).glued  # a word tokenizer's tokens are words
    assert [closes(t) for t in ("Go.", "Hi. How are you?", "It costs 3.5 dollars.", "No end", "Wait... what?!")] == [
        0, 1, 0, 0, 1]


def test_the_token_after_a_terms_last_piece_may_not_continue_its_word():
    rules = sentence_rules(None, 0, terms=[(MOT, LONG)], pieces=PIECES)
    written = rules.advance(rules.advance(Progress(), MOT), LONG)
    assert PIECES.glued <= rules.step(written, written=2, room=6, eos_id=PIECES_VOCAB.eos_id).refused
    assert rules.step(rules.advance(written, UE), written=3, room=5, eos_id=PIECES_VOCAB.eos_id) is None  # once
    assert rules.step(rules.advance(Progress(), MOT), 1, 7, PIECES_VOCAB.eos_id).refused.isdisjoint(PIECES.glued)


def test_beam_search_writes_a_term_as_a_whole_word():
    model = _pieces_model(ue=30.0)  # it would continue any word with "ue": "▁long" "ue" is "longue", not the term
    term = (LONG,)
    loose = _pieces_decode(model, term, "beam", Pieces())
    assert any(o[o.index(LONG) + 1:o.index(LONG) + 2] == [UE] for o in loose)  # what the rule has to prevent
    for output in _pieces_decode(model, term, "beam", PIECES):
        assert contains(output, term), output
        assert not set(output[output.index(LONG) + 1:output.index(LONG) + 2]) & PIECES.glued, output


@pytest.mark.parametrize("how", SEARCHES)
def test_a_term_owed_goes_inside_the_sentence_not_after_its_end(how):
    model = _pieces_model(**{".": 30.0})  # it would close its sentence at once, and the term would follow it
    term = (MOT,)
    loose = _pieces_decode(model, term, how, Pieces())  # no closers named: the term after the sentence's end
    assert any(DOT in o[:o.index(MOT)] for o in loose)
    loose = _pieces_decode(model, term, how, PIECES, closes=1)  # a source of two sentences may close one
    assert all(o[:o.index(MOT)].count(DOT) <= 1 for o in loose) and any(DOT in o[:o.index(MOT)] for o in loose)
    for output in _pieces_decode(model, term, how, PIECES):
        assert contains(output, term) and DOT not in output[:output.index(MOT)], output


def test_a_term_owed_is_written_where_attention_reads_its_source_words():
    model = _pieces_model()
    src = torch.tensor([[PIECES_VOCAB.stoi["▁le"], PIECES_VOCAB.stoi["▁chat"], PIECES_VOCAB.eos_id]])
    lens, specials, cap = torch.tensor([3]), Specials(PIECES_VOCAB.bos_id, PIECES_VOCAB.eos_id), torch.tensor([8])
    free = greedy(model, Sources(src, lens, cap), specials)[0].tokens
    read = forced(model, src, lens, specials, [free], scored=False)[0][1].argmax(-1).tolist()  # each step's most read
    first = read[0]  # the source position read most at the first step
    never = [p for p in range(3) if p not in read]  # positions no step reads most

    def placed(sources):
        rules = [sentence_rules(None, 0, terms=[(MOT,)], sources=sources)]
        return greedy(model, Sources(src, lens, cap, rules), specials)[0].tokens

    assert MOT not in free and never  # (this model reads its <eos> most at every step)
    assert placed([[first]])[0] == MOT  # its source words read: the term goes there, not at the sentence's end
    assert placed([])[0] != MOT and MOT in placed([])  # without the positions, where the model would have ended
    assert all(placed([[p]]) == placed([]) for p in never)  # words never read: as without


@pytest.mark.parametrize("how", SEARCHES)
def test_a_glossary_term_begun_is_written_to_its_end(how):
    model = _pieces_model(**{"▁long": 30.0, "ue": -30.0})  # it writes ▁long again and again, never its ue
    for output in _pieces_decode(model, (LONG, UE), how, PIECES):
        first = output.index(LONG)
        assert output[first + 1] == UE, output  # the first ▁long written goes on into the term, not left a stub


class _Reading:
    """A model that keeps each step's attention weights (rows, src_len)."""

    def __init__(self, model):
        self.model, self.weights = model, []

    def encode(self, src, lens):
        return self.model.encode(src, lens)

    def candidates(self, prev_ids, state, *rest):
        out = self.model.candidates(prev_ids, state, *rest)
        self.weights.append(out[4])
        return out


@pytest.mark.parametrize("members", [1, 2])
def test_a_written_terms_source_words_are_read_no_more(members):
    model = _pieces_model()
    model = model if members == 1 else Ensemble([model, _pieces_model(**{"▁long": 1.0})])
    src = torch.tensor([[PIECES_VOCAB.stoi["▁le"], PIECES_VOCAB.stoi["▁chat"], PIECES_VOCAB.eos_id]])
    lens, specials, cap = torch.tensor([3]), Specials(PIECES_VOCAB.bos_id, PIECES_VOCAB.eos_id), torch.tensor([8])

    def read(sources):
        reading = _Reading(model)
        rules = [sentence_rules(None, 0, terms=[(MOT,)], sources=sources)]
        output = greedy(reading, Sources(src, lens, cap, rules), specials)[0].tokens
        return output, [float(w[0, 1]) for w in reading.weights]  # how much each step read "▁chat"

    output, chat = read([[1]])
    written = output.index(MOT)
    assert written + 1 < len(chat) and all(w > 0 for w in chat[:written + 1])  # read until the term is written
    assert all(w == 0 for w in chat[written + 1:])  # then no more
    output, chat = read([])  # its source words not known: read throughout
    assert MOT in output and all(w > 0 for w in chat)


def test_the_source_covered_is_each_written_glossary_terms_words():
    rules = sentence_rules(None, 0, terms=[(MOT,), (LONG, UE)], sources=[[1], [2, 3]])
    assert rules.covered(Progress()) == frozenset()
    once = rules.advance(Progress(), MOT)
    assert rules.covered(once) == {1} and rules.covered(rules.advance(once, LONG)) == {1}  # the second begun, not written
    assert rules.covered(rules.advance(rules.advance(once, LONG), UE)) == {1, 2, 3}
    assert sentence_rules(None, 0, terms=[(MOT,)]).covered(once) == frozenset()  # no positions known


class _Attending:
    """A model whose attention (as search reads it) sits on source position 1 for the first
    `steps` steps, then on position 2."""

    def __init__(self, model, steps):
        self.model, self.steps, self.step = model, steps, 0

    def encode(self, src, lens):
        return self.model.encode(src, lens)

    def candidates(self, prev_ids, state, *rest):
        *out, weights = self.model.candidates(prev_ids, state, *rest)
        weights = torch.zeros_like(weights)
        weights[:, 1 if self.step < self.steps else 2] = 1.0
        self.step += 1
        return (*out, weights)


def test_beam_search_drops_a_hypothesis_that_wrote_its_own_word_where_a_term_was_due():
    model = _pieces_model()
    src = torch.tensor([[PIECES_VOCAB.stoi["▁le"], PIECES_VOCAB.stoi["▁chat"], PIECES_VOCAB.eos_id]])
    lens, specials, cap = torch.tensor([3]), Specials(PIECES_VOCAB.bos_id, PIECES_VOCAB.eos_id), torch.tensor([8])
    rules = [sentence_rules(None, 0, terms=[(MOT,)], sources=[[1]])]

    def outputs(reading_steps):
        hyps = beam_search(_Attending(model, reading_steps), Sources(src, lens, cap, rules), specials, 4, nbest=4)
        return [h.tokens for h in hyps[0]]

    free = [h.tokens for h in beam_search(model, Sources(src, lens, cap), specials, 4, nbest=4)[0]]
    assert all(MOT not in o for o in free)
    # the term's word read at the first step only: whatever else was written there was its translation
    assert all(o[0] == MOT for o in outputs(1)), outputs(1)
    # read for two steps: a word written first (an article) keeps its hypothesis, the term follows it
    assert any(o[0] != MOT and o[1] == MOT for o in outputs(2)), outputs(2)


def test_a_sentence_whose_every_hypothesis_skipped_its_term_keeps_them():
    from nmt.inference.text.steering import _dropped
    chosen, running = torch.zeros(4, 3), torch.tensor([[0.0, -1.0], [0.0, float("-inf")]])
    out = _dropped(chosen, [0, 2], running, k=2)  # sentence 0 keeps row 1; sentence 1 has only row 2 live
    assert out[0].eq(float("-inf")).all() and out[1].eq(0).all() and out[2].eq(0).all()


def test_a_term_written_in_the_place_of_the_models_own_word_is_credited_part_of_that_words_score(monkeypatch):
    from nmt.inference.text import steering
    model = _pieces_model()
    src = torch.tensor([[PIECES_VOCAB.stoi["▁le"], PIECES_VOCAB.stoi["▁chat"], PIECES_VOCAB.eos_id]])
    lens, specials, cap = torch.tensor([3]), Specials(PIECES_VOCAB.bos_id, PIECES_VOCAB.eos_id), torch.tensor([8])
    rules = [sentence_rules(None, 0, terms=[(MOT,)], sources=[[1]])]

    def scores(reading_steps, credit):
        monkeypatch.setattr(steering, "TERM_CREDIT", credit)
        hyps = beam_search(_Attending(model, reading_steps), Sources(src, lens, cap, rules), specials, 4, nbest=4)
        return {tuple(h.tokens): h.score for h in hyps[0]}

    # the term's word read at the first step only: the model's own first word was its translation, and
    # the term that took its place is credited (each output starts with the term, as in the test above)
    credited, plain = scores(1, 0.5), scores(1, 0.0)
    same = credited.keys() & plain.keys()
    assert same and all(credited[o] > plain[o] + 1.0 for o in same), (credited, plain)
    # read for two steps: the model's first word (an article) was not the term's translation, its
    # second was: the term written first keeps its own score, the term written second is credited
    credited, plain = scores(2, 0.5), scores(2, 0.0)
    second = [o for o in credited.keys() & plain.keys() if o[0] != MOT and o[1] == MOT]
    assert second and all(credited[o] > plain[o] + 1.0 for o in second), (credited, plain)
    assert all(o[0] != MOT for o in credited)  # the credit went to the term in its place, not before it


def test_only_a_twin_that_left_the_terms_words_confirms_the_credit():
    from nmt.inference.decoding.policies import Live
    from nmt.inference.text.steering import TermMarks, _credited
    parent, other = Live([1], [0.0], Progress()), Live([2], [0.0], Progress())
    live = [[Live([1, 7], [0.0, -3.0], Progress(), TermMarks(parent=parent, credit=1.5)),
             Live([2, 7], [0.0, -3.0], Progress(), TermMarks(parent=other, credit=1.5)), Live([1, 4], [0.0, -0.5], Progress())]]
    running = torch.tensor([[-3.0, -3.0, -0.5]])
    assert _credited(running, live, [0], {id(parent)}).tolist() == [[-1.5, -3.0, -0.5]]
    assert _credited(running, live, [0], set()) is running


ELISION_VOCAB = Vocab(list(SPECIALS) + ["▁l", "'", "▁ami", "ami", "▁vu", "."])
L, APOSTROPHE, AMI_WORD, AMI_GLUED = (ELISION_VOCAB.stoi[p] for p in ("▁l", "'", "▁ami", "ami"))


def test_after_an_apostrophe_a_vowel_term_is_written_glued_to_it():
    torch.manual_seed(0)  # a real model that would end at once, and never writes "ami" of its own
    model = build_model(seed_model(embed_size=8, hidden_size=16, num_layers=1), ELISION_VOCAB, ELISION_VOCAB).eval()
    with torch.no_grad():
        model.decoder.out.bias[ELISION_VOCAB.eos_id] += 30.0
        model.decoder.out.bias[[AMI_WORD, AMI_GLUED]] -= 30.0
    pieces = pieces_of(ELISION_VOCAB.itos, subword=True)
    assert pieces.elisions == {APOSTROPHE}
    src = torch.tensor([[ELISION_VOCAB.stoi["▁vu"], ELISION_VOCAB.stoi["▁l"], ELISION_VOCAB.eos_id]] * 2)
    specials = Specials(ELISION_VOCAB.bos_id, ELISION_VOCAB.eos_id)

    def outputs(elided, how, prefix=(L, APOSTROPHE)):  # "l'" as the prefix: the term is owed after its apostrophe
        rules = [sentence_rules(None, i, prefix, [(AMI_WORD,)], pieces, elided=elided) for i in range(2)]
        batch = Sources(src, torch.full((2,), 3), torch.full((2,), 6), rules)
        hyps = [greedy(model, batch, specials)] if how == "greedy" else beam_search(model, batch, specials, 4, nbest=3)
        return [h.tokens for found in hyps for h in found]

    for how in ("greedy", "beam"):
        assert all(o[:3] == [L, APOSTROPHE, AMI_WORD] for o in outputs([], how))  # without the elided form: "l' ami"
        assert all(o[:3] == [L, APOSTROPHE, AMI_GLUED] and AMI_WORD not in o for o in outputs([(AMI_GLUED,)], how))
        elsewhere = outputs([(AMI_GLUED,)], how, ())  # no apostrophe before it: the term as a word
        assert all(o[0] == AMI_WORD and AMI_GLUED not in o for o in elsewhere)


def test_a_terms_elided_form_is_what_the_tokenizer_writes_after_an_apostrophe(protected_run):
    tokenizer = nmt.load(protected_run).tokenizer
    glued = elided_form("amis", tokenizer.target_tokens, "fr")
    assert glued and not glued[0].startswith("▁") and "".join(glued) == "amis"
    assert tokenizer.target_tokens(["l'amis"])[0][-len(glued):] == glued
    assert elided_form("chats", tokenizer.target_tokens, "fr") == []  # a consonant: never after an elision
    assert elided_form("amis", tokenizer.target_tokens, "de") == []  # a language that does not elide so
    assert elided_form("hache", tokenizer.target_tokens, "fr") == []  # an aspirated h: "la hache"
    assert not elides_before("héros") and elides_before("hamburger", "it")  # French's list, not Italian's


@pytest.mark.parametrize("word, elides", [("ami", True), ("hôtel", True), ("habitation", True), ("homme", True),
                                          ("honneur", True), ("héroïne", True), ("héros", False), ("honte", False),
                                          ("Hache", False), ("haut", False), ("chat", False)])
def test_french_elides_before_a_vowel_and_a_silent_h_not_an_aspirated_one(word, elides):
    assert elides_before(word) is elides


def test_a_sentence_with_glossary_terms_is_ranked_by_its_own_length_penalty():
    model = _biased_against(NEVER)
    src, lens = sources(2)
    rules = [sentence_rules(None, 0, terms=[(NEVER[0],)]), sentence_rules(None, 1)]
    termed, plain = beam_search(model, Sources(src, lens, torch.full((2,), 8), rules), TARGET_IDS, 4,
                                length_penalty=1.0, nbest=3)
    own = [sentence_rules(None, 0, terms=[(NEVER[0],)], length_penalty=0.6), sentence_rules(None, 1, length_penalty=0.6)]
    assert own[1].length_penalty is None  # a sentence without terms keeps the search's
    glossed, unchanged = beam_search(model, Sources(src, lens, torch.full((2,), 8), own), TARGET_IDS, 4, 1.0, 3)
    for h in glossed:
        assert h.normalized == pytest.approx(h.score / (len(h.tokens) + 1) ** 0.6)
    assert [h.tokens for h in unchanged] == [h.tokens for h in plain]  # a sentence without terms: as before
    assert all(h.normalized == pytest.approx(h.score / (len(h.tokens) + 1)) for h in unchanged)
    assert {tuple(h.tokens) for h in glossed} == {tuple(h.tokens) for h in termed}  # the same ended, ranked anew


def test_translate_ranks_glossary_sentences_by_decode_glossary_length_penalty(protected_run):
    model = nmt.load(protected_run)
    texts, glossary = ["I see a cat.", "I see a dog."], [{"cat": "chats"}, None]
    ranked = {}
    for penalty in (0.6, 1.0):
        model.cfg = dataclasses.replace(model.cfg, glossary_length_penalty=penalty)
        ranked[penalty] = model.translations(texts, beam=4, glossary=glossary)
    (glossed, plain), (glossed_1, plain_1) = ranked[0.6], ranked[1.0]
    assert glossed.tokens == glossed_1.tokens and plain == plain_1  # (the sentence without terms: as it was)
    length = len(glossed.tokens) + 1  # the same score (with any credit for the term), normalized by length^0.6
    assert glossed.score * length ** 0.6 == pytest.approx(glossed_1.score * length, rel=1e-4)
    assert plain.score == pytest.approx(sum(plain.token_scores) / (len(plain.tokens) + 1), rel=1e-4)


def test_samples_of_a_glossary_sentence_are_ranked_by_its_length_penalty(protected_run):
    model = nmt.load(protected_run)
    drawn = model.nbest(["I see a cat."], n=3, sample=Sampling(seed=1), glossary={"cat": "chats"})[0]
    assert all(h.score == pytest.approx(sum(h.token_scores) / (len(h.tokens) + 1) ** 0.6, rel=1e-4) for h in drawn)


def test_a_glossary_term_is_found_at_the_first_words_that_spell_it():
    from nmt.inference.text.glossary import term_spans

    pieces = ["▁the", "▁Film", "▁was", "▁New", "▁Y", "ork", ".", "▁film"]
    # its words' first and last piece (placed where attention reads them): any case, any spaces; a term not
    # spelled is None; a term found again takes the next words that spell it
    assert term_spans(pieces, ["film", "new  york", "absent", "FILM"]) == [(1, 1), (3, 5), None, (7, 7)]
    assert term_spans(pieces, ["fil"]) == [None]  # whole words only
