"""`nmt train --init-from RUN`: a new run from a parent's weights and vocabularies, with fresh
training state; and `--resume`, which continues only on the corpus a run trained on."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO, TINY, toy_lines, train_toy_model, write_corpus_zip
from typer.testing import CliRunner

from nmt.cli import app


def _train(*args: str) -> None:
    result = CliRunner().invoke(app, ["train", *args, "--quiet"])
    assert result.exit_code == 0, result.output


def _fails(*args: str) -> str:
    result = CliRunner().invoke(app, ["train", *args])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> dict:
    return train_toy_model(tmp_path_factory.mktemp("parent"), epochs=2)


def test_a_child_starts_from_the_parents_weights_with_fresh_training_state(parent, tmp_path):
    # A learning rate of 1e-12 leaves the weights as they were: the child's first validation is the parent's.
    _train("--init-from", str(parent["run"]), "--data", str(parent["corpus"]), "--out", "child",
           "--set", "train.max_steps=1", "--set", "train.lr=0.000000000001")
    best_step = max(_records(parent["run"]), key=lambda r: r["val_bleu"])["step"]
    parent_record = next(r for r in _records(parent["run"]) if r["step"] == best_step)
    child_record = _records(tmp_path / "child")[0]
    assert child_record["step"] == 1  # progress starts over
    assert child_record["val_loss"] == pytest.approx(parent_record["val_loss"], abs=1e-4)
    state = torch.load(tmp_path / "child" / "last.pt", weights_only=True)
    assert state["progress"]["step"] == 1
    assert all(s["step"].item() == 1 for s in state["optimizer"]["state"].values())  # Adam's moments are new
    sha256 = hashlib.sha256((parent["run"] / "best.pt").read_bytes()).hexdigest()
    for config in (state["config"], yaml.safe_load((tmp_path / "child" / "config.yaml").read_text())):
        assert config["train"]["init_from"] == str(parent["run"] / "best.pt")
        assert config["train"]["init_from_sha256"] == sha256
    result = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "child"), "--data", str(parent["corpus"])])
    assert result.exit_code == 0 and f"fine-tuned from {parent['run'] / 'best.pt'} (sha256 {sha256[:12]})" in \
        result.output
    # A fine-tuned run fine-tunes in turn, and names its own parent.
    _train("--init-from", str(tmp_path / "child"), "--data", str(parent["corpus"]), "--out", "grandchild",
           "--set", "train.max_steps=2")
    grandchild = yaml.safe_load((tmp_path / "grandchild" / "config.yaml").read_text())
    assert grandchild["train"]["init_from"] == str(tmp_path / "child" / "best.pt")


def test_a_new_corpus_is_encoded_with_the_parents_vocabularies(parent, tmp_path):
    extra = ["I see a zebra.\tje vois un zèbre.", "We like the giraffe.\tnous aimons la girafe."] * 40
    write_corpus_zip(tmp_path / "domain.zip", extra + toy_lines()[:200])
    _train("--init-from", str(parent["run"]), "--data", "domain.zip", "--out", "domain", "--set", "train.max_steps=3")
    for name in ("src_vocab.txt", "tgt_vocab.txt"):
        assert (tmp_path / "domain" / name).read_text() == (parent["run"] / name).read_text()
    assert "zebra" not in (tmp_path / "domain" / "src_vocab.txt").read_text().split()  # nothing learned anew
    result = CliRunner().invoke(app, ["translate", "-c", str(tmp_path / "domain"), "--beam", "1", "I see a zebra."])
    assert result.exit_code == 0, result.output  # the unseen word is <unk> to this word-level model, as in translation


def test_changes_the_parent_cannot_take_are_one_error_line_and_write_nothing(parent, tmp_path):
    run, corpus = str(parent["run"]), str(parent["corpus"])
    assert "model.hidden_size=64" in _fails("--init-from", run, "--data", corpus, "--set", "model.hidden_size=64")
    assert "data.min_freq=3" in _fails("--init-from", run, "--data", corpus, "--set", "data.min_freq=3")
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(yaml.safe_dump({**TINY, "model": {**TINY["model"], "num_layers": 1}}), encoding="utf-8")
    assert f"{bigger} sets model.num_layers=1" in _fails(str(bigger), "--init-from", run, "--data", corpus)
    assert "no such run directory or checkpoint" in _fails("--init-from", "nowhere", "--data", corpus)
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes((parent["run"] / "best.pt").read_bytes()[:2000])
    assert "corrupt or truncated" in _fails("--init-from", str(damaged), "--data", corpus)
    assert "give one of them" in _fails("--init-from", run, "--resume", run)
    assert not (tmp_path / "runs").exists()
    # Keys that do not shape the vocabularies may change.
    _train("--init-from", run, "--data", corpus, "--out", "longer", "--set", "data.max_len=12",
           "--set", "train.max_steps=2")


def test_the_fine_tuning_config_serves_any_parent(parent, tmp_path):
    """configs/finetune.yaml sets training only: the model and data keys it leaves out are the
    parent's, here a word-level toy model unlike the subword default."""
    _train(str(REPO / "configs" / "finetune.yaml"), "--init-from", str(parent["run"]), "--data", str(parent["corpus"]),
           "--out", "tuned", "--set", "train.max_steps=2", "--set", "train.device=cpu")
    tuned = yaml.safe_load((tmp_path / "tuned" / "config.yaml").read_text())
    parent_config = yaml.safe_load((parent["run"] / "config.yaml").read_text())
    assert tuned["model"] == parent_config["model"] and tuned["data"]["tokenizer"] == "word"
    assert tuned["data"]["max_len"] == parent_config["data"]["max_len"]  # left out: the parent's
    finetune = yaml.safe_load((REPO / "configs" / "finetune.yaml").read_text())
    assert tuned["train"]["lr"] == finetune["train"]["lr"]


def test_resume_continues_only_on_the_corpus_the_run_trained_on(parent, tmp_path):
    _train(str(parent["config"]), "--data", str(parent["corpus"]), "--out", "run", "--set", "train.max_steps=4")
    write_corpus_zip(tmp_path / "other.zip", toy_lines()[:300])
    line = _fails("--resume", "run", "--data", "other.zip", "--set", "train.max_steps=6")
    assert "--init-from" in line and "other.zip" in line
    # Without --data the run finds its own corpus again.
    _train("--resume", "run", "--set", "train.max_steps=6")
    assert _records(tmp_path / "run")[-1]["step"] == 6


def test_a_checkpoint_from_before_the_corpus_record_still_resumes(parent, tmp_path):
    _train(str(parent["config"]), "--data", str(parent["corpus"]), "--out", "old", "--set", "train.max_steps=4")
    recorded = 0
    for path in (tmp_path / "old").glob("*.pt"):  # last.pt and best.pt may be links to a ckpt-*.pt
        state = torch.load(path, weights_only=True)
        recorded += state.pop("corpus", None) is not None
        torch.save(state, path)
    assert recorded
    _train("--resume", "old", "--data", str(parent["corpus"]), "--set", "train.max_steps=6")
    assert _records(tmp_path / "old")[-1]["step"] == 6


def test_the_fine_tuning_config_alone_says_it_needs_a_parent(tmp_path):
    line = _fails(str(REPO / "configs" / "finetune.yaml"))
    assert "missing required section" in line and "--init-from RUN" in line
