"""Fixtures: a toy corpus in the fra-eng zip layout, written here (no corpus lines are copied),
tiny configs, fixed seeds, CPU only."""

from __future__ import annotations

import itertools
import os
import random
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

SUBJECTS = {"I": "je", "You": "tu", "He": "il", "She": "elle", "We": "nous"}
VERBS = {"see": "vois", "want": "veux", "have": "ai", "like": "aime"}
OBJECTS = {"a cat": "un chat", "a dog": "un chien", "the house": "la maison", "the car": "la voiture",
           "red apples": "pommes rouges", "a big boat": "un grand bateau", "the small bird": "le petit oiseau",
           "green tea": "thé vert"}
WHEN = {"": "", " today": " aujourd'hui", " again": " encore"}
REPO = Path(__file__).resolve().parent.parent
REAL_CORPUS = REPO.parent / "shared" / "data" / "fra-eng.zip"


def toy_lines() -> list[str]:
    """~600 'English<TAB>French' lines of a made-up word-for-word language; some sources get two
    translations so that multi-reference scoring is exercised."""
    lines = []
    for (en_s, fr_s), (en_v, fr_v), (en_o, fr_o), (en_w, fr_w) in itertools.product(
            SUBJECTS.items(), VERBS.items(), OBJECTS.items(), WHEN.items()):
        lines.append(f"{en_s} {en_v} {en_o}{en_w}.\t{fr_s.capitalize()} {fr_v} {fr_o}{fr_w}.")
        if en_v == "like":
            lines.append(f"{en_s} {en_v} {en_o}{en_w}.\t{fr_s.capitalize()} adore {fr_o}{fr_w} !")
    return lines


def write_corpus_zip(path: Path, lines: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("fra-eng/_about.txt", "toy corpus for tests\n")
        z.writestr("__MACOSX/fra-eng/._fra.txt", b"\x00\x05\x16\x07 mac resource fork")
        z.writestr("fra-eng/fra.txt", "\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session", autouse=True)
def _session_outside_the_repository(tmp_path_factory):
    """Module- and session-scoped fixtures train before any test's own chdir: from a scratch folder,
    so their prepared corpora (data.prepared_dir is relative) never land in the repository's data/."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("session-cwd"))
        patch.setenv("NMT_CACHE_DIR", str(tmp_path_factory.mktemp("session-cache")))
        yield


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """Fixed seeds, CPU, and no corpus path leaking in from the environment unless a test sets it."""
    torch.manual_seed(0)
    monkeypatch.delenv("NMT_CORPUS", raising=False)
    monkeypatch.setenv("NMT_CACHE_DIR", str(tmp_path / ".nmt-cache"))  # precision measurements stay here
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def toy_zip(tmp_path) -> Path:
    return write_corpus_zip(tmp_path / "toy-fra-eng.zip", toy_lines())


# The seed's design, as nmt's defaults were before they became configs/default.yaml's: the suite's
# toy models and corpora say so here rather than each test.
SEED = {"data": {"tokenizer": "word", "subword_type": "unigram", "split_digits": False, "protect": False},
        "model": {"bidirectional": False, "tie_embeddings": False, "decoder": "stepwise"},
        "train": {"lr_schedule": "constant", "max_minutes": 0.0, "eval_every": 0, "patience": 0}}
TINY = {
    "data": {**SEED["data"], "max_len": 10, "min_freq": 1},
    "model": {**SEED["model"], "embed_size": 32, "hidden_size": 48, "num_layers": 2, "dropout": 0.0,
              "attention": "additive"},
    "train": {**SEED["train"], "batch_size": 16, "lr": 0.01, "epochs": 2, "seed": 3, "log_every": 10,
              "device": "cpu", "val_bleu_sentences": 50, "threads": 1},
    "decode": {"batch_size": 32},
}


def seed_data(**keys):
    from nmt.config import DataConfig
    return DataConfig(**{**SEED["data"], **keys})


def seed_model(**keys):
    from nmt.config import ModelConfig
    return ModelConfig(**{**SEED["model"], **keys})


def seed_train(**keys):
    from nmt.config import TrainConfig
    return TrainConfig(**{**SEED["train"], **keys})


@pytest.fixture
def tiny_config(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY), encoding="utf-8")
    return path


@pytest.fixture
def real_corpus() -> Path:
    """The real fra-eng corpus: $NMT_TEST_CORPUS, ../shared beside the repository (CI's layout) or
    the data/ cache; tests that need it are skipped where none is found."""
    candidates = [Path(p) for p in (os.environ.get("NMT_TEST_CORPUS"),) if p] + [
        REAL_CORPUS, REPO / "data" / "fra-eng.zip"]
    for path in candidates:
        if path.is_file():
            return path
    pytest.skip("real fra-eng corpus not found (../shared/data/fra-eng.zip)")


def train_toy_model(root: Path, epochs: int) -> dict:
    """A tiny model trained through the CLI on the toy corpus in `root`: its run directory, corpus
    and config, for the tests that only read a trained model."""
    from typer.testing import CliRunner

    from nmt.cli import app

    corpus = write_corpus_zip(root / "toy.zip", toy_lines())
    config = root / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "train": {**TINY["train"], "epochs": epochs}}), encoding="utf-8")
    result = CliRunner().invoke(app, ["train", str(config), "--out", str(root / "run"), "--data", str(corpus),
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    return {"run": root / "run", "corpus": corpus, "config": config}


def protected_corpus(root: Path) -> Path:
    """The toy corpus plus "I have N cats." for 150 numbers, as a zip in `root`."""
    rng = random.Random(1)
    numbered = [f"I have {n} cats.\tJ'ai {n} chats." for n in rng.sample(range(10, 1000), 150)]
    return write_corpus_zip(root / "toy-numbers.zip", toy_lines() + numbered)


def train_protected_model(root: Path, epochs: int = 12, seed: int = 3, model: dict | None = None,
                          corpus: Path | None = None, name: str = "run") -> Path:
    """A tiny subword model with data.protect trained through the CLI on `protected_corpus`; its run directory."""
    from typer.testing import CliRunner

    from nmt.cli import app

    corpus = corpus or protected_corpus(root)
    config = root / f"{name}.yaml"
    data = {**TINY["data"], "tokenizer": "subword", "vocab_size": 340, "max_len": 24, "protect": True}
    train = {**TINY["train"], "epochs": epochs, "seed": seed, "save_every": 40}
    config.write_text(yaml.safe_dump({**TINY, "data": data, "model": {**TINY["model"], **(model or {})},
                                      "train": train}), encoding="utf-8")
    result = CliRunner().invoke(app, ["train", str(config), "--data", str(corpus), "--out", str(root / name), "--quiet"])
    assert result.exit_code == 0, result.output
    return root / name


@pytest.fixture(scope="session")
def protected_run(tmp_path_factory) -> Path:
    """One tiny data.protect model for the whole session (the tests only read it; each exports it
    or copies it as it needs)."""
    return train_protected_model(tmp_path_factory.mktemp("protect"))
