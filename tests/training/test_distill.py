"""`nmt distill TEACHER --out STUDENT`: the teacher translates its training sources (kept, reused,
resumed after an interruption), and a student trains on them in the teacher's vocabularies, with
the teacher's valid and test splits."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import REPO, TINY, toy_lines, train_toy_model, write_corpus_zip, seed_data
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config import saved_config
from nmt.data.corpus import load_splits
from nmt.inference.translator import Translator
from nmt.model import build_model
from nmt.model.checkpoint import read_checkpoint
from nmt.training import distill, job
from nmt.training.finetune import load_parent

STUDENT = {"model": {"embed_size": 16, "hidden_size": 16, "num_layers": 1, "attention": "additive"},
           "train": {"batch_size": 16, "lr": 0.01, "epochs": 1, "seed": 3, "device": "cpu", "threads": 1,
                     "val_bleu_sentences": 50},
           "decode": {"beam_size": 1, "batch_size": 32}}


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> dict:
    return train_toy_model(tmp_path_factory.mktemp("teacher"), epochs=2)


@pytest.fixture
def student_config(tmp_path) -> Path:
    path = tmp_path / "student.yaml"
    path.write_text(yaml.safe_dump(STUDENT), encoding="utf-8")
    return path


def _distill(*args: str):
    return CliRunner().invoke(app, ["distill", *args])


def _fails(*args: str) -> str:
    result = _distill(*args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def _translations(folder: Path) -> list[str]:
    return (folder / distill.TRANSLATIONS).read_text(encoding="utf-8").splitlines()


def test_a_student_learns_the_teachers_translations_in_its_vocabularies_and_splits(teacher, student_config,
                                                                                   tmp_path):
    result = _distill(str(teacher["run"]), "--out", "student", "--config", str(student_config), "--quiet")
    assert result.exit_code == 0, result.output
    run, student = teacher["run"], tmp_path / "student"
    for vocab in ("src_vocab.txt", "tgt_vocab.txt"):
        assert (student / vocab).read_text() == (run / vocab).read_text()
    config = yaml.safe_load((student / "config.yaml").read_text())
    assert config["train"]["teacher"] == str(run)
    assert config["train"]["teacher_sha256"] == hashlib.sha256((run / "best.pt").read_bytes()).hexdigest()
    assert config["model"]["hidden_size"] == 16

    # The student's corpus: the teacher's beam output for each training source, the held-out pairs as they were.
    folder, = (tmp_path / "data" / "prepared").glob("distilled-toy-*")
    corpus = folder / "toy-distilled.tsv"
    teacher_splits, student_splits = load_splits(teacher["corpus"]), load_splits(corpus)
    for split in ("valid", "test"):
        assert [p.raw for p in getattr(student_splits, split)] == [p.raw for p in getattr(teacher_splits, split)]
    sources = distill.training_sources(teacher["corpus"], seed_data())
    assert len(set(sources)) == len(sources) < len(teacher_splits.train)  # two translations of one source: once
    expected = Translator.load(str(run)).translate(sources[:40], beam=5)
    assert _translations(folder)[:40] == expected
    given = dict(zip(sources, _translations(folder)))
    assert all(given[p.src_text] == p.tgt_text for p in student_splits.train)
    assert len(student_splits.train) == len(teacher_splits.train)

    # A second call reuses the translations (here with the shipped student's model); the student
    # can be evaluated like any run.
    again = _distill(str(run), "--out", "student2", "--config", str(REPO / "configs" / "student.yaml"),
                     "--set", "train.max_steps=1", "--set", "train.threads=1")
    assert again.exit_code == 0 and "reused" in again.output, again.output
    width = yaml.safe_load((tmp_path / "student2" / "config.yaml").read_text())["model"]["hidden_size"]
    logged = (tmp_path / "student2" / "train.log").read_text()
    assert logged.count(f"new weights; model.embed_size {width}, model.hidden_size {width}: ") == 1, logged
    assert _widest_quarter(run, tmp_path / "student2", width)
    evaluated = CliRunner().invoke(app, ["eval", "-c", str(student), "--data", str(corpus)])
    assert evaluated.exit_code == 0, evaluated.output
    assert f"its own references (the training split holds {run}'s translations)" in evaluated.output


def _widest_quarter(teacher: Path, student: Path, width: int) -> bool:
    """The student's width is a multiple of 8 at which it holds at most a quarter of the
    teacher's parameters (counted in the checkpoints), and 8 more would hold more."""
    def weights(run: Path) -> int:
        return sum(t.numel() for t in read_checkpoint(run / "best.pt")["model"].values())

    student_config = saved_config(yaml.safe_load((student / "config.yaml").read_text()))
    _, src_vocab, tgt_vocab = load_parent(str(teacher)).vocabularies()
    wider = dataclasses.replace(student_config.model, embed_size=width + 8, hidden_size=width + 8)
    wider_weights = sum(p.numel() for p in build_model(wider, src_vocab, tgt_vocab).parameters())
    return width % 8 == 0 and weights(student) <= weights(teacher) / 4 < wider_weights


