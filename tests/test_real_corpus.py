"""The shipped configs on the real corpus, through the real entry point (skipped without it)."""

import json
import subprocess
import sys

from conftest import REPO

SEED_SENTENCES = ["Go .", "Good Night !", "I'm OK .", "I won !"]


def nmt(*args, cwd, input=None):
    return subprocess.run([sys.executable, "-m", "nmt", *map(str, args)], cwd=cwd, input=input,
                          capture_output=True, text=True, timeout=600)


def test_tiny_config_train_translate_eval(real_corpus, tmp_path):
    train = nmt("train", REPO / "configs/tiny.yaml", "--data", real_corpus, "--out", "run", cwd=tmp_path)
    assert train.returncode == 0, train.stderr
    assert "train 4,721 | valid 52 | test 92 pairs" in train.stderr  # 135 of 4,856 cleaned away
    assert "epoch" in train.stderr  # the progress bar
    metrics = [json.loads(x) for x in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["val_loss"] < metrics[0]["val_loss"]
    out = nmt("translate", "Go .", "I won !", cwd=tmp_path)  # --out run is not under runs/
    assert out.returncode == 1 and "train first" in out.stderr
    out = nmt("translate", "Go .", "I won !", "-c", "run", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 2
    ev = nmt("eval", "--bleu", "-c", "run", "--data", real_corpus, cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr
    assert "BLEU" in ev.stdout and "chrF" in ev.stdout and "version:" in ev.stdout


def test_d2l_config_replays_the_seed_experiment(real_corpus, tmp_path):
    # The notebook trains 500 epochs; a few hundred steps show the same pipeline end to end.
    train = nmt("train", REPO / "configs/d2l.yaml", "--data", real_corpus, "--out", "run", "--quiet",
                "--set", "train.max_steps=300", cwd=tmp_path)
    assert train.returncode == 0, train.stderr
    log = (tmp_path / "run/train.log").read_text()
    assert "train 48,602 | valid 512 | test 886 pairs" in log
    out = nmt("translate", *SEED_SENTENCES, "-c", "run", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 4 and all(lines)


def test_default_config_trains_on_the_full_corpus(real_corpus, tmp_path):
    # Run from the repository so that `nmt train` with no config takes configs/default.yaml.
    train = nmt("train", "--data", real_corpus, "--out", tmp_path / "run", "--quiet",
                "--set", "train.max_steps=5", "--set", "train.val_bleu_sentences=20", cwd=REPO)
    assert train.returncode == 0, train.stderr
    log = (tmp_path / "run/train.log").read_text()
    assert "train 161,749 | valid 1,753 | test 3,125 pairs" in log  # (after cleaning: docs/data.md)
    assert "embed_size: 256" in (tmp_path / "run/config.yaml").read_text()
