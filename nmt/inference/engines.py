"""What every engine's caller needs, whichever engine decodes (`--engine torch`, `onnx` or
`onnx-fp32`): the device it decodes on, and batches decoded in order (several at once by the ONNX
engine, with torch's threads held to one meanwhile).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TypeVar

import torch

from nmt.errors import NmtError
from nmt.hardware import resolve_device
from nmt.inference.ensemble import Ensemble
from nmt.inference.onnx_engine import OnnxSeq2Seq, decode_at_once

ENGINES = ("torch", "onnx", "onnx-fp32")
T, R = TypeVar("T"), TypeVar("R")


def map_batches(model: object, decode: Callable[[T], R], batches: list[T]) -> list[R]:
    """decode(batch) for every batch, in order: the ONNX engine (one model or an ensemble's
    members) decodes several at once, with torch on one thread meanwhile (`torch_threads`)."""
    members = onnx_members(model)
    if not members:
        return [decode(batch) for batch in batches]
    with torch_threads(model):
        return decode_at_once(members, decode, batches)


def onnx_members(model: object) -> list[OnnxSeq2Seq]:
    """The ONNX Runtime models behind `model`: itself, or each member of an ensemble that ONNX
    Runtime decodes; none for torch."""
    members = model.models if isinstance(model, Ensemble) else [model]
    return members if all(isinstance(member, OnnxSeq2Seq) for member in members) else []


def engine_device(engine: str, device: str | torch.device) -> torch.device:
    """The device `engine` decodes on: `device` for torch, the CPU for the ONNX engines; one
    line for an engine that does not exist or a device it cannot run on."""
    if engine not in ENGINES:
        raise NmtError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    if engine == "torch":
        return device if isinstance(device, torch.device) else resolve_device(device)
    if str(device) not in ("auto", "cpu"):
        raise NmtError(f"--engine {engine} runs on the CPU (ONNX Runtime's CPU provider): "
                       f"drop --device {device}, or use --engine torch")
    return torch.device("cpu")


@contextlib.contextmanager
def torch_threads(model: object) -> Iterator[None]:
    """While ONNX Runtime decodes, torch (left with the search's bookkeeping) runs on one thread:
    its OpenMP workers otherwise spin on after each call, on the cores ONNX Runtime needs (int8
    greedy on 2 cores, before ONNX Runtime's own spinning was turned off: 774 sentences/s with
    torch at two threads, 1,291 at one)."""
    if not onnx_members(model):
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
