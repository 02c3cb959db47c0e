"""Cleaning a corpus's training split: each rule drops what it names and keeps good pairs, a prepare
says what went (a line a rule, dropped.tsv, the manifest), the dev and test pairs are never touched,
and a corpus that is mostly noise, a language the identifier does not know or a mistyped rule is one
clear line."""

import dataclasses
import json
import logging
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import toy_lines
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config import ConfigError, DataConfig, load_config
from nmt.data.cleaning.duplicates import SeenPairs
from nmt.data.cleaning.rules import PairRules, Ratio, pair_key
from nmt.data.corpus import split_of
from nmt.data.prepare import ensure_prepared
from nmt.data.prepared_corpus import TRAINING_WORDS, word_counts
from nmt.data.tokenizer import TOKENIZER
from nmt.errors import DataError

GOOD = ("The cat sleeps on the mat in the kitchen.", "Le chat dort sur le tapis de la cuisine.")


@pytest.mark.parametrize("pair, rule", [
    (("...", "Bonjour tout le monde."), "empty"),
    (("Good morning, everyone.", "!! ?"), "empty"),
    (("<p>The cat sleeps on the mat.</p>", "Le chat dort sur le tapis."), "junk"),
    (("The cat sleeps on the mat.", "Le chat dort sur le tapis&nbsp;."), "junk"),
    (("The café is open all night.", "Le cafÃ© est ouvert toute la nuit."), "junk"),
    (("http://example.com/page?id=3", "http://example.com/fr/page?id=3"), "junk"),
    (("www.example.org/news", "www.example.org/fr/news"), "junk"),
    (("The cat sleeps on the mat.", "the cat sleeps on the mat!"), "copies"),
    (("The cat sleeps on the mat in the kitchen.", "Die Katze schläft auf der Matte in der Küche."), "language"),
    (("Die Katze schläft auf der Matte in der Küche.", "Le chat dort sur le tapis de la cuisine."), "language"),
    (GOOD, None),
    (("Tom & Mary left at 7:45, see example.com.", "Tom et Marie sont partis à 7 h 45, voir example.com."), None),
    (("I love you <3", "Je t'aime <3"), None),
    (("Crème brûlée is my favourite dessert.", "La crème brûlée est mon dessert préféré."), None),
])
def test_each_pair_rule_drops_what_it_names_and_keeps_good_pairs(pair, rule):
    assert PairRules(DataConfig()).broken(*pair) == rule


def test_a_rule_taken_off_keeps_its_pairs():
    copy = ("The cat sleeps on the mat.", "The cat sleeps on the mat.")
    assert PairRules(DataConfig(drop_copies=False)).broken(*copy) == "language"  # the next rule still holds
    assert PairRules(DataConfig(drop_copies=False, drop_language=0)).broken(*copy) is None


def test_the_ratio_rule_reads_the_corpus_s_own_mean_and_leaves_short_pairs_alone():
    ratio = Ratio(3.0)
    src = np.array([40, 40, 40, 40, 3, 40])
    tgt = np.array([48, 44, 50, 400, 10, 13])  # (3 and 10 characters: too short to judge)
    assert ratio.outliers(src, tgt).tolist() == [False, False, False, True, False, True]
    assert not Ratio(0).outliers(src, tgt).any()


def test_duplicates_are_found_within_a_chunk_and_across_chunks_case_and_punctuation_aside():
    seen = SeenPairs(0)
    a, b = pair_key("The cat sleeps.", "Le chat dort."), pair_key("The dog sleeps.", "Le chien dort.")
    assert pair_key("the cat  sleeps!", "Le chat dort !") == a
    assert seen.repeated(np.array([a, b, a], np.int64)).tolist() == [False, False, True]
    assert seen.repeated(np.array([pair_key("A bird sings.", "Un oiseau chante."), b], np.int64)).tolist() == [False, True]


