"""bf16 where it is native, fp32 elsewhere, and one clear line for a bf16 request that cannot run.

The decision is tested with the CPU's features faked (both kinds of CPU on any machine), and for
real in subprocesses with oneDNN held to AVX2 (ONEDNN_MAX_CPU_ISA), where a bf16 LSTM cannot run
whatever /proc/cpuinfo lists: exactly an AVX2-only laptop's situation.
"""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import TINY

from nmt import hardware
from nmt.config import config_from_dict
from nmt.data.corpus import Pair
from nmt.data.vocab import Vocab
from nmt.errors import NmtError
from nmt.model import build_model
from nmt.model.checkpoint import save_checkpoint

CPU = torch.device("cpu")
AVX2_ONLY = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}


@pytest.fixture
def fake_cpu(monkeypatch):
    """fake_cpu(flags, lstm_runs): pretend to be a CPU with these flags whose bf16 LSTM does (not) run."""
    def fake(flags: set[str], lstm_runs: bool) -> None:
        hardware.bf16_support.cache_clear()
        monkeypatch.setattr(hardware, "cpu_flags", lambda: flags)
        monkeypatch.setattr(hardware, "bf16_lstm_runs", lambda: lstm_runs)
    yield fake
    hardware.bf16_support.cache_clear()


def test_avx2_only_cpu_gets_fp32_and_a_clear_refusal_of_bf16(fake_cpu):
    fake_cpu({"avx", "avx2", "fma"}, lstm_runs=False)
    assert hardware.resolve_precision("auto", CPU) == "fp32"
    assert "no avx512_bf16 or amx_bf16" in hardware.describe_precision("auto", CPU)
    with pytest.raises(NmtError, match=r"train.precision=bf16 is not available: this CPU has no avx512_bf16.*"
                                       r"use --set train.precision=fp32"):
        hardware.resolve_precision("bf16", CPU)
    assert hardware.resolve_precision("fp32", CPU) == "fp32"


def test_emulated_bf16_is_refused_even_where_the_lstm_would_run(fake_cpu):
    # An AVX-512 CPU without avx512_bf16 runs the bf16 LSTM by emulation, far slower than fp32.
    fake_cpu({"avx2", "avx512f"}, lstm_runs=True)
    assert hardware.resolve_precision("auto", CPU) == "fp32"
    with pytest.raises(NmtError, match="bf16 would be emulated"):
        hardware.resolve_precision("bf16", CPU)


def test_flags_that_onednn_cannot_use_do_not_fool_the_decision(fake_cpu):
    fake_cpu({"avx2", "avx512f", "avx512_bf16"}, lstm_runs=False)
    assert hardware.resolve_precision("auto", CPU) == "fp32"
    with pytest.raises(NmtError, match="lists avx512_bf16, but oneDNN cannot run a bf16 LSTM"):
        hardware.resolve_precision("bf16", CPU)


def test_native_bf16_cpu_gets_bf16_and_says_why(fake_cpu):
    fake_cpu({"avx2", "avx512f", "avx512_bf16", "amx_bf16"}, lstm_runs=True)
    assert hardware.resolve_precision("auto", CPU) == "bf16"
    assert hardware.resolve_precision("bf16", CPU) == "bf16"
    assert hardware.describe_precision("auto", CPU) == "precision bf16 (auto: this CPU has amx_bf16 and avx512_bf16)"


def test_the_probe_does_not_move_the_seeded_rng():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    hardware.bf16_lstm_runs()
    assert torch.equal(torch.rand(3), expected)


