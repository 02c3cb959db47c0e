"""Data-parallel training under torchrun (gloo, CPU): real processes on loopback."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import TINY, toy_lines, write_corpus_zip

from nmt.data.epoch_order import Lengths
from nmt.training import distributed

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
STEPS = 12
# fp32 so that the comparison with one process is not blurred by bf16 rounding.
BASE = {**TINY, "train": {**TINY["train"], "precision": "fp32", "max_steps": STEPS, "eval_every": 0}}
NO_DROPOUT = BASE  # DDP equals one process only when both draw no dropout masks
WITH_DROPOUT = {**BASE, "model": {**BASE["model"], "dropout": 0.3}}  # resume must restore each rank's RNG


def _torchrun(*args, cwd, timeout=300):
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--log-dir={cwd}/torchrun-logs",
                           *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _nmt(*args, cwd):
    proc = subprocess.run([sys.executable, "-m", "nmt", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _params(run: Path) -> dict:
    return torch.load(run / "last.pt", weights_only=True)["model"]


def _max_diff(a: Path, b: Path) -> float:
    pa, pb = _params(a), _params(b)
    assert pa.keys() == pb.keys()
    return max((pa[k] - pb[k]).abs().max().item() for k in pa)


def _config(root: Path, name: str, raw: dict, **train) -> Path:
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**raw, "train": {**raw["train"], **train}}), encoding="utf-8")
    return path


def _descendants(pid: int) -> set[int]:
    """The live processes below `pid` (Linux /proc): here torchrun and its workers."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = set(), [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.add(child)
            queue.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    """Those of `pids` still running (not ended, not a zombie)."""
    alive = set()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                alive.add(pid)
        except OSError:
            continue
    return alive


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    write_corpus_zip(root / "toy.zip", toy_lines())
    return root


@pytest.fixture(scope="module")
def ddp_dropout_run(root):
    """The uninterrupted two-process run that the resumed and the two-node runs must equal."""
    _nmt("train", _config(root, "dropout", WITH_DROPOUT), "--data", "toy.zip", "--out", "ddp-dropout",
         "--nproc", 2, "--quiet", cwd=root)
    return root / "ddp-dropout"


def test_epoch_shards_are_disjoint_equal_and_cover_the_global_batches(monkeypatch):
    src_lens, tgt_lens = np.arange(203) % 9 + 2, np.arange(203) % 7 + 2

    def shard(n, batch_size, world):  # as the process of that rank draws them
        monkeypatch.setattr(distributed, "_THIS", [world])
        return [b.tolist() for b in distributed.epoch_shard(Lengths(src_lens[:n], tgt_lens[:n]), batch_size,
                                                            np.random.default_rng(5))]

    single = shard(203, 20, distributed.SINGLE)
    shards = [shard(203, 10, distributed.World(r, 2)) for r in range(2)]
    assert len(shards[0]) == len(shards[1]) == len(single)  # 11 global batches of <= 20, all kept
    for step, (a, b) in enumerate(zip(*shards)):
        assert not set(a) & set(b)
        assert sorted(a + b) == sorted(single[step])  # the global batch one process would take
    # 182 = 6 x 30 + 2: the last global batch cannot give each of 3 ranks an example and is dropped.
    three = [shard(182, 10, distributed.World(r, 3)) for r in range(3)]
    assert [len(s) for s in three] == [6, 6, 6] and all(len(b) == 10 for s in three for b in s)


def test_two_processes_hold_identical_parameters_after_every_step(root):
    # A learning rate that decays with the clock: the ranks must agree on the time, too.
    config = _config(root, "replicas", WITH_DROPOUT, lr_schedule="linear", max_minutes=2.0)
    proc = _torchrun("--standalone", "--nproc_per_node=2", HELPERS / "ddp_replicas.py", config, "toy.zip",
                     "replicas", 6, cwd=root)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["world"] == 2 and result["steps"] == 6
    assert result["max_diff"] == [0.0] * 6  # DDP's all-reduced gradients keep replicas bit-identical
    a, b = result["shard_sizes"]
    assert result["overlap"] == 0 and abs(a - b) <= 1 and a + b > 6 * 16  # disjoint halves of 6 global batches


