"""CUDA: training steps in fp32 and bf16, no wait for the GPU inside a step, and checkpoints that
move between a GPU and a CPU-only machine. Tests marked `cuda` skip where no GPU is visible;
the CPU half of the checkpoint check runs everywhere."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import TINY

from nmt.config import config_from_dict
from nmt.data.corpus import load_splits
from nmt.data.vocab import Vocab
from nmt.evaluation.metrics import group_references
from nmt.inference.translator import Translator
from nmt.model import build_model
from nmt.model.checkpoint import load_model, save_checkpoint
from nmt.training.loop import train, train_batches
from nmt.training.run_setup import setup
from nmt.training.run_data import epoch_batches

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible to torch")


def _cfg(**train):
    return config_from_dict({**TINY, "model": {**TINY["model"], "dropout": 0.2},
                             "train": {**TINY["train"], **train}})


@cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_few_training_steps_on_cuda(toy_zip, tmp_path, precision):
    run = tmp_path / "run"
    run.mkdir()
    best = train(_cfg(device="cuda", precision=precision, max_steps=12, log_every=4), run, str(toy_zip), quiet=True)
    assert best["step"] == 12 and best["val_loss"] < 10
    log_free = load_model(run, torch.device("cpu"))
    assert all(p.device.type == "cpu" for p in log_free.model.parameters())


@cuda
def test_a_training_step_on_cuda_never_waits_for_the_gpu(toy_zip, tmp_path):
    """With CUDA's sync debug mode set to error, any operation in a step that makes the host wait
    for the GPU (.item(), a blocking copy, a boolean mask) raises."""
    run = setup(_cfg(device="cuda", precision="bf16", batch_tokens=200), tmp_path, str(toy_zip))
    batches = epoch_batches(run.data, run.cfg, 1)
    for indices in batches[:2]:  # warm-up: cuDNN and allocator set-up may synchronize once
        train_batches(run, [indices], total_steps=len(batches))
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for indices in batches[2:8]:
            train_batches(run, [indices], total_steps=len(batches))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    run.progress.check_losses(run.device, run.out_dir)  # the losses were real and finite
    assert run.progress.step == 8


def _toy_sources(toy_zip):
    sources = group_references(load_splits(toy_zip).train).source_words
    return sources[:200]


@cuda
def test_cuda_trained_checkpoint_translates_in_a_cpu_only_process(toy_zip, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    train(_cfg(device="cuda", precision="bf16", epochs=2), run, str(toy_zip), quiet=True)
    # the repository on the path, as a machine that runs the suite without installing nmt needs
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-m", "nmt", "translate", "-c", str(run), "I see a cat ."],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    cpu = Translator.from_loaded(load_model(run, torch.device("cpu")), torch.device("cpu"))
    assert proc.stdout.strip() == cpu.translate(["I see a cat ."])[0]


@cuda
def test_greedy_on_cuda_equals_greedy_on_cpu(toy_zip, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    train(_cfg(device="cpu", precision="fp32", epochs=3), run, str(toy_zip), quiet=True)
    sources = _toy_sources(toy_zip)
    outputs = {}
    for name in ("cpu", "cuda"):
        device = torch.device(name)
        translator = Translator.from_loaded(load_model(run, device), device)
        outputs[name] = [t.tokens for t in translator.translations([" ".join(s) for s in sources])]
    differ = sum(a != b for a, b in zip(outputs["cpu"], outputs["cuda"]))
    print(f"greedy cpu vs cuda: {differ} of {len(sources)} outputs differ")
    assert differ <= len(sources) // 100, f"{differ} of {len(sources)} greedy outputs differ between CPU and CUDA"


def test_a_checkpoint_saved_from_cuda_tensors_loads_on_a_cpu(tmp_path, monkeypatch):
    """Every tensor of this checkpoint carries the device tag 'cuda:0', as one saved on a GPU does;
    load_model must map it to the CPU (a plain torch.load fails where there is no CUDA)."""
    pairs = [("i see a cat .", "je vois un chat .")]
    sv = Vocab.build([p[0].split() for p in pairs], 1)
    tv = Vocab.build([p[1].split() for p in pairs], 1)
    cfg = _cfg()
    model = build_model(cfg.model, sv, tv).eval()
    real_tag = torch.serialization.location_tag
    monkeypatch.setattr(torch.serialization, "location_tag",
                        lambda storage: "cuda:0" if real_tag(storage) == "cpu" else real_tag(storage))
    save_checkpoint(tmp_path / "gpu.pt", model, None, cfg, sv, tv, {"step": 0})
    monkeypatch.setattr(torch.serialization, "location_tag", real_tag)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):  # the tag is real: an unmapped load fails here
            torch.load(tmp_path / "gpu.pt", weights_only=True)
    loaded = load_model(tmp_path / "gpu.pt", torch.device("cpu"))
    assert all(p.device.type == "cpu" for p in loaded.model.parameters())
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], tensor), name
    original = Translator(model, sv, tv, cfg.decode, torch.device("cpu"))
    assert (Translator.from_loaded(loaded, torch.device("cpu")).nbest(["i see"], beam=2)
            == original.nbest(["i see"], beam=2))
