"""The default recipe: configs/default.yaml's `auto` keys decided for the corpus a run trains on."""

import logging

import numpy as np
import pytest
import yaml
from conftest import REPO, TINY, toy_lines, write_corpus_zip

from nmt.config import RECIPE_KEYS, config_from_dict, load_config
from nmt.errors import ConfigError, DataError
from nmt.training.loop import train
from nmt.training.recipe import MAX_DROPPED, max_len_for, size_band

# configs/default.yaml's values of the recipe's keys before the recipe: what a fra-eng-sized corpus keeps
FRA_ENG_BEFORE = {"vocab_size": 8000, "dropout": 0.2, "embed_dropout": 0.0, "output_dropout": 0.0,
                  "label_smoothing": 0.0, "lr": 0.002}


def test_a_corpus_of_fra_engs_size_or_larger_keeps_the_settings_measured_on_fra_eng():
    for pairs in (60_000, 162_252, 36_000_000):
        band = size_band(pairs)
        assert {key: getattr(band, key) for key in FRA_ENG_BEFORE} == FRA_ENG_BEFORE


def test_a_small_corpus_gets_a_smaller_vocabulary_and_more_regularization():
    small, large = size_band(29_000), size_band(162_000)
    assert 1000 <= small.vocab_size < large.vocab_size
    assert small.vocab_size == 2000  # Multi30k's size: 2,000 pieces beat 1,000, 3,000 and 5,000 (docs/results.md)
    assert small.dropout > large.dropout and small.embed_dropout > 0 and small.output_dropout > 0
    assert small.label_smoothing > 0 and small.lr > large.lr
    assert size_band(500).vocab_size == 1000  # SentencePiece cannot learn more pieces than a tiny corpus holds


def test_max_len_keeps_all_but_a_sliver_of_the_pairs(tmp_path):
    lengths = np.random.default_rng(0).integers(5, 60, 10_000)
    chosen = max_len_for(lengths, tmp_path)
    assert np.mean(lengths > chosen) <= MAX_DROPPED < np.mean(lengths > chosen - 1)
    with pytest.raises(DataError, match="split into sentences"):
        max_len_for(np.full(100, 400), tmp_path)  # whole documents a line


def test_auto_is_the_only_word_a_recipe_key_takes():
    raw = yaml.safe_load((REPO / "configs/default.yaml").read_text())
    assert set(config_from_dict(raw).auto_keys()) <= set(RECIPE_KEYS)
    raw["model"]["dropout"] = "high"
    with pytest.raises(ConfigError, match="model.dropout must be a number or auto"):
        config_from_dict(raw)


def _train_auto(corpus, out, **overrides):
    raw = {**TINY, "data": {**TINY["data"], "max_len": "auto", "vocab_size": "auto", "tokenizer": "subword"},
           "model": {**TINY["model"], "dropout": "auto", "embed_dropout": "auto", "output_dropout": "auto"},
           "train": {**TINY["train"], "epochs": "auto", "label_smoothing": "auto", "max_minutes": 0}}
    for dotted, value in overrides.items():
        section, key = dotted.split("__")
        raw[section][key] = value
    out.mkdir()
    train(config_from_dict(raw), out, str(corpus), quiet=True)
    return yaml.safe_load((out / "config.yaml").read_text())


def test_a_run_logs_its_recipe_and_writes_the_numbers_it_chose(toy_zip, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    written = _train_auto(toy_zip, tmp_path / "run")
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("recipe for"))
    pairs = len(toy_lines())
    assert f"{pairs:,} pairs in the corpus: small" in line and "data.max_len=" in line
    band = size_band(pairs)
    assert written["data"]["vocab_size"] == band.vocab_size and written["model"]["output_dropout"] == 0.3
    assert written["train"]["epochs"] == 10  # no time budget: 10 epochs
    assert isinstance(written["data"]["max_len"], int) and written["data"]["max_len"] > 2
    # the config as written trains again as it is: no `auto` left in it
    assert config_from_dict(written).auto_keys() == []


def test_a_key_the_user_sets_is_never_touched(toy_zip, tmp_path):
    written = _train_auto(toy_zip, tmp_path / "run", model__dropout=0.05, data__max_len=12)
    assert written["model"]["dropout"] == 0.05 and written["data"]["max_len"] == 12
    assert written["model"]["embed_dropout"] == 0.2  # the keys left to it are still decided


