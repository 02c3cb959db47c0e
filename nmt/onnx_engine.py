"""The ONNX Runtime engine: a checkpoint's exported graphs (`nmt export`) behind the same
`encode` / `candidates` pair as the PyTorch model, so `nmt.search`'s greedy and beam search,
n-best lists and attention run unchanged on either.

Tensors cross between torch and ONNX Runtime as numpy views of the same memory (no copies).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from nmt.errors import CheckpointError, NmtError
from nmt.export import MANIFEST, Manifest, changed_names, export_dir, flat_state, require_onnx, sha256, unflat_state
from nmt.model.decoder import DecoderState
from nmt.runtime import resolve_device

ENGINES = ("torch", "onnx", "onnx-fp32")
VARIANTS = {"onnx": "int8", "onnx-fp32": "fp32"}  # --engine -> the graphs it runs


def read_manifest(checkpoint: Path) -> tuple[Path, Manifest]:
    """The export of `checkpoint`, checked to be there and made from this very checkpoint."""
    directory = export_dir(checkpoint)
    if not (directory / MANIFEST).is_file():
        raise CheckpointError(f"{checkpoint} has no ONNX export: make one with `nmt export {checkpoint.parent}`")
    try:
        manifest = Manifest.read(directory / MANIFEST)
    except (ValueError, TypeError) as e:  # not JSON, or the fields of another nmt version
        raise CheckpointError(f"{directory / MANIFEST} is unreadable ({str(e)[:100]}): export again with "
                              f"`nmt export {checkpoint.parent}`") from None
    if manifest.checkpoint_sha256 != sha256(checkpoint):
        raise CheckpointError(f"the ONNX export in {directory} is older than {checkpoint} (the checkpoint changed "
                              f"since): export it again with `nmt export {checkpoint.parent}`")
    return directory, manifest


class OnnxSeq2Seq:
    """What `nmt.search` needs of a model, run by ONNX Runtime on the CPU with `threads` threads."""

    def __init__(self, directory: Path, manifest: Manifest, variant: str, threads: int):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Its threads otherwise spin between calls, on the cores the search's torch calls need
        # between steps: greedy search measured 1.6x faster without (2-core Xeon).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # warnings about unused initializers and the like: not the user's
        try:
            self.encoder, self.decoder = (
                ort.InferenceSession(str(directory / manifest.graphs[f"{variant}/{part}"]), options,
                                     providers=["CPUExecutionProvider"]) for part in ("encoder", "decoder"))
        except Exception as e:  # onnxruntime's own kinds: a missing, truncated or foreign graph file
            raise CheckpointError(f"the ONNX export in {directory} cannot be loaded "
                                  f"({str(e).strip().splitlines()[0][:150]}): export again with "
                                  f"`nmt export {directory.parent.parent}`") from None
        self.names = [output.name for output in self.encoder.get_outputs()]
        self.changed = changed_names(self.names)
        # What the step reads of the state (dot attention, say, never reads the prepared keys).
        self.step_inputs = [name for name in self.names if name in {i.name for i in self.decoder.get_inputs()}]
        self.vocab_size, self.banned_id = manifest.vocab_size, manifest.banned_id

    def encode(self, src: torch.Tensor, src_lens: torch.Tensor) -> DecoderState:
        outputs = self.encoder.run(None, {"src": src.cpu().numpy(), "src_lens": src_lens.cpu().numpy()})
        return unflat_state({name: torch.from_numpy(x) for name, x in zip(self.names, outputs)})

    def candidates(self, prev_ids: torch.Tensor, state: DecoderState, k: int, banned_id: int | None, eos_id: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, DecoderState, torch.Tensor]:
        """`Seq2Seq.candidates`, run by ONNX Runtime. The graph holds the <eos> id and the banned id
        it was exported with: search bans that one (attention, which reads only the weights, may
        pass None)."""
        if banned_id not in (None, self.banned_id):
            raise ValueError(f"this export bans id {self.banned_id}, not {banned_id}")
        feeds = {"prev_ids": prev_ids.numpy(), "k": np.array(min(k, self.vocab_size))}
        feeds.update((name, x.contiguous().numpy()) for name, x in zip(self.step_inputs,
                                                                        flat_state(state, self.step_inputs)))
        top, ids, eos, weights, *changed = (torch.from_numpy(x) for x in self.decoder.run(None, feeds))
        new = dict(zip(self.changed, changed))
        state = replace(state, hidden=(new["h"], new["c"]), feed=new.get("feed"))
        return top, ids, eos, state, weights


def load_engine(checkpoint: Path, engine: str, threads: int | None = None) -> OnnxSeq2Seq:
    """The ONNX engine (`onnx`: int8, `onnx-fp32`) for the export of `checkpoint`."""
    require_onnx()
    directory, manifest = read_manifest(checkpoint)
    return OnnxSeq2Seq(directory, manifest, VARIANTS[engine], threads or torch.get_num_threads())


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
def torch_threads(engine: str) -> Iterator[None]:
    """While ONNX Runtime decodes, torch (left with the search's bookkeeping) runs on one thread:
    its OpenMP workers otherwise spin on after each call, on the cores ONNX Runtime needs (int8
    greedy on 2 cores, before ONNX Runtime's own spinning was turned off: 774 sentences/s with
    torch at two threads, 1,291 at one)."""
    if engine == "torch":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