def _noisy(tmp_path, noise: list[str]) -> tuple:
    """The toy corpus with `noise` lines after its 10th line; the lines' numbers in the file."""
    lines = toy_lines()
    lines[10:10] = noise
    path = tmp_path / "noisy.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, lines


NOISE = ["The weather is lovely today in the park.\tThe weather is lovely today in the park.",
         "— * —\tAccueil",
         "<div>We walked home after the concert.</div>\t<div>Nous sommes rentrés après le concert.</div>",
         "She reads a book every evening before bed.\tSie liest jeden Abend vor dem Schlafengehen ein Buch."]


def test_a_prepare_drops_the_noise_of_the_training_split_and_says_what_went(tmp_path, caplog):
    lines = toy_lines()
    train_pair = next(line for line in lines if split_of(TOKENIZER.preprocess(line.split("\t")[0])) == "train")
    noise = [line for line in NOISE if split_of(TOKENIZER.preprocess(line.split("\t")[0])) == "train"]
    assert len(noise) >= 3
    again = [train_pair, train_pair.replace(".", " !")]  # after the first: word for word, and but for punctuation
    assert lines.index(train_pair) < 10
    path, lines = _noisy(tmp_path, noise + again)
    cfg = DataConfig(max_len=20, prepared_dir=str(tmp_path / "prepared"))
    with caplog.at_level(logging.INFO):
        folder = ensure_prepared(path, cfg, quiet=True)
    dropped = [row.split("\t") for row in (folder / "dropped.tsv").read_text(encoding="utf-8").splitlines()]
    assert [(int(line), f"{src}\t{tgt}") for _, line, src, tgt in dropped] == \
        [(10 + i + 1, text) for i, text in enumerate(noise + again)]
    rules = Counter(rule for rule, *_ in dropped)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["counts"]["dropped"] == {rule: rules[rule] for rule in manifest["counts"]["dropped"]}
    assert rules["duplicates"] == 2 and rules["empty"] + rules["junk"] + rules["copies"] + rules["language"] == len(noise)
    for rule in ("empty", "junk", "copies", "language", "ratio", "duplicates"):
        assert f"cleaning: {rule}" in caplog.text
    # what went is neither trained on nor counted as a training word
    assert "Abend" not in word_counts(folder / TRAINING_WORDS) and "abend" not in word_counts(folder / TRAINING_WORDS)
    clean = ensure_prepared(_noisy(tmp_path, [])[0], cfg, quiet=True)
    assert word_counts(folder / TRAINING_WORDS) == word_counts(clean / TRAINING_WORDS)
    for split in ("valid", "test"):  # never cleaned
        assert (folder / f"{split}.src.txt.bin").read_bytes() == (clean / f"{split}.src.txt.bin").read_bytes()


@pytest.mark.parametrize("german_after", [False, True])
def test_workers_clean_as_one_process_does(tmp_path, monkeypatch, caplog, german_after):
    """Including the language rule's sample: judged on the first lines, then on the rest only where it
    dropped enough there (German pairs after a clean start are left; among the first, the rule goes on)."""
    from nmt.data import read_pass
    from nmt.data.cleaning import rules

    german = [line for line in NOISE if "Abend" in line]
    lines = toy_lines()
    lines[500 if german_after else 10:0] = german * 3
    path = tmp_path / "noisy.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(read_pass, "CHUNK_LINES", 50)
    monkeypatch.setattr(rules, "LANGUAGE_SAMPLE", 300)
    passes = {}
    for parallel in (False, True):
        monkeypatch.setattr(read_pass, "PARALLEL_FROM", 0 if parallel else float("inf"))
        out = tmp_path / f"parallel-{parallel}"
        out.mkdir()
        with caplog.at_level(logging.INFO):
            counts, src_words, *_ = read_pass.split_corpus(path, DataConfig(drop_duplicates=False), out, quiet=True)
        passes[parallel] = counts, src_words, (out / "dropped.tsv").read_text(encoding="utf-8")
    assert passes[True] == passes[False]
    assert passes[True][0]["dropped"]["language"] == (0 if german_after else 3)
    assert ("leaves the rest of the corpus alone" in caplog.text) == german_after


