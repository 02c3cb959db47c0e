"""Training with terms (data.terms): sources annotated with the target word of an aligned source word,
read by the encoder through the decoder's embedding; a glossary annotates alike at translation."""

import dataclasses
import random

import numpy as np
import pytest
import torch
from conftest import TINY

from nmt.config import config_from_dict
from nmt.data.batches import Example, collate
from nmt.data.terms import TermAnnotator, TermSlots, annotated, term_spans, word_of_each
from nmt.data.vocab import SPECIALS, Vocab
from nmt.inference.translator import Translator
from nmt.model import build_model
from nmt.training import distributed
from nmt.training.loop import train_step
from nmt.training.run_data import load_data

SRC = Vocab(list(SPECIALS) + ["▁the", "▁film", "▁was", "▁good", "."])
TGT = Vocab(list(SPECIALS) + ["▁le", "▁long", "mé", "trage", "▁était", "▁bon", "."])


def pair() -> tuple[list[int], list[int], np.ndarray]:
    """the film was good . -> le longmétrage était bon . and its piece links (film: all three pieces)."""
    src = SRC.encode(["▁the", "▁film", "▁was", "▁good", "."]) + [SRC.eos_id]
    tgt = TGT.encode(["▁le", "▁long", "mé", "trage", "▁était", "▁bon", "."]) + [TGT.eos_id]
    return src, tgt, np.array([[0, 0], [1, 1], [1, 2], [1, 3], [2, 4], [3, 5], [4, 6]])


def test_words_group_pieces_and_leave_out_specials_punctuation_and_short_words():
    pieces = ["▁the", "▁long", "-", "mé", "trage", "▁l", "'", "homme", ".", "<eos>", "⦅N1⦆"]
    word, annotatable = word_of_each(pieces)
    assert word.tolist() == [0, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9]  # punctuation stands alone, mé+trage is one word
    assert annotatable.tolist() == [True, True, False, True, False, False, True, False, False, False]


def test_a_pair_is_annotated_after_a_source_word_with_its_whole_target_word_and_links_move():
    src, tgt, links = pair()
    annotator = TermAnnotator(SRC, TGT)
    slots = annotator.slots
    assert (slots.start, slots.end, slots.offset) == (len(SRC), len(SRC) + 1, len(SRC) + 2)
    candidates = annotator.candidates(src, tgt, links)
    film = (1, 1, [TGT.stoi[p] for p in ("▁long", "mé", "trage")])
    assert film in candidates and (4, 4, [TGT.stoi["."]]) not in candidates  # punctuation is never a term
    assert all(first != 0 for first, _, _ in candidates)  # "the" -> "le": two letters, not a term
    ids, moved = annotated(src, [film], slots)
    assert ids == src[:2] + [slots.start] + [slots.offset + t for t in film[2]] + [slots.end] + src[2:]
    assert moved.tolist() == [0, 1, 7, 8, 9, 10]
    done = annotator.annotate(src, tgt, links, random.Random(0))
    assert done is not None
    new_src, new_links = done
    # every link still joins the same two tokens
    assert all(new_src[s] == src[old] for (s, _), (old, _) in zip(new_links, links))
    assert annotator.annotate(src, tgt, np.zeros((0, 2), dtype=np.int64), random.Random(0)) is None


def test_the_replace_form_puts_the_term_in_place_of_its_source_words_and_their_links_on_it():
    src, tgt, links = pair()
    annotator = TermAnnotator(SRC, TGT, form="replace")
    slots = annotator.slots
    assert slots.replaces and not TermAnnotator(SRC, TGT).slots.replaces
    film = (1, 1, [TGT.stoi[p] for p in ("▁long", "mé", "trage")])
    ids, moved = annotated(src, [film], slots)
    assert ids == src[:1] + [slots.start] + [slots.offset + t for t in film[2]] + [slots.end] + src[2:]
    assert moved.tolist() == [0, 2, 6, 7, 8, 9]  # film's links go to the term's first piece
    # a word of two pieces is replaced whole; of two overlapping terms the first is annotated alone
    two = SRC.encode(["▁the", "▁film", "▁film", "."]) + [SRC.eos_id]
    ids, moved = annotated(two, [(1, 2, [7]), (2, 2, [8])], slots)
    assert ids == two[:1] + slots.annotation([7]) + two[3:] and moved.tolist() == [0, 2, 2, 4, 5]
    for seed in range(5):
        new_src, new_links = annotator.annotate(src, tgt, links, random.Random(seed))
        kept = [t for t in new_src if t < slots.start]
        assert 1 <= new_src.count(slots.start) == len(src) - len(kept)  # each term stands for one one-piece word
        assert len(np.unique(new_links, axis=0)) == len(new_links)
        source_of = {t: s for s, t in links.tolist()}  # (each target piece is linked once in this pair)
        for s, t in new_links.tolist():  # a kept word keeps its link; a replaced one's is on its term's first piece
            assert new_src[s] == src[source_of[t]] or new_src[s - 1] == slots.start


