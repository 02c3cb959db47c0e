"""The subword tokenizer: SentencePiece models learned from the training split, cased text in and
out, no <unk>, and the run directory as the only thing translate and eval need."""

import itertools
import shutil

import pytest
import yaml
from conftest import TINY, toy_lines, write_corpus_zip, seed_data
from typer.testing import CliRunner

from nmt.cli import app
from nmt.data.tokenizer import SubwordTokenizer, legacy_form, source_text, word_text
from nmt.data.vocab import SPECIALS

NAMES = ["Tom", "Mary", "John", "Alice", "Paul", "Emma"]
CITIES = {"Paris": "Paris", "London": "Londres", "Rome": "Rome", "Berlin": "Berlin"}
# Unseen in training: names, numbers and a city, made of characters the corpus has.
RARE = ["Tom bought 3 apples in Montréal.", "Zbigniew met Xavier in 1987.", "Quentin paid 4217 euros."]
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def subword_lines() -> list[str]:
    """The toy language plus names and numbers, cased as real sentences are."""
    lines = toy_lines()
    for (name, (en_city, fr_city)), n in itertools.product(zip(NAMES, CITIES.items()), range(2, 9)):
        lines.append(f"{name} bought {n} apples in {en_city}.\t{name} a acheté {n} pommes à {fr_city}.")
    return lines


@pytest.fixture(scope="module")
def tokenizer() -> SubwordTokenizer:
    pairs = [line.split("\t") for line in subword_lines()]
    cfg = seed_data(tokenizer="subword", vocab_size=320)
    return SubwordTokenizer.train([en for en, _ in pairs], [fr for _, fr in pairs], cfg)


def test_pieces_number_the_specials_first_and_round_trip_cased_text(tokenizer):
    src_vocab, tgt_vocab = tokenizer.vocabularies()
    assert tuple(src_vocab.itos[:4]) == SPECIALS and tuple(tgt_vocab.itos[:4]) == SPECIALS
    for text in ["Tom a acheté 3 pommes à Paris.", "Elle adore thé vert encore !"]:
        pieces = tokenizer.target_tokens([text])[0]
        assert len(pieces) > 1 and tokenizer.target_text(pieces) == text  # case and spacing kept


def test_a_word_boundary_written_twice_decodes_as_one_space(tokenizer):
    pieces = tokenizer.target_tokens(["Tom a acheté 3 pommes."])[0]
    assert "▁" in tokenizer.vocabularies()[1].stoi  # a piece the model can write on its own
    doubled = [p for piece in pieces for p in (["▁", piece] if piece.startswith("▁") else [piece])]
    assert tokenizer.target_text(doubled) == "Tom a acheté 3 pommes."


def test_no_input_of_known_characters_becomes_unk(tokenizer):
    src_vocab, _ = tokenizer.vocabularies()
    for text in RARE + ["Ωμέγα ☃ 😀"]:  # byte fallback spells even characters never seen
        ids = src_vocab.encode(tokenizer.source_tokens([text])[0])
        assert src_vocab.unk_id not in ids, text


def test_input_needs_no_pretokenization(tokenizer):
    assert source_text("Go .", "en") == source_text("Go.", "en") == "Go."
    assert source_text("  Wait ,  what ?", "en") == "Wait, what?"
    assert tokenizer.source_tokens(["I see a cat ."]) == tokenizer.source_tokens(["I see a cat."])


def test_word_output_becomes_french_text_and_back():
    assert word_text(["va", "!"], "fr") == "Va !"
    assert word_text(["non", ",", "merci", "."], "fr") == "Non, merci."
    assert word_text(["qu'est-ce", "que", "c'est", "?"], "fr") == "Qu'est-ce que c'est ?"
    assert legacy_form("Non, merci.") == "non , merci ."
    assert legacy_form("Cours\u202f!") == "cours !"


@pytest.fixture(scope="module")
def subword_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("subword")
    corpus = write_corpus_zip(root / "toy.zip", subword_lines())
    config = root / "subword.yaml"
    cfg = {**TINY, "data": {**TINY["data"], "tokenizer": "subword", "vocab_size": 320, "max_len": 24},
           "train": {**TINY["train"], "epochs": 3}}
    config.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    result = invoke("train", config, "--out", root / "run", "--data", corpus, "--quiet")
    assert result.exit_code == 0, result.output
    return {"run": root / "run", "corpus": corpus}


def test_subword_run_keeps_its_models_and_translates_rare_words_without_unk(subword_run):
    run = subword_run["run"]
    assert (run / "src.spm.model").is_file() and (run / "tgt.spm.model").is_file()
    result = invoke("translate", *RARE, "-c", run)
    assert result.exit_code == 0, result.output
    outputs = result.stdout.splitlines()
    assert len(outputs) == len(RARE) and all(outputs)
    assert not any("<unk>" in o or "\u2047" in o for o in outputs), outputs  # ⁇ is SentencePiece's unk
    beam = invoke("translate", *RARE, "-c", run, "--beam", "3", "--nbest", "2")
    assert beam.exit_code == 0 and "<unk>" not in beam.stdout and "\u2047" not in beam.stdout
    same = invoke("translate", "Go.", "Go .", "-c", run).stdout.splitlines()
    assert same[0] == same[1]
    tokenized = invoke("translate", "I see a cat.", "-c", run, "--tokenized").stdout.strip()
    assert tokenized == legacy_form(tokenized)  # lowercased, punctuation split off


def test_eval_reports_standard_legacy_and_rare_word_figures(subword_run):
    result = invoke("eval", "--bleu", "-c", subword_run["run"], "--data", subword_run["corpus"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    standard = next(x for x in lines if x.startswith("beam 5: BLEU"))
    assert "case:mixed" in standard and "tok:13a" in standard
    legacy = next(x for x in lines if x.startswith("beam 5, lowercased and tokenized (legacy): BLEU"))
    assert "tok:13a" in legacy
    assert any(x.startswith("outputs with <unk>: 0 of") for x in lines), lines
    assert "subword tokenizer" in lines[0]
    hyps = (subword_run["run"] / "hyps.test.beam5.txt").read_text(encoding="utf-8").splitlines()
    assert hyps and any(h[:1].isupper() for h in hyps)  # cased output


def test_missing_or_mismatched_subword_model_is_one_line(subword_run, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(subword_run["run"], broken)
    (broken / "tgt.spm.model").unlink()
    result = invoke("translate", "Go.", "-c", broken)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.count("error: ") == 1 and "tgt.spm.model" in result.output and "missing" in result.output

    pairs = [line.split("\t") for line in subword_lines()]
    cfg = seed_data(tokenizer="subword", vocab_size=360, subword_type="bpe")
    other = SubwordTokenizer.train([en for en, _ in pairs], [fr for _, fr in pairs], cfg)
    other.save(broken)
    result = invoke("translate", "Go.", "-c", broken)
    assert result.exit_code == 1 and "does not match the checkpoint's vocabulary" in result.output
    assert result.output.count("error: ") == 1


def test_too_small_a_vocabulary_is_one_line(tmp_path):
    corpus = write_corpus_zip(tmp_path / "toy.zip", subword_lines())
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump({**TINY, "data": {**TINY["data"], "tokenizer": "subword", "vocab_size": 50}}),
                      encoding="utf-8")
    result = invoke("train", config, "--out", tmp_path / "run", "--data", corpus, "--quiet")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.count("error: ") == 1 and "data.vocab_size=50" in result.output
