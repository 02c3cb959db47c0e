"""The options that regularize and average: subword sampling re-segments each epoch the same way
for the same seed, split digits give numbers the same pieces on both sides, the exponential
average is what translation uses, and a run with both resumes exactly; copy augmentation
swaps shared names and numbers alike on both sides; eval reports the share of numbers copied."""

import random

import numpy as np
import pytest
import torch
import yaml
from conftest import TINY, toy_lines, write_corpus_zip

from nmt.config import config_from_dict
from nmt.data.batches import collate, encode_tokens
from nmt.data.copy_augment import replace_copyable, shared_copyable
from nmt.data.tokenizer import SubwordTokenizer
from nmt.errors import ConfigError
from nmt.evaluation.report import numbers_copied
from nmt.model.checkpoint import load_model, newest_good_checkpoint, read_checkpoint
from nmt.training import distributed
from nmt.training.loop import train
from nmt.training.run_data import load_data

NUMBERS = [f"I have {n} cats.\tJ'ai {n} chats." for n in range(3, 203)]  # 200 sources: some in every split
SUBWORD = {**TINY["data"], "tokenizer": "subword", "vocab_size": 320, "max_len": 24}


def _cfg(data=None, **train_options):
    return config_from_dict({**TINY, "data": {**SUBWORD, **(data or {})},
                             "model": {**TINY["model"], "dropout": 0.2},
                             "train": {**TINY["train"], **train_options}})


@pytest.fixture
def corpus(tmp_path):
    return write_corpus_zip(tmp_path / "toy.zip", toy_lines() + NUMBERS)


def _targets(data, batch):
    """The target sentences of a batch, decoded."""
    return [data.tokenizer.target_text(data.tgt_vocab.decode(row.tolist())) for row in batch.tgt_out]


def _same(a, b):
    return torch.equal(a.src, b.src) and torch.equal(a.tgt_out, b.tgt_out)


def test_sampled_segmentations_differ_by_epoch_and_repeat_by_seed(corpus, tmp_path):
    data = load_data(_cfg({"subword_sampling": 0.3}), str(corpus), tmp_path, None, distributed.SINGLE)
    rows = np.arange(len(data.train))
    first, again, second = (data.batch(rows, f"3/{epoch}/0/0") for epoch in (1, 1, 2))
    assert _same(first, again) and not _same(first, second)  # a resumed run and every process see the same
    best = collate(data.train.examples(rows), data.tgt_vocab.pad_id, data.tgt_vocab.bos_id)
    assert not _same(first, best)
    assert _targets(data, first) == _targets(data, best)  # other pieces, the same sentences
    (tmp_path / "b").mkdir()
    no_sampling = load_data(_cfg(), str(corpus), tmp_path / "b", None, distributed.SINGLE)
    assert no_sampling.texts is None and _same(no_sampling.batch(rows, "3/2/0/0"), best)


def test_shared_names_and_numbers_are_replaced_alike_on_both_sides():
    pair = ("Tom bought 3 apples in Montréal for Mary.", "Tom a acheté 3 pommes à Montréal.")
    assert shared_copyable(*pair) == ["Tom", "3", "Montréal"]  # not Mary (one side), nor lower-case words
    assert shared_copyable("Tom's 13 cats.", "Les 3 chats de Tom.") == ["Tom"]  # 13 is not 3
    (src, tgt), = replace_copyable([pair], 1.0, random.Random(0))
    new = shared_copyable(src, tgt)
    assert len(new) == 3 and not set(new) & {"Tom", "3", "Montréal"} and new[1].isdigit()
    assert src.endswith(" for Mary.") and " pommes à " in tgt  # the rest is untouched
    assert replace_copyable([pair], 1.0, random.Random(0)) == [(src, tgt)]  # the same draw, the same pair
    assert replace_copyable([pair], 0.0, random.Random(0)) == [pair]


def test_copy_augmented_batches_differ_by_epoch_and_repeat_by_seed(corpus, tmp_path):
    data = load_data(_cfg({"copy_augment": 1.0}), str(corpus), tmp_path, None, distributed.SINGLE)
    rows = np.arange(len(data.train))
    first, again, second = (data.batch(rows, f"3/{epoch}/0/0") for epoch in (1, 1, 2))
    assert _same(first, again) and not _same(first, second)
    best = _targets(data, collate(data.train.examples(rows), data.tgt_vocab.pad_id, data.tgt_vocab.bos_id))
    changed = [a for a, b in zip(_targets(data, first), best) if a != b]
    assert changed and all("chats" in t and "J'ai" in t for t in changed)  # only the numbers' pairs
    # Encoding only the changed pairs gives what encoding every pair of the augmented texts gives.
    half = load_data(_cfg({"copy_augment": 0.5}), str(corpus), tmp_path, None, distributed.SINGLE)
    pairs = [(half.texts[0].text(i), half.texts[1].text(i)) for i in rows.tolist()]
    texts = replace_copyable(pairs, 0.5, random.Random("3/1/0/0"))
    src, tgt = half.tokenizer.source_tokens([s for s, _ in texts]), half.tokenizer.target_tokens([t for _, t in texts])
    expected = collate(encode_tokens(src, tgt, half.src_vocab, half.tgt_vocab), half.tgt_vocab.pad_id,
                       half.tgt_vocab.bos_id)
    assert _same(half.batch(rows, "3/1/0/0"), expected)
    with pytest.raises(ConfigError, match="data.copy_augment needs data.tokenizer: subword"):
        config_from_dict({**TINY, "data": {**TINY["data"], "copy_augment": 0.5}})


