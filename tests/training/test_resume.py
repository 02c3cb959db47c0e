"""Training that survives faults: real training subprocesses killed part-way, then resumed."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from conftest import TINY, toy_lines, write_corpus_zip

# Dropout on, so that resuming must also restore the RNG; a checkpoint every 5 steps.
CONFIG = {**TINY, "model": {**TINY["model"], "dropout": 0.3},
          "train": {**TINY["train"], "epochs": 8, "save_every": 5, "keep_last": 3, "eval_every": 0}}


def _start(args, cwd):
    return subprocess.Popen([sys.executable, "-m", "nmt", *map(str, args)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run(args, cwd):
    proc = _start(args, cwd)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return err


def _params(path: Path) -> dict:
    return torch.load(path, weights_only=True)["model"]


def _steps(run: Path) -> list[int]:
    return sorted(int(p.stem.split("-")[1]) for p in run.glob("ckpt-*.pt"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted run that every interrupted run must match exactly."""
    root = tmp_path_factory.mktemp("resume")
    corpus = write_corpus_zip(root / "toy.zip", toy_lines())
    config = root / "resume.yaml"
    config.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    _run(["train", config, "--data", corpus, "--out", root / "reference", "--quiet"], root)
    return {"config": config, "corpus": corpus, "reference": root / "reference"}


@pytest.fixture
def setup(reference, tmp_path):
    return {**reference, "cwd": tmp_path}


def _wait_for_checkpoint(run: Path, proc, min_step: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if any(s >= min_step for s in _steps(run)):
            return
        time.sleep(0.005)
    raise AssertionError(f"no checkpoint at step >= {min_step} appeared while training ran")


def _assert_same_as_reference(run: Path, reference: Path):
    ours, theirs = _params(run / "last.pt"), _params(reference / "last.pt")
    assert ours.keys() == theirs.keys()
    diffs = [(ours[k] - theirs[k]).abs().max().item() for k in ours]
    assert max(diffs) == 0.0, f"max parameter difference {max(diffs)}"
    metrics = lambda r: [json.loads(x) for x in (r / "metrics.jsonl").read_text().splitlines()]  # noqa: E731
    assert [(m["step"], m["val_loss"]) for m in metrics(run)] == [(m["step"], m["val_loss"]) for m in metrics(reference)]


def test_sigkill_then_resume_gives_identical_parameters(setup):
    run = setup["cwd"] / "killed"
    proc = _start(["train", setup["config"], "--data", setup["corpus"], "--out", run, "--quiet"], setup["cwd"])
    _wait_for_checkpoint(run, proc, min_step=40)
    proc.kill()
    proc.wait()
    assert proc.returncode == -signal.SIGKILL  # killed mid-run, not finished
    total = json.loads((setup["reference"] / "metrics.jsonl").read_text().splitlines()[-1])["step"]
    assert max(_steps(run)) < total
    err = _run(["train", "--resume", run, "--data", setup["corpus"], "--quiet"], setup["cwd"])
    assert err == ""
    _assert_same_as_reference(run, setup["reference"])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_saves_and_says_how_to_resume(setup, signum):
    run = setup["cwd"] / f"signalled-{signum}"
    proc = _start(["train", setup["config"], "--data", setup["corpus"], "--out", run, "--quiet"], setup["cwd"])
    _wait_for_checkpoint(run, proc, min_step=20)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert f"nmt train --resume {run}" in err and "Traceback" not in err
    _run(["train", "--resume", run, "--data", setup["corpus"], "--quiet"], setup["cwd"])
    _assert_same_as_reference(run, setup["reference"])


def test_corrupt_newest_checkpoint_falls_back_to_the_previous_one(setup, capfd):
    run = setup["cwd"] / "corrupt"
    proc = _start(["train", setup["config"], "--data", setup["corpus"], "--out", run, "--quiet"], setup["cwd"])
    _wait_for_checkpoint(run, proc, min_step=30)
    proc.kill()
    proc.wait()
    newest = run / f"ckpt-{max(_steps(run)):08d}.pt"
    newest.write_bytes(newest.read_bytes()[: 3000])  # a save cut short by a crash or a full disk
    (run / "last.pt").unlink()
    proc = _start(["train", "--resume", run, "--data", setup["corpus"]], setup["cwd"])
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "corrupt or truncated" in err and "resuming from the newest good checkpoint" in err
    _assert_same_as_reference(run, setup["reference"])


def test_resume_errors_are_one_line(setup, tmp_path):
    proc = _start(["train", "--resume", tmp_path / "nowhere"], tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    proc = _start(["train", "--resume", setup["reference"], "--set", "model.hidden_size=8"], tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "only train.* and decode.*" in err
    empty = tmp_path / "empty-run"
    empty.mkdir()
    proc = _start(["train", "--resume", empty], tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "no checkpoint to resume from" in err


def test_a_peers_stop_then_this_ranks_own_signal_is_one_request_and_a_repeat_aborts():
    """Under torchrun a rank may learn of the stop from a peer before its own SIGTERM arrives:
    that SIGTERM must not count as a second one (which aborts a save mid-gather), a third must."""
    import os

    from nmt.training.stopping import StopSignals

    with StopSignals() as signals:
        signals.from_peer(signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # torchrun's copy, a moment later
        assert signals.received == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
    with StopSignals() as signals:  # Ctrl-C, torchrun's SIGTERM after it, then Ctrl-C again: give up
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.received == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
