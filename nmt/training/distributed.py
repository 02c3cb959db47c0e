"""Data-parallel training under `torchrun`: process group, batch shards and rank agreement.

`torchrun` sets WORLD_SIZE, RANK and LOCAL_RANK; without them (a plain `nmt train`) everything
here is a no-op for a world of one, so the single-process path pays nothing.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from nmt import hardware
from nmt.data.epoch_order import EpochBatches, PairLengths
from nmt.errors import NmtError


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    launched: bool = False  # started by torchrun: a process group exists, even for one process

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes checkpoints, metrics and logs, and runs validation."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """Under torchrun, also with one process: `torchrun --nproc_per_node=1` takes the same
        path (process group, DDP, collectives) as N processes, so one GPU can check NCCL."""
        return self.size > 1 or self.launched


SINGLE = World()
_THIS = [SINGLE]  # this process's place, which `init` sets once: a process has one world, as torch.distributed has


def world() -> World:
    """This process's place in its torchrun world (`init`); a world of one without torchrun."""
    return _THIS[0]


def init(device_name: str) -> World:
    """Join the process group torchrun describes: gloo on CPU, NCCL on CUDA (one GPU per process).
    The device is checked first, in every world, so `--device cuda` without CUDA fails before
    a run directory is made."""
    cuda = hardware.resolve_device(device_name).type == "cuda"
    if "WORLD_SIZE" not in os.environ:
        return SINGLE
    joined = World(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", "0")),
                   launched=True)
    if cuda:
        if torch.cuda.device_count() <= joined.local_rank:
            raise NmtError(f"local rank {joined.local_rank} has no GPU ({torch.cuda.device_count()} visible); "
                           f"start at most one process per GPU (--nproc_per_node)")
        torch.cuda.set_device(joined.local_rank)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(minutes=30))
    _THIS[0] = joined
    return joined


def shutdown(clean: bool = True) -> None:
    """Leave the process group together, after the DDP modules that hold it are gone: a gloo
    group that outlived destroy_process_group() inside a live DDP reducer was torn down during
    interpreter exit, which aborted a rank now and then ('terminate called without an active
    exception'). After an error (`clean=False`) the other ranks may be inside another
    collective, so there is no barrier to wait at."""
    if dist.is_initialized():
        gc.collect()
        if clean:
            dist.barrier()
        dist.destroy_process_group()


def epoch_shard(lengths: PairLengths, batch_size: int, rng: np.random.Generator | None, batch_tokens: int = 0,
                rows: np.ndarray | None = None) -> EpochBatches:
    """This rank's batches for one epoch (with `rng` None: in a fixed order). All ranks draw the
    same global batches of batch_size x world examples, or of batch_tokens x world padded target
    tokens (the same rng state), and rank r takes every world-th example of each: see
    `EpochBatches`."""
    return EpochBatches(lengths, batch_size, rng, batch_tokens, world().rank, world().size, rows)


def all_sum(values: list[float], device: torch.device) -> list[float]:
    """Element-wise sum over ranks (the identity for a world of one)."""
    if not world().distributed:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def from_main(obj: Any) -> Any:
    """Rank 0's `obj` on every rank (validation results, the run directory)."""
    if not world().distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    """Wait until every rank is here (nothing to wait for in a world of one)."""
    if world().distributed:
        dist.barrier()


def gather(obj: Any) -> list[Any]:
    """Every rank's `obj`, in rank order, on every rank."""
    if not world().distributed:
        return [obj]
    out: list[Any] = [None] * world().size
    dist.all_gather_object(out, obj)
    return out


def launch(nproc: int, argv: list[str]) -> int:
    """`nmt ARGS --nproc N` is `torchrun --standalone --nproc_per_node N -m nmt ARGS`: start it and
    return its exit code (128 + the signal when one stopped it)."""
    if "WORLD_SIZE" in os.environ:
        raise NmtError("--nproc starts torchrun itself; under torchrun, leave it out")
    args, skip = [], False
    for arg in argv:
        if skip or arg.startswith("--nproc="):
            skip = False
            continue
        if arg == "--nproc":
            skip = True
            continue
        args.append(arg)
    # torchrun would leave an empty torchelastic_* folder in /tmp at every launch: give it one we remove.
    logs = tempfile.TemporaryDirectory(prefix="nmt-torchrun-")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               f"--log-dir={logs.name}", "-m", "nmt", *args]
    launcher = subprocess.Popen(command)
    forwarded: list[int] = []

    def forward(signum: int, frame: object) -> None:
        # SIGTERM or SIGINT sent to this process must reach torchrun, which passes it to the
        # workers: they save and stop together. Without this they would train on, orphaned.
        forwarded.append(signum)
        launcher.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = launcher.wait()
        return 128 + forwarded[0] if forwarded else code  # torchrun itself exits 1 on a signal
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        logs.cleanup()
