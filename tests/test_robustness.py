"""Inputs that must never crash nmt, and faults that must never lose a checkpoint."""

import errno

import pytest
import torch
from conftest import TINY
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.config import config_from_dict
from nmt.data.vocab import SPECIALS, Vocab
from nmt.errors import NmtError
from nmt.inference.translator import Translator
from nmt.model import build_model, checkpoint
from nmt.model.checkpoint import atomic_save, read_checkpoint

VOCAB = Vocab(list(SPECIALS) + ["go", ".", "!", "va", "i", "je"])


@pytest.fixture(scope="module")
def translator():
    torch.manual_seed(0)
    cfg = config_from_dict({**TINY, "decode": {"batch_size": 8, "max_input_len": 30}})
    model = build_model(cfg.model, VOCAB, VOCAB).eval()
    return Translator(model, VOCAB, VOCAB, cfg.decode, torch.device("cpu"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=200), min_size=1, max_size=12))
def test_any_unicode_gives_one_line_per_input(translator, lines):
    """Control characters, combining marks, emoji, RTL text, newlines inside a 'line' ...:
    never an exception, always exactly one output per input, with a line break only where its
    input has one (a paragraph's sentences are joined as it spaced them)."""
    for beam in (1, 3):
        outputs = translator.translate(lines, beam=beam)
        assert len(outputs) == len(lines)
        assert all(isinstance(o, str) and o.count("\n") <= line.count("\n") for o, line in zip(outputs, lines))
        for line, out in zip(lines, outputs):
            if not line.split():
                assert out == ""  # empty (or all-whitespace) lines stay empty


def test_a_very_long_line_is_translated_in_parts_and_only_a_word_too_long_is_cut(translator, caplog):
    out = translator.translate(["go " * 5000])
    assert len(out) == 1 and "truncated" not in caplog.text
    out = translator.translate(["!" * 5000])  # one word of 5,000 tokens: cut, with a warning
    assert len(out) == 1
    assert "truncated to decode.max_input_len=30" in caplog.text


def test_disk_full_mid_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    atomic_save({"model": {"w": torch.ones(3)}, "config": {}, "src_vocab": [], "tgt_vocab": []}, path)
    before = path.read_bytes()

    def full_disk(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    with pytest.raises(OSError, match="No space left"):
        atomic_save({"model": {"w": torch.zeros(3)}}, path)
    assert path.read_bytes() == before  # untouched and still loadable
    assert torch.equal(read_checkpoint(path)["model"]["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary file left behind


def test_non_finite_loss_stops_with_a_clear_message(toy_zip, tmp_path, monkeypatch):
    from nmt.training import loop as train_module
    real_step, calls = train_module.train_step, []

    def step_that_diverges(*args, **kwargs):
        calls.append(1)
        loss, tokens = real_step(*args, **kwargs)
        return (float("nan") if len(calls) == 4 else loss), tokens

    monkeypatch.setattr(train_module, "train_step", step_that_diverges)
    cfg = config_from_dict({**TINY, "train": {**TINY["train"], "save_every": 2}})
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(NmtError, match=r"the loss became nan at step 4; the last good checkpoints are kept"):
        train_module.train(cfg, run, str(toy_zip), quiet=True)
    assert read_checkpoint(run / "last.pt")["progress"]["step"] == 2  # written before the fault


def test_truncation_warning_names_the_line_across_stream_chunks(translator, caplog):
    lines = ["go ."] * 7 + ["!" * 50] + ["go ."] * 2  # line 8 is one word too long; chunks of 3 lines
    out = list(translator.translate_stream(lines, chunk_size=3))
    assert len(out) == 10
    assert "line 8 has 50 tokens" in caplog.text