def test_a_student_config_with_an_auto_width_trained_alone_asks_for_numbers(teacher, tmp_path):
    result = CliRunner().invoke(app, ["train", str(REPO / "configs" / "student.yaml"), "--out", "alone",
                                      "--data", str(teacher["corpus"]), "--set", "data.tokenizer=subword"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert "a student's width, which nmt distill sizes to its teacher" in lines[0]
    assert "--set model.embed_size=80 --set model.hidden_size=80" in lines[0] and not (tmp_path / "alone").exists()


def test_an_interrupted_translation_keeps_what_it_wrote_and_resumes(teacher, student_config, tmp_path, monkeypatch):
    """Killed after two chunks (and once more in the middle of a line), the next call translates
    only what is missing, and the whole equals one uninterrupted translation."""
    monkeypatch.setattr(distill, "CHUNK", 100)
    translate, seen = Translator.translate, {"calls": 0, "sentences": 0, "dies_at": 3}

    def counted(self, texts, beam=None, *args, **kwargs):
        seen["calls"] += 1
        if seen["calls"] == seen["dies_at"]:
            raise KeyboardInterrupt
        seen["sentences"] += len(texts)
        return translate(self, texts, beam, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate", counted)
    line = _fails(str(teacher["run"]), "--out", "student", "--config", str(student_config))
    folder, = (tmp_path / "data" / "prepared").glob("distilled-toy-*")
    assert "interrupted: 200 of" in line and f"{folder.name}/{distill.TRANSLATIONS}" in line
    assert len(_translations(folder)) == 200 and not (tmp_path / "student").exists()
    with open(folder / distill.TRANSLATIONS, "a", encoding="utf-8") as f:
        f.write("a line cut off by the kill")  # no newline: the next call drops it
    seen.update(calls=0, sentences=0, dies_at=None)
    result = _distill(str(teacher["run"]), "--out", "student", "--config", str(student_config), "--quiet")
    assert result.exit_code == 0, result.output
    sources = distill.training_sources(teacher["corpus"], seed_data())
    assert seen["sentences"] == len(sources) - 200  # only the rest was translated
    assert _translations(folder) == translate(Translator.load(str(teacher["run"])), sources, 5)
    record = json.loads((folder / distill.RECORD).read_text())
    assert record["sources"] == len(sources) and record["beam"] == 5


def test_what_cannot_be_distilled_is_one_line(teacher, student_config, tmp_path):
    assert "checkpoint not found: runs/none" in _fails("runs/none", "--out", "student")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**STUDENT, "data": {"vocab_size": 123}}), encoding="utf-8")
    line = _fails(str(teacher["run"]), "--out", "student", "--config", str(bad))
    assert "a student keeps the teacher's tokenizer and vocabularies" in line and "data.vocab_size=123" in line
    assert not (tmp_path / "data" / "prepared").exists()  # refused before the teacher translated anything
    other = write_corpus_zip(tmp_path / "other.zip", toy_lines()[::2])
    line = _fails(str(teacher["run"]), "--out", "student", "--config", str(student_config), "--data", str(other))
    assert "the teacher's vocabularies were learned from" in line
    assert not (tmp_path / "student").exists()