def test_split_digits_cut_numbers_alike_on_both_sides():
    pairs = [line.split("\t") for line in toy_lines() + NUMBERS]
    split = SubwordTokenizer.train([en for en, _ in pairs], [fr for _, fr in pairs], 320, "bpe", split_digits=True)
    pieces = split.source_tokens(["I have 1987 cats."])[0], split.target_tokens(["J'ai 1987 chats."])[0]
    for side in pieces:
        digits = [p.lstrip("\u2581") for p in side if any(ch.isdigit() for ch in p)]
        assert digits == ["1", "9", "8", "7"], side


def test_averaged_weights_translate_and_resume_exactly(corpus, tmp_path):
    options = dict(ema_decay=0.9, save_every=5, eval_every=0, lr_schedule="constant")
    straight = tmp_path / "straight"
    straight.mkdir()
    train(_cfg({"subword_sampling": 0.2}, epochs=2, **options), straight, str(corpus), quiet=True)
    state = read_checkpoint(straight / "last.pt")
    assert set(state["ema"]) == {n for n, _ in load_model(straight / "last.pt").model.named_parameters()}
    raw = state["model"]["decoder.out.bias"]
    assert not torch.equal(state["ema"]["decoder.out.bias"], raw)  # the average lags the weights
    assert torch.equal(load_model(straight / "last.pt").model.decoder.out.bias, state["ema"]["decoder.out.bias"])

    resumed = tmp_path / "resumed"
    resumed.mkdir()
    train(_cfg({"subword_sampling": 0.2}, epochs=1, **options), resumed, str(corpus), quiet=True)
    _, halfway = newest_good_checkpoint(resumed)
    train(_cfg({"subword_sampling": 0.2}, epochs=2, **options), resumed, str(corpus), quiet=True, resume=halfway)
    end = read_checkpoint(resumed / "last.pt")
    for key in ("model", "ema"):
        assert all(torch.equal(end[key][k], state[key][k]) for k in state[key]), key


def test_numbers_copied():
    assert numbers_copied("Tom bought 3 apples in 1987.", "Tom a acheté 3 pommes en 1987.")
    assert numbers_copied("It's 10:30.", "Il est 10 h 30.")
    assert not numbers_copied("Tom was born in 1987.", "Tom est né en 1978.")
    assert not numbers_copied("I have 3 cats.", "J'ai trois chats.")
    assert not numbers_copied("3 and 3.", "3 et trois.")  # each occurrence counts


@pytest.mark.parametrize("section, key, value", [("data", "subword_sampling", 1.0), ("data", "copy_augment", 1.5), ("train", "ema_decay", 1.0),
                                                 ("train", "ema_decay", -0.1)])
def test_option_ranges(section, key, value):
    with pytest.raises(ConfigError, match=f"{section}.{key} must be in"):
        config_from_dict({**TINY, section: {**TINY[section], key: value}})


def test_eval_reports_numbers_copied(corpus, tmp_path):
    from typer.testing import CliRunner

    from nmt.cli import app

    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**TINY, "train": {**TINY["train"], "epochs": 2}}), encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(app, ["train", str(config), "--data", str(corpus), "--out", str(tmp_path / "run"),
                               "--quiet"]).exit_code == 0
    result = runner.invoke(app, ["eval", "--bleu", "-c", str(tmp_path / "run"), "--data", str(corpus), "--split", "test"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("numbers copied"))
    copied, total = (int(x) for x in line.split()[2:5:2])  # "numbers copied: C of N sources with digits ..."
    assert 0 < total < 20 and 0 <= copied <= total, line
    line = next(x for x in result.stdout.splitlines() if x.startswith("numbers invented"))
    invented, outputs = (int(x.replace(",", "")) for x in line.split()[2:5:2])  # "numbers invented: I of N outputs"
    assert total <= outputs and 0 <= invented <= outputs, line