def test_two_processes_equal_one_process_with_the_global_batch(root):
    _nmt("train", _config(root, "ddp", NO_DROPOUT), "--data", "toy.zip", "--out", "ddp", "--nproc", 2,
         "--quiet", cwd=root)
    _nmt("train", _config(root, "single", NO_DROPOUT, batch_size=32), "--data", "toy.zip", "--out", "single",
         "--quiet", cwd=root)
    # Same 12 global batches, gradients summed in another order: float noise only (measured ~2e-6).
    assert _max_diff(root / "ddp", root / "single") < 1e-4
    # Rank 0 alone writes: one log, one metrics line per validation (not one per process).
    assert len((root / "ddp" / "metrics.jsonl").read_text().splitlines()) == 1
    assert "x 2 processes (global batch 32 sentences)" in (root / "ddp" / "train.log").read_text()


def test_two_processes_of_two_micro_batches_equal_one_process_of_the_four(root):
    """train.accum_steps under DDP: each rank accumulates 2 micro-batches of 16 (gradients all-reduced
    on the last only); one process takes the same 4 x 16 sentences as 2 micro-batches of 32."""
    _nmt("train", _config(root, "ddp-accum", NO_DROPOUT, accum_steps=2), "--data", "toy.zip", "--out", "ddp-accum",
         "--nproc", 2, "--quiet", cwd=root)
    _nmt("train", _config(root, "single-accum", NO_DROPOUT, batch_size=32, accum_steps=2), "--data", "toy.zip",
         "--out", "single-accum", "--quiet", cwd=root)
    assert _max_diff(root / "ddp-accum", root / "single-accum") < 1e-4
    assert "x 2 accumulated x 2 processes (global batch 64 sentences)" in (root / "ddp-accum" / "train.log").read_text()


def test_two_processes_prepare_the_corpus_once_and_map_the_same_files(tmp_path):
    write_corpus_zip(tmp_path / "toy.zip", toy_lines())
    _nmt("train", _config(tmp_path, "ddp", NO_DROPOUT, max_steps=4), "--data", "toy.zip", "--out", "ddp",
         "--nproc", 2, cwd=tmp_path)
    # Both processes ask for the prepared corpus; the lock lets one prepare and the other find it.
    log = (tmp_path / "ddp" / "train.log").read_text()
    assert log.count("preparing it") == 1 and "prepared data: " not in log, log  # rank 0 prepared it
    prepared = tmp_path / "data" / "prepared"
    assert len([p for p in prepared.iterdir() if p.is_dir()]) == 1  # no second or half-built folder