def test_two_words_linked_to_one_are_no_term():
    src, tgt, links = pair()
    tangled = np.vstack([links, [[2, 5]]])  # "was" also linked to "bon": bon is no one word's alone
    assert all(first != 3 for first, _, _ in TermAnnotator(SRC, TGT).candidates(src, tgt, tangled))


def test_a_glossary_term_is_found_at_the_first_words_that_spell_it():
    pieces = ["▁the", "▁Film", "▁was", "▁New", "▁Y", "ork", ".", "▁film"]
    # its words' first and last piece (annotated after the last, placed where attention reads them): any case,
    # any spaces; a term not spelled is None; a term found again takes the next words that spell it
    assert term_spans(pieces, ["film", "new  york", "absent", "FILM"]) == [(1, 1), (3, 5), None, (7, 7)]
    assert term_spans(pieces, ["fil"]) == [None]  # whole words only


def test_the_encoder_reads_target_pieces_through_the_decoders_embedding():
    cfg = config_from_dict({**TINY, "data": {**TINY["data"], "terms": 0.3}})
    model = build_model(cfg.model, SRC, TGT, terms=True)
    slots = TermSlots.of(SRC)
    assert model.encoder.embedding.num_embeddings == slots.offset
    assert model.encoder.target_pieces.weight is model.decoder.embedding.weight  # one table, trained by both
    ids = torch.tensor([[SRC.stoi["▁film"], slots.start, slots.offset + TGT.stoi["trage"], slots.end]])
    emb = model.encoder.embed(ids)[0]
    assert torch.equal(emb[2], model.decoder.embedding.weight[TGT.stoi["trage"]])
    assert torch.equal(emb[0], model.encoder.embedding.weight[SRC.stoi["▁film"]])
    plain = build_model(cfg.model, SRC, TGT)
    assert plain.encoder.target_pieces is None and plain.encoder.embedding.num_embeddings == len(SRC)
    assert set(plain.state_dict()) < set(model.state_dict())  # a run without the key builds as before


NOUNS = ["cat", "dog", "car", "boat", "tree", "house", "bird", "fish"]
NOMS = ["chat", "chien", "auto", "bateau", "arbre", "maison", "oiseau", "poisson"]


def term_task(seed: int) -> tuple[Vocab, Vocab, list[Example], list[tuple[list[int], int]]]:
    """A word task that only copying solves: "the N is here ." -> "le M est ici ." where M is N's
    word, or, annotated, any noun given after N; held out: annotations of nouns never given after N."""
    sv = Vocab(list(SPECIALS) + ["the", "is", "here", "."] + NOUNS)
    tv = Vocab(list(SPECIALS) + ["le", "est", "ici", "."] + NOMS)
    slots = TermSlots.of(sv)
    rng = random.Random(seed)
    held_out = {(i, (i + 3) % len(NOUNS)) for i in range(len(NOUNS))}

    def example(noun: int, term: int | None) -> Example:
        src = sv.encode(["the", NOUNS[noun], "is", "here", "."]) + [sv.eos_id]
        if term is not None:
            src = annotated(src, [(1, 1, [tv.stoi[NOMS[term]]])], slots)[0]
        shown = NOMS[noun if term is None else term]
        return Example(src, tv.encode(["le", shown, "est", "ici", "."]) + [tv.eos_id])

    pairs = [(i, j) for i in range(len(NOUNS)) for j in range(len(NOUNS)) if (i, j) not in held_out and i != j]
    examples = [example(i, None) for i in range(len(NOUNS))] * 4 + [example(i, j) for i, j in pairs]
    rng.shuffle(examples)
    tests = [(example(i, j).src, tv.stoi[NOMS[j]]) for i, j in sorted(held_out)]
    return sv, tv, examples, tests