def test_a_corpus_of_long_documents_is_one_clear_error(tmp_path):
    words = " ".join(f"w{i}" for i in range(300))
    corpus = write_corpus_zip(tmp_path / "docs.zip", [f"{words} {i}.\t{words} {i} !" for i in range(300)])
    with pytest.raises(DataError, match="split into sentences"):  # (made-up words, the same on both sides: not cleaned)
        _train_auto(corpus, tmp_path / "run", data__drop_copies=False, data__drop_language=0.0)


def test_the_default_config_leaves_the_recipe_its_keys():
    cfg = load_config(REPO / "configs/default.yaml")
    assert set(cfg.auto_keys()) == set(RECIPE_KEYS)
    assert cfg.train.patience > 0  # early stopping inside the budget


@pytest.mark.parametrize("installed", [True, False])
def test_guided_alignment_is_chosen_where_eflomal_is_installed_and_said_where_not(toy_zip, tmp_path, caplog,
                                                                                monkeypatch, installed):
    from nmt.training import recipe

    if installed and not recipe.aligner_installed():
        pytest.skip("eflomal is not installed here")
    monkeypatch.setattr(recipe, "aligner_installed", lambda: installed)
    caplog.set_level(logging.INFO)
    written = _train_auto(toy_zip, tmp_path / "run", train__guided_alignment="auto")
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("recipe for"))
    assert written["train"]["guided_alignment"] == (recipe.GUIDED_WEIGHT if installed else 0.0)
    assert ("eflomal is not installed" in line) is not installed


def test_the_pair_count_is_remembered_until_the_corpus_changes(tmp_path, monkeypatch):
    from nmt.training import recipe

    corpus = write_corpus_zip(tmp_path / "toy-fra-eng.zip", toy_lines())
    cfg = config_from_dict({**TINY, "data": {**TINY["data"], "prepared_dir": str(tmp_path / "prepared")}}).data
    counted = []
    real_count = recipe.count_pairs
    monkeypatch.setattr(recipe, "count_pairs", lambda *a: counted.append(1) or real_count(*a))
    first = recipe.counted_pairs(corpus, cfg)
    assert first == len(toy_lines()) and len(counted) == 1
    assert recipe.counted_pairs(corpus, cfg) == first and len(counted) == 1  # the record, not the corpus
    write_corpus_zip(corpus, toy_lines()[:100])  # the corpus changes under the same name
    assert recipe.counted_pairs(corpus, cfg) == 100 and len(counted) == 2


def test_the_length_limit_and_its_training_lengths_are_kept_in_the_prepared_folder(tmp_path, monkeypatch):
    from nmt.data.batches import lengths_file, training_lengths
    from nmt.data.prepare import ensure_prepared
    from nmt.data.prepared_corpus import PreparedCorpus
    from nmt.training import recipe

    corpus = write_corpus_zip(tmp_path / "toy-fra-eng.zip", toy_lines())
    cfg = config_from_dict({**TINY, "data": {**TINY["data"], "prepared_dir": str(tmp_path / "prepared")}}).data
    folder = ensure_prepared(corpus, cfg, quiet=True)
    read = []
    real_ids = PreparedCorpus.ids
    monkeypatch.setattr(PreparedCorpus, "ids", lambda self, *a: read.append(a) or real_ids(self, *a))
    first = recipe.length_limit(folder, cfg, corpus)
    assert len(read) == 2 and 2 < first[0] <= recipe.MAX_LEN_CAP and 1 - MAX_DROPPED <= first[1] <= 1
    # The training set's lengths under that limit are kept too, so a run's first start reads no sizes.
    prepared = PreparedCorpus(folder, cfg)
    src, tgt = real_ids(prepared, "train", "src"), real_ids(prepared, "train", "tgt")
    kept = np.load(lengths_file(folder, first[0]))
    assert kept.shape == (2, len(src)) and (kept == training_lengths(src, tgt, first[0]).arrays()).all()
    assert recipe.length_limit(folder, cfg, corpus) == first and len(read) == 2  # the record, not the stores
    monkeypatch.setattr(recipe, "MAX_DROPPED", 0.5)  # another rule: worked out again
    assert recipe.length_limit(folder, cfg, corpus)[0] <= first[0] and len(read) == 4