def test_resume_under_ddp_continues_exactly(root, ddp_dropout_run):
    config = _config(root, "half", WITH_DROPOUT, max_steps=STEPS // 2)
    _nmt("train", config, "--data", "toy.zip", "--out", "resumed", "--nproc", 2, "--quiet", cwd=root)
    _nmt("train", "--resume", "resumed", "--data", "toy.zip", "--set", f"train.max_steps={STEPS}", "--nproc", 2,
         "--quiet", cwd=root)
    assert _max_diff(root / "resumed", ddp_dropout_run) == 0.0


def test_two_nodes_on_loopback_train_together(root, ddp_dropout_run):
    """Two torchrun invocations, one process each, rendezvous on 127.0.0.1 as two machines would."""
    config = _config(root, "dropout", WITH_DROPOUT)
    port = _free_port()
    nodes = [subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={rank}", "--nproc_per_node=1",
         f"--log-dir={root}/torchrun-logs", "--master_addr=127.0.0.1", f"--master_port={port}", "-m", "nmt", "train", str(config), "--data",
         "toy.zip", "--out", "two-nodes", "--quiet"],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    for node in nodes:
        _, err = node.communicate(timeout=300)
        assert node.returncode == 0, err[-3000:]
    # Ranks 0 and 1 on two "machines" are ranks 0 and 1 of one machine: the same training.
    assert _max_diff(root / "two-nodes", ddp_dropout_run) == 0.0


def test_nproc_rejects_bad_arguments_before_starting_processes(root):
    proc = subprocess.run([sys.executable, "-m", "nmt", "train", _config(root, "bad", BASE), "--nproc", "2",
                           "--data", "missing.zip"], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: corpus not found: missing.zip (from --data); give a tab-separated file such as fra.txt, a zip "
        "holding one such as fra-eng.zip, or PREFIX of PREFIX.en and PREFIX.fr"]


def test_sigterm_stops_all_processes_together_and_the_run_resumes(root):
    """SIGTERM to `nmt train --nproc 2` reaches every worker through torchrun: all save at the
    same step and stop, none is left training; then --resume continues under DDP."""
    import signal
    import time

    config = _config(root, "long", BASE, max_steps=0, epochs=500, save_every=5)
    proc = subprocess.Popen([sys.executable, "-m", "nmt", "train", str(config), "--data", "toy.zip", "--out",
                             "signalled", "--nproc", "2", "--quiet"], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # Signal once the job is observably training: a checkpoint is written only after both ranks
    # passed the save's all-gather, and torchrun and its two workers are known by pid. A launcher
    # that ended before that fails here, with its stderr.
    deadline, job = time.monotonic() + 120, set()
    while proc.poll() is None and time.monotonic() < deadline:
        job = _descendants(proc.pid)
        if len(job) >= 3 and list((root / "signalled").glob("ckpt-*.pt")):
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail(f"the job ended (exit {proc.poll()}) or was not training after 120 s ({len(job)} processes) "
                    f"before it was signalled:\n{proc.communicate(timeout=60)[1][-3000:]}")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert err.count("Resume with: nmt train --resume signalled") == 1, err[-3000:]  # rank 0 speaks for the job
    step = int(err.split("interrupted at step ")[1].split(";")[0])
    # torchrun waits for its workers before it exits, and the launcher for torchrun: none is left.
    assert not _alive(job), "workers kept running after the launcher was stopped"
    _nmt("train", "--resume", "signalled", "--data", "toy.zip", "--set", f"train.max_steps={step + 10}",
         "--nproc", 2, "--quiet", cwd=root)
    records = [json.loads(x) for x in (root / "signalled" / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == step + 10


def test_a_signal_landing_after_the_ranks_agreed_waits_for_the_next_agreement(monkeypatch):
    """The race behind the SIGTERM test's rare hang: a signal handled between the all-reduce and
    the decision must not make this rank alone save (an all-gather) while its peer trains on."""
    import signal
    import types

    from nmt.training import loop as training
    from nmt.training.stopping import Budget, StopSignals

    signals = StopSignals()
    sums = iter([[0.0, 0.0, 2.0], [1.0, 0.0, 2.0]])  # the second agreement counts this rank's flag

    def all_sum_then_signal(values, device):
        result = next(sums)
        if not signals.received:
            signals._handle(signal.SIGTERM, None)  # lands just after the ranks agreed
        return result

    monkeypatch.setattr(training.distributed, "all_sum", all_sum_then_signal)
    run = types.SimpleNamespace(budget=Budget(0, 0), progress=types.SimpleNamespace(step=6), device="cpu",
                                world=distributed.World(0, 2, launched=True), clock=0.0)
    assert training.agree_to_stop(run, signals) == (None, None)  # the peers agreed to go on: so does this rank
    assert signals.received == signal.SIGTERM
    assert training.agree_to_stop(run, signals) == (None, signal.SIGTERM)  # all stop together, one step later