def test_a_model_trained_with_terms_writes_a_term_it_was_never_given_for_that_word():
    sv, tv, examples, tests = term_task(0)
    torch.manual_seed(0)
    cfg = config_from_dict({**TINY, "data": {**TINY["data"], "terms": 0.5}, "train": {**TINY["train"], "lr": 0.01}})
    model = build_model(cfg.model, sv, tv, terms=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
    batches = [collate(examples[i:i + 16], tv.pad_id, tv.bos_id) for i in range(0, len(examples), 16)]
    for _ in range(40):
        for batch in batches:
            train_step(model, [batch], optimizer, cfg, tv.pad_id)
    model.eval()
    src = torch.tensor([s for s, _ in tests])
    with torch.no_grad():
        logits = model(src, torch.tensor([len(s) for s, _ in tests]),
                       torch.tensor([[tv.bos_id, tv.stoi["le"]]] * len(tests)))
    written = logits[:, 1].argmax(-1).tolist()  # the word after "le"
    assert sum(w == term for w, (_, term) in zip(written, tests)) >= 7, written


@pytest.mark.parametrize("form", ["append", "replace", None])
def test_a_glossary_annotates_the_source_as_trained_only_for_a_model_trained_with_terms(form):
    data = {**TINY["data"], "terms": 0.3 if form else 0.0, "term_form": form or "append"}
    cfg = config_from_dict({**TINY, "data": data})
    sv = Vocab(list(SPECIALS) + ["the", "film", "was", "good", "."])
    tv = Vocab(list(SPECIALS) + ["le", "long-métrage", "film", "était", "bon", "."])
    model = build_model(cfg.model, sv, tv, terms=bool(form)).eval()
    slots = TermSlots.of(sv, form) if form else None
    translator = Translator(model, sv, tv, cfg.decode, torch.device("cpu"), terms=slots)
    plain = sv.encode(["the", "film", "was", "good", "."]) + [sv.eos_id]
    sentence, = translator.sentences(["the film was good ."], glossary={"film": "long-métrage"})
    term = [tv.stoi["long-métrage"]]
    assert sentence.ids == (annotated(plain, [(1, 1, term)], slots)[0] if slots else plain)
    assert sentence.rules.terms  # the search still guarantees the term
    # and places it where attention reads "film" (and, read by a model trained with terms, its annotation)
    assert sentence.rules.sources == (frozenset({"append": {1, 2, 3, 4}, "replace": {2, 3}, None: {1}}[form]),)
    translator.translate("the film was good .", glossary={"film": "long-métrage"})  # decodes annotated input


def test_training_batches_carry_terms_from_the_stored_links(toy_zip, tmp_path):
    pytest.importorskip("eflomal")
    cfg = config_from_dict({**TINY, "data": {**TINY["data"], "terms": 1.0}})
    data = load_data(cfg, str(toy_zip), tmp_path, None, distributed.SINGLE)
    slots = TermSlots.of(data.src_vocab)
    batch = data.batch(np.arange(64), "1 0 0")
    assert batch.alignment is None  # links read for the terms alone: no guided alignment
    annotated_rows = 0
    for src, tgt in zip(batch.src.tolist(), batch.tgt_out.tolist()):
        if slots.start in src:
            annotated_rows += 1
            given = src[src.index(slots.start) + 1: src.index(slots.end)]
            assert given and all(t >= slots.offset for t in given)
            assert [t - slots.offset for t in given][0] in tgt  # the term is a word of the target
    assert annotated_rows > 32  # (a pair with no word pair linked alone stays as it was)
    same = data.batch(np.arange(64), "1 0 0")
    assert torch.equal(same.src, batch.src)  # drawn from the batch's key: a resumed run sees the same
    data.cfg = dataclasses.replace(data.cfg, terms=0.5)  # a share of the batches, each annotated whole
    annotated_batches = [slots.start in data.batch(np.arange(64), f"1 0 {i}").src for i in range(20)]
    assert 3 <= sum(annotated_batches) <= 17


def test_a_run_trained_with_terms_translates_with_and_without_a_glossary(tmp_path):
    pytest.importorskip("eflomal")
    import yaml
    from typer.testing import CliRunner

    from conftest import protected_corpus

    import nmt
    from nmt.cli import app

    config = tmp_path / "terms.yaml"
    data = {**TINY["data"], "tokenizer": "subword", "vocab_size": 340, "max_len": 24, "protect": True, "terms": 0.3}
    config.write_text(yaml.safe_dump({**TINY, "data": data, "train": {**TINY["train"], "epochs": 2}}))
    result = CliRunner().invoke(app, ["train", str(config), "--data", str(protected_corpus(tmp_path)),
                                      "--out", str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 0, result.output
    model = nmt.load(str(tmp_path / "run"))
    assert model.terms is not None
    with_term = model.translate("I have 12 cats.", glossary={"cats": "matous"})
    assert "matous" in with_term and "12" in with_term  # the search's guarantee, numbers beside it
    assert model.translate("I have 12 cats.")  # without a glossary: the plain source


def test_terms_and_one_shared_embedding_are_refused_together():
    from nmt.errors import ConfigError

    with pytest.raises(ConfigError, match="data.terms"):
        config_from_dict({**TINY, "data": {**TINY["data"], "tokenizer": "subword", "joint_vocab": True, "terms": 0.3},
                          "model": {**TINY["model"], "share_embeddings": True}})