def _nmt(args, cwd, env=AVX2_ONLY):
    return subprocess.run([sys.executable, "-m", "nmt", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _tiny_config(tmp_path: Path, **train) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({**TINY, "train": {**TINY["train"], **train}}), encoding="utf-8")
    return path


def test_explicit_bf16_without_a_bf16_lstm_is_one_line_before_any_step(toy_zip, tmp_path):
    config = _tiny_config(tmp_path, precision="bf16", max_steps=3)
    proc = _nmt(["train", config, "--data", toy_zip, "--out", tmp_path / "run"], tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "train.precision=fp32" in errors[0], proc.stderr
    assert not (tmp_path / "run").exists()  # refused before the run directory was made


def test_auto_trains_in_fp32_where_bf16_cannot_run_and_logs_why(toy_zip, tmp_path):
    config = _tiny_config(tmp_path, precision="auto", max_steps=3)
    proc = _nmt(["train", config, "--data", toy_zip, "--out", tmp_path / "run", "--quiet"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    log = (tmp_path / "run" / "train.log").read_text()
    assert "precision fp32 (auto: this CPU" in log, log


def test_a_bf16_trained_checkpoint_translates_and_evaluates_where_bf16_cannot_run(toy_zip, tmp_path):
    """Decoding and evaluation run in fp32 whatever precision the model was trained in (a model
    trained in bf16 on a GPU is used on a laptop)."""
    pairs = [Pair("i see a cat .".split(), "je vois un chat .".split())]
    sv, tv = Vocab.build((p.src for p in pairs), 1), Vocab.build((p.tgt for p in pairs), 1)
    cfg = config_from_dict({**TINY, "train": {**TINY["train"], "precision": "bf16"}})
    save_checkpoint(tmp_path / "m.pt", build_model(cfg.model, sv, tv), None, cfg, sv, tv, {"step": 0})
    for args in (["translate", "-c", tmp_path / "m.pt", "i see a cat ."],
                 ["translate", "-c", tmp_path / "m.pt", "--beam", "3", "i see a cat ."],
                 ["eval", "-c", tmp_path / "m.pt", "--data", toy_zip, "--bleu"]):
        proc = _nmt(args, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr


@pytest.fixture
def toy_data(toy_zip, tmp_path):
    from nmt.training.run_data import load_data
    cfg = config_from_dict({**TINY, "train": {**TINY["train"], "precision": "auto"}})
    return cfg, load_data(cfg, str(toy_zip), tmp_path, None)


@pytest.mark.parametrize("faster", ["bf16", "fp32"])
def test_auto_keeps_the_precision_it_measured_faster_and_caches_the_figures(fake_cpu, toy_data, tmp_path,
                                                                            monkeypatch, faster):
    from nmt.training import measured_precision
    from nmt.training.run_data import epoch_batches
    fake_cpu({"avx2", "avx512f", "avx512_bf16"}, lstm_runs=True)
    monkeypatch.setenv("NMT_CACHE_DIR", str(tmp_path / "cache"))
    figures, timed = {faster: 2000.0, ({"bf16", "fp32"} - {faster}).pop(): 1000.0}, []
    monkeypatch.setattr(measured_precision, "measure", lambda cfg, data, batches, p, device: timed.append(p)
                        or figures[p])
    cfg, data = toy_data
    resolved = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision="bf16"))  # as the rule gives
    batches = epoch_batches(data, cfg, 1)
    settled, line = measured_precision.settle_precision(resolved, "auto", CPU, data, batches)
    assert settled.train.precision == faster and sorted(timed) == ["bf16", "fp32"]
    assert line == (f"precision {faster} (auto, measured: bf16 {figures['bf16']:,.0f} tok/s, fp32 "
                    f"{figures['fp32']:,.0f} tok/s on this CPU and model; this CPU has avx512_bf16)")
    again, line = measured_precision.settle_precision(resolved, "auto", CPU, data, batches)
    assert again.train.precision == faster and len(timed) == 2 and "auto, cached: " in line  # no second timing
    explicit, _ = measured_precision.settle_precision(cfg, "fp32", CPU, data, batches)
    assert explicit.train.precision == cfg.train.precision and len(timed) == 2  # only auto is measured


@pytest.mark.skipif(not hardware.fast_bf16(CPU), reason="bf16 is not native on this CPU: auto is fp32, unmeasured")
def test_the_measurement_is_real_training_steps_in_each_precision(toy_data):
    from nmt.training import measured_precision
    from nmt.training.run_data import epoch_batches
    cfg, data = toy_data
    batches = epoch_batches(data, cfg, 1)
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    rates = {p: measured_precision.measure(cfg, data, batches, p, CPU) for p in ("fp32", "bf16")}
    assert all(rate > 0 for rate in rates.values()), rates
    assert torch.equal(torch.rand(3), expected)  # the run's seeded random state is untouched
