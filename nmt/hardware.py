"""Where and how this process computes: its device, threads, precision and memory allocator."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import sys
from dataclasses import dataclass

import torch

from nmt.errors import NmtError

logger = logging.getLogger(__name__)

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt() parameters
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc's upper bound on 64-bit


def keep_freed_memory() -> bool:
    """Stop glibc from returning large freed blocks to the OS after every training step.

    By default each allocation over ~128 KiB-32 MiB is a fresh mmap, so every step's logits and
    gradients (tens of MB over a 17k-word vocabulary) are page-faulted in again; measured here,
    the log-softmax, zero-fill and dtype casts of those tensors ran several times slower than
    memory allows. Raising the mmap and trim thresholds keeps the pages in the heap for reuse.
    Returns False where it does not apply (not Linux/glibc).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
                    and libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30))
    except (OSError, AttributeError):
        return False


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (ru_maxrss is KiB on Linux, bytes on macOS)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """'auto' takes CUDA when present; 'cuda' without a usable GPU is an error, not a silent CPU run.
    Under torchrun each process takes the GPU of its local rank."""
    if name == "cuda" and not torch.cuda.is_available():
        raise NmtError(f"--device cuda: no CUDA device is available to this torch build "
                       f"({torch.__version__}); use --device cpu or --device auto")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name, local_rank) if name == "cuda" else torch.device(name)


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Copy a host tensor to `device` without making the host wait: on CUDA through pinned memory
    with non_blocking (a plain .to() synchronizes with the GPU's queue); elsewhere a plain move."""
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def configure(threads: int) -> None:
    """Apply `train.threads` (0 keeps torch's default) and the allocator setting."""
    if threads:
        torch.set_num_threads(threads)
    if not keep_freed_memory():
        logger.debug("allocator tuning not available on this platform")


BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # the instructions that make bf16 faster than fp32


def cpu_flags() -> set[str]:
    """The ISA flags /proc/cpuinfo lists (empty where it cannot be read, e.g. macOS)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


NOTED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")  # what a published figure names its CPU by


def noted_flags() -> list[str]:
    """Which of NOTED_FLAGS this CPU lists, in that order: what speed and bf16 depend on."""
    flags = cpu_flags()
    return [f for f in NOTED_FLAGS if f in flags]


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def bf16_lstm_runs() -> bool:
    """Whether oneDNN runs a bf16 LSTM, forward and backward, in this process.

    The flags alone can mislead: ONEDNN_MAX_CPU_ISA=AVX2 on an avx512_bf16 CPU (or a VM that
    hides the instructions from oneDNN) lists the flag, yet the bf16 LSTM primitive cannot be
    created there. A tiny real run answers for the kernels nmt will actually call.
    """
    with torch.random.fork_rng(devices=[]):  # the probe must not move the seeded RNG of a run
        lstm = torch.nn.LSTM(4, 4, batch_first=True)
        try:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out, _ = lstm(torch.randn(2, 3, 4))
            out.float().sum().backward()
        except RuntimeError:
            return False
    return True


@dataclass(frozen=True)
class Bf16Support:
    native: bool
    reason: str  # which feature decided it, for the log and for error messages


@functools.lru_cache(maxsize=None)
def bf16_support(device: torch.device) -> Bf16Support:
    """Whether bf16 runs natively on `device`, and why (or why not).

    On CPUs without avx512_bf16 or AMX, oneDNN emulates bf16: measured here with oneDNN held to
    AVX2, a bf16 1024^2 matrix product ran ~150x slower than fp32, and the LSTM does not run at all.
    """
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        if torch.cuda.is_bf16_supported():
            return Bf16Support(True, f"{name} supports bf16")
        return Bf16Support(False, f"{name} has no bf16 support")
    if device.type != "cpu":
        return Bf16Support(False, f"bf16 is not enabled for {device.type} devices")
    found = sorted(cpu_flags() & set(BF16_CPU_FLAGS))
    if not found:
        return Bf16Support(False, "this CPU has no avx512_bf16 or amx_bf16, so bf16 would be emulated "
                                  "(many times slower than fp32)")
    if not bf16_lstm_runs():
        return Bf16Support(False, f"this CPU lists {' and '.join(found)}, but oneDNN cannot run a bf16 LSTM "
                                  f"in this process (ONEDNN_MAX_CPU_ISA="
                                  f"{os.environ.get('ONEDNN_MAX_CPU_ISA', 'unset')})")
    return Bf16Support(True, f"this CPU has {' and '.join(found)}")


def fast_bf16(device: torch.device) -> bool:
    """Whether bf16 matrix products run natively on `device` (see `bf16_support`)."""
    return bf16_support(device).native


def resolve_precision(precision: str, device: torch.device) -> str:
    """'auto' becomes bf16 where it is native and fp32 elsewhere; an explicit 'bf16' where it is
    not native is refused with the reason (a traceback from inside oneDNN, or a run 150x slower
    than fp32, would be the alternative)."""
    if precision == "auto":
        return "bf16" if fast_bf16(device) else "fp32"
    if precision == "bf16" and not fast_bf16(device):
        raise NmtError(f"train.precision=bf16 is not available: {bf16_support(device).reason}; "
                       f"use --set train.precision=fp32 (or auto, which picks bf16 only where it is native)")
    return precision


def describe_precision(requested: str, device: torch.device) -> str:
    """The precision a run uses and the feature that decided it, for the log's first lines."""
    chosen = resolve_precision(requested, device)
    support = bf16_support(device)
    how = "auto" if requested == "auto" else "requested"
    return f"precision {chosen} ({how}: {support.reason})"