def test_a_teacher_trained_on_two_line_aligned_files_finds_them(tmp_path):
    """A teacher trained on PREFIX.en and PREFIX.fr (`--data PREFIX`) records PREFIX, which is no
    file itself: its corpus is found without --data, and with it."""
    prefix = tmp_path / "corpus"
    pairs = [line.split("\t") for line in toy_lines()]
    for side, lang in enumerate(("en", "fr")):
        prefix.with_name(f"corpus.{lang}").write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "train": {**TINY["train"], "epochs": 1}}), encoding="utf-8")
    trained = CliRunner().invoke(app, ["train", str(config), "--data", str(prefix), "--out", "run", "--quiet"])
    assert trained.exit_code == 0, trained.output
    for data in (None, str(prefix)):
        assert distill.load_teacher("run", data).corpus.resolve() == prefix.resolve()


def test_a_config_whose_data_keys_are_auto_takes_the_teachers(teacher, tmp_path):
    """`--config configs/default.yaml`, a student of the default's size: its `auto` data keys (the
    vocabulary size, the length limit) are the ones the teacher's recipe chose, not a refusal."""
    config = tmp_path / "default-size.yaml"
    default = yaml.safe_load((REPO / "configs" / "default.yaml").read_text(encoding="utf-8"))
    written = {key: value for key, value in default["data"].items() if value == "auto"}
    assert written  # what this test is about: configs/default.yaml leaves some data keys to the recipe
    config.write_text(yaml.safe_dump({**STUDENT, "data": written}), encoding="utf-8")
    found = distill.load_teacher(str(teacher["run"]))
    cfg = job.job_config(config, False, [], teacher=found)[0]
    assert {key: getattr(cfg.data, key) for key in written} == {key: getattr(found.data, key) for key in written}
    assert "auto" not in {getattr(cfg.data, key) for key in written}


def test_auto_translates_in_int8_where_the_teacher_has_a_current_export(teacher, tmp_path):
    """`--engine auto` (the default): torch until the teacher is exported, int8 ONNX Runtime after;
    torch again where torch's translations were begun (they are resumed, not made again)."""
    pytest.importorskip("onnxruntime")
    from nmt.inference.onnx_export import export_run

    run = tmp_path / "teacher"
    shutil.copytree(teacher["run"], run)
    found = distill.load_teacher(str(run))
    assert distill.teacher_engine(found, 5) == "torch"
    export_run(run)
    assert distill.teacher_engine(found, 5) == "onnx"
    _, folder = distill.translation_work(found, 5, "torch")
    folder.mkdir(parents=True)
    (folder / distill.TRANSLATIONS).write_text("une traduction\n", encoding="utf-8")
    assert distill.teacher_engine(found, 5) == "torch"


@pytest.mark.parametrize("pieces, width", [(8000, 80), (2000, 104)])
def test_an_auto_student_width_is_a_quarter_of_the_default_teacher_whatever_its_vocabulary(pieces, width):
    """configs/student.yaml under a default teacher: on fra-eng's 8,000 pieces the vocabularies hold
    most weights, so the quarter is narrower than on Multi30k's 2,000."""
    from nmt.config import config_from_dict
    from nmt.data.vocab import SPECIALS, Vocab
    from nmt.training.student_size import student_width

    vocab = Vocab(list(SPECIALS) + [f"piece{i}" for i in range(pieces - len(SPECIALS))])
    default = yaml.safe_load((REPO / "configs" / "default.yaml").read_text())
    teacher = config_from_dict({**default, "model": {**default["model"], "dropout": 0.2, "embed_dropout": 0.0,
                                                     "output_dropout": 0.0, "alignment_head": True}}).model
    shipped = yaml.safe_load((REPO / "configs" / "student.yaml").read_text())["model"]
    student = config_from_dict({**default, "model": {**default["model"], **shipped}}).model
    assert student_width(student, teacher, vocab, vocab) == width