def test_a_corpus_mostly_noise_is_one_line_and_a_non_zero_exit(tmp_path):
    lines = [f"The weather is fine on day {i} of the trip.\tThe weather is fine on day {i} of the trip."
             for i in range(400)] + toy_lines()[:200]
    path = tmp_path / "copies.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="more than data.drop_max_share 0.5"):
        ensure_prepared(path, DataConfig(prepared_dir=str(tmp_path / "p")), quiet=True)
    result = CliRunner().invoke(app, ["prepare", str(Path(__file__).parents[2] / "configs" / "default.yaml"), "--data",
                                      str(path), "--set", f"data.prepared_dir={tmp_path / 'p'}"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "error: cleaning would drop" in result.output and "--set data.drop_<rule>=false" in result.output
    assert not list((tmp_path / "p").glob("copies-*/manifest.json"))  # nothing half-built is left


def test_a_language_the_identifier_does_not_know_names_the_way_out(tmp_path):
    path = tmp_path / "toy.tsv"
    path.write_text("\n".join(toy_lines()) + "\n", encoding="utf-8")
    cfg = DataConfig(tgt_lang="tlh", prepared_dir=str(tmp_path / "p"))
    with pytest.raises(DataError, match="does not know 'tlh'.*--set data.drop_language=0"):
        ensure_prepared(path, cfg, quiet=True)
    assert ensure_prepared(path, dataclasses.replace(cfg, drop_language=0.0), quiet=True).is_dir()


def test_a_mistyped_rule_or_a_threshold_out_of_range_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['drop_langauge'\]"):
        load_config(Path(__file__).parents[2] / "configs" / "default.yaml", ["data.drop_langauge=0"])
    with pytest.raises(ConfigError, match="data.drop_ratio must be 0 \\(off\\) or more than 1"):
        DataConfig(drop_ratio=0.5)
    with pytest.raises(ConfigError, match="data.drop_language must be a probability"):
        DataConfig(drop_language=1.5)


def test_held_out_pairs_moved_to_training_are_cleaned_and_every_split_counts_what_it_holds(tmp_path, monkeypatch):
    """A large held-out split keeps about HELD_OUT_MAX pairs and the rest train: those the rules drop
    go to dropped.tsv, and neither split counts them."""
    from nmt.data import corpus as corpus_module
    from nmt.data import manifest
    from nmt.data.prepared_corpus import PreparedCorpus

    copies = [f"We met {n} friends at the station today.\tWe met {n} friends at the station today." for n in range(300)]
    held = [line for line in copies if split_of(TOKENIZER.preprocess(line.split("\t")[0])) != "train"]
    assert held  # (copies whose source the md5 rule holds out)
    path, _ = _noisy(tmp_path, copies)
    for module in (corpus_module, manifest):
        monkeypatch.setattr(module, "HELD_OUT_MAX", 2)
    cfg = DataConfig(max_len=20, prepared_dir=str(tmp_path / "prepared"))
    prepared = PreparedCorpus(ensure_prepared(path, cfg, quiet=True), cfg)
    for split in ("train", "valid", "test"):
        assert len(prepared.texts(split, "src")) == prepared.counts[split]
    dropped = (prepared.folder / "dropped.tsv").read_text(encoding="utf-8")
    still_held = {f"{prepared.texts(s, 'src').text(i)}\t{prepared.texts(s, 'tgt').text(i)}"
                  for s in ("valid", "test") for i in range(prepared.counts[s])}
    moved = [line for line in held if line not in still_held]
    assert moved and all(f"copies\t\t{line}\n" in dropped for line in moved)  # (no corpus line: moved from a store)
