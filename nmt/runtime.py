"""Where and how this process computes: its device, threads, precision and memory allocator."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import sys

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


def configure(threads: int) -> None:
    """Apply `train.threads` (0 keeps torch's default) and the allocator setting."""
    if threads:
        torch.set_num_threads(threads)
    if not keep_freed_memory():
        logger.debug("allocator tuning not available on this platform")


@functools.lru_cache(maxsize=None)
def fast_bf16(device: torch.device) -> bool:
    """Whether bf16 matrix products run natively: CUDA GPUs that support bf16, or CPUs with
    avx512_bf16 or AMX (elsewhere oneDNN emulates bf16, which is slower than fp32)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = set(f.read().split())
    except OSError:
        return False
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def resolve_precision(precision: str, device: torch.device) -> str:
    """'auto' becomes bf16 where it is native and fp32 elsewhere."""
    if precision == "auto":
        return "bf16" if fast_bf16(device) else "fp32"
    return precision
