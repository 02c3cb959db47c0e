"""TensorBoard on request: the curves a run writes, read back as TensorBoard reads them, and the
one-line error where the package is missing."""

import sys

import pytest
from typer.testing import CliRunner

from nmt.cli import app

runner = CliRunner()


def test_a_run_writes_its_loss_and_bleu_curves(tmp_path, toy_zip, tiny_config):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", str(tiny_config), "--data", str(toy_zip), "--out", str(run), "--quiet",
                                 "--set", "train.tensorboard=true"])
    assert result.exit_code == 0, result.output
    events = event_accumulator.EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/tok_s", "valid/loss", "valid/bleu", "valid/chrf"} <= tags
    losses = events.Scalars("train/loss")
    assert [e.step for e in losses] == list(range(10, 10 * len(losses) + 1, 10))  # one a log line (log_every 10)
    assert losses[-1].value < losses[0].value
    metrics = [line for line in (run / "metrics.jsonl").read_text().splitlines()]
    bleu = events.Scalars("valid/bleu")
    assert len(bleu) == len(metrics) and all(0 <= e.value <= 100 for e in bleu)


def test_without_the_package_it_is_one_line_naming_the_install(tmp_path, toy_zip, tiny_config, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if tensorboard were not installed
    result = runner.invoke(app, ["train", str(tiny_config), "--data", str(toy_zip), "--out", str(tmp_path / "run"),
                                 "--set", "train.tensorboard=true"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert errors == ['error: train.tensorboard=true needs the tensorboard package: pip install -e ".[tensorboard]"']
