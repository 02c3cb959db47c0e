"""Gradient accumulation (train.accum_steps: N micro-batches make one optimizer step): the update is
the one a batch holding them all would make, and a run stopped while accumulating resumes exactly."""

import copy
import os
import signal
import subprocess
import sys

import pytest
import torch
import yaml
from conftest import TINY, toy_lines, write_corpus_zip
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config import config_from_dict
from nmt.data.batches import collate, encode_pairs
from nmt.data.corpus import Pair
from nmt.data.vocab import Vocab
from nmt.model import build_model
from nmt.model.loss import batch_loss
from nmt.training import step
from nmt.training.loop import train
from nmt.training.step import train_step
from nmt.training.stopping import TrainingInterrupted


def _model_and_data():
    pairs = [Pair(*(side.lower().split() for side in line.split("\t"))) for line in toy_lines()[::12]]
    sv, tv = Vocab.build((p.src for p in pairs), 1), Vocab.build((p.tgt for p in pairs), 1)
    cfg = config_from_dict({**TINY, "model": {**TINY["model"], "dropout": 0.0}})
    torch.manual_seed(0)
    return build_model(cfg.model, sv, tv), cfg, encode_pairs(pairs, sv, tv), tv


def test_n_accumulated_micro_batches_step_as_one_batch_holding_them_all():
    model, cfg, examples, tv = _model_and_data()
    twin = copy.deepcopy(model)
    # three micro-batches of different sizes (and so different target token counts)
    micro = [collate(examples[a:b], tv.pad_id, tv.bos_id) for a, b in ((0, 5), (5, 21), (21, 48))]
    whole = collate(examples[:48], tv.pad_id, tv.bos_id)
    assert len({b.num_tokens for b in micro}) == 3
    # Adam's first step moves a weight by about lr * g / (|g| + eps): with the default eps (1e-8), a
    # gradient at float32's noise level (~1e-8, summed in another order) decides a move of 0.01 by
    # its sign alone (seen on an Intel Xeon). eps 1e-3 keeps the step a smooth function of the
    # gradient, so equal gradients must give equal weights.
    accumulated = torch.optim.Adam(model.parameters(), lr=0.01, eps=1e-3)
    single = torch.optim.Adam(twin.parameters(), lr=0.01, eps=1e-3)
    loss_a, tokens_a = train_step(model, micro, accumulated, cfg, tv.pad_id)
    loss_b, tokens_b = train_step(twin, [whole], single, cfg, tv.pad_id)
    assert tokens_a == tokens_b == whole.num_tokens
    assert float(loss_a) == pytest.approx(float(loss_b), abs=1e-6)
    for (name, a), b in zip(model.named_parameters(), twin.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-6), name  # the clipped gradients the step used
        assert torch.allclose(a, b, atol=1e-5), name  # and the weights after it


CONFIG = {**TINY, "model": {**TINY["model"], "dropout": 0.3},  # dropout on: resume restores the RNG too
          "train": {**TINY["train"], "epochs": 3, "accum_steps": 3, "save_every": 2, "eval_every": 0}}


def _train(args, cwd):
    proc = subprocess.run([sys.executable, "-m", "nmt", "train", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_a_run_signalled_while_accumulating_resumes_exactly(tmp_path, monkeypatch):
    corpus = write_corpus_zip(tmp_path / "toy.zip", toy_lines())
    config = tmp_path / "accum.yaml"
    config.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    log = _train([config, "--data", corpus, "--out", tmp_path / "reference"], tmp_path)
    assert "batches of 16 sentences x 3 accumulated (global batch 48 sentences)" in log
    # SIGTERM arrives during the second of step 3's three forward-backward passes: the step still
    # takes all three, then the run saves and stops.
    landed = []

    def loss_then_signal(*args, **kwargs):
        landed.append(len(landed) + 1)
        if len(landed) == 2 * 3 + 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return batch_loss(*args, **kwargs)

    monkeypatch.setattr(step, "batch_loss", loss_then_signal)
    (tmp_path / "stopped").mkdir()
    with pytest.raises(TrainingInterrupted, match="interrupted at step 3") as stopped:
        train(config_from_dict(CONFIG), tmp_path / "stopped", str(corpus), quiet=True)
    assert stopped.value.exit_code == 128 + signal.SIGTERM and len(landed) == 9  # the step ended whole
    assert torch.load(tmp_path / "stopped" / "last.pt", weights_only=True)["progress"]["batch_in_epoch"] == 9
    monkeypatch.undo()
    _train(["--resume", tmp_path / "stopped", "--data", corpus, "--quiet"], tmp_path)
    ours, theirs = (torch.load(tmp_path / run / "last.pt", weights_only=True) for run in ("stopped", "reference"))
    assert ours["progress"]["step"] == theirs["progress"]["step"]
    assert all(torch.equal(ours["model"][k], theirs["model"][k]) for k in theirs["model"])


@pytest.mark.parametrize("value", ["0", "-2"])
def test_accum_steps_below_one_is_one_error_line(tiny_config, value):
    result = CliRunner().invoke(app, ["train", str(tiny_config), "--set", f"train.accum_steps={value}"])
    assert result.exit_code == 1 and f"train.accum_steps must be > 0 (got {value})" in result.output, result.output
    assert "Traceback" not in result.output
