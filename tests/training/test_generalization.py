"""What generalizes to numbers: split digits give numbers the same pieces on both sides; eval
reports the share of numbers copied."""

import pytest
import yaml
from conftest import TINY, toy_lines, write_corpus_zip, seed_data

from nmt.data.tokenizer import SubwordTokenizer
from nmt.evaluation.report import numbers_copied

NUMBERS = [f"I have {n} cats.\tJ'ai {n} chats." for n in range(3, 203)]  # 200 sources: some in every split


@pytest.fixture
def corpus(tmp_path):
    return write_corpus_zip(tmp_path / "toy.zip", toy_lines() + NUMBERS)


def test_split_digits_cut_numbers_alike_on_both_sides():
    pairs = [line.split("\t") for line in toy_lines() + NUMBERS]
    cfg = seed_data(tokenizer="subword", vocab_size=320, subword_type="bpe", split_digits=True)
    split = SubwordTokenizer.train([en for en, _ in pairs], [fr for _, fr in pairs], cfg)
    pieces = split.source_tokens(["I have 1987 cats."])[0], split.target_tokens(["J'ai 1987 chats."])[0]
    for side in pieces:
        digits = [p.lstrip("\u2581") for p in side if any(ch.isdigit() for ch in p)]
        assert digits == ["1", "9", "8", "7"], side


def test_numbers_copied():
    assert numbers_copied("Tom bought 3 apples in 1987.", "Tom a acheté 3 pommes en 1987.")
    assert numbers_copied("It's 10:30.", "Il est 10 h 30.")
    assert not numbers_copied("Tom was born in 1987.", "Tom est né en 1978.")
    assert not numbers_copied("I have 3 cats.", "J'ai trois chats.")
    assert not numbers_copied("3 and 3.", "3 et trois.")  # each occurrence counts


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
