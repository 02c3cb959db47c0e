"""The ONNX Runtime engine: a checkpoint's exported graphs (`nmt export`) behind the same
`encode` / `candidates` pair as the PyTorch model, so `nmt.inference.decoding.search`'s greedy and beam search,
n-best lists and attention run unchanged on either.

Tensors cross between torch and ONNX Runtime as numpy views of the same memory (no copies).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch

from nmt.data.manifest import file_sha256
from nmt.errors import CheckpointError
from nmt.inference.onnx_export import (
    MANIFEST,
    Manifest,
    changed_names,
    export_dir,
    export_run,
    flat_state,
    require_onnx,
    unflat_state,
)
from nmt.model.decoder import DecoderState
from nmt.model.seq2seq import ranked, with_named

VARIANTS = {"onnx": "int8", "onnx-fp32": "fp32"}  # --engine -> the graphs it runs
T, R = TypeVar("T"), TypeVar("R")
logger = logging.getLogger(__name__)


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
    if manifest.checkpoint_sha256 != file_sha256(checkpoint):
        raise CheckpointError(f"the ONNX export in {directory} is older than {checkpoint} (the checkpoint changed "
                              f"since): export it again with `nmt export {checkpoint.parent}`")
    return directory, manifest


def current_export(checkpoint: Path) -> tuple[Path, Manifest]:
    """The export of `checkpoint`, made first when there is none or it is older (the benchmarks'
    way; the engines refuse instead, so a user's command never exports on its own)."""
    try:
        return read_manifest(checkpoint)
    except CheckpointError:
        logger.warning("exporting %s (no current export)", checkpoint)
        return export_run(checkpoint)


def decode_at_once(models: Sequence[OnnxSeq2Seq], decode: Callable[[T], R], batches: list[T]) -> list[R]:
    """decode(batch) for every batch, in order; several at once when there are several, each
    worker thread on the one-thread sessions of every model it calls: one, or an ensemble's
    members (an int8 ensemble of two, beam 5: 324-334 sentences/s, one batch at a time 244-261;
    `AMD EPYC`, 2 cores)."""
    if len(batches) < 2 or any(model.workers is model.shared for model in models):
        return [decode(batch) for batch in batches]

    def work(batch: T) -> R:
        for model in models:
            model.local.sessions = model.workers
        return decode(batch)

    with ThreadPoolExecutor(min(min(model.threads for model in models), len(batches))) as pool:
        return list(pool.map(work, batches))


class OnnxSeq2Seq:
    """What `nmt.inference.decoding.search` needs of a model, run by ONNX Runtime on the CPU with `threads` threads."""

    def __init__(self, directory: Path, manifest: Manifest, variant: str, threads: int):
        # A batch alone is decoded with `threads` threads; several at once, each on one thread
        # (ONNX Runtime lets go of the GIL while it runs): on 2 cores, two batches at a time
        # decoded 3,397 test sentences/s greedy and 645 beam 5, one batch on two threads 2,234
        # and 498. A session with one thread runs each call on its caller's thread.
        self.threads, self.local = threads, threading.local()
        self.shared = self._sessions(directory, manifest, variant, threads)
        self.workers = self._sessions(directory, manifest, variant, 1) if threads > 1 else self.shared
        self.names = [output.name for output in self.shared["encoder"].get_outputs()]
        self.changed = changed_names(self.names)
        # What the step reads of the state (dot attention, say, never reads the prepared keys).
        inputs = {i.name for i in self.shared["decoder"].get_inputs()}
        self.step_inputs = [name for name in self.names if name in inputs]
        self.reads_named = "named" in inputs  # an older export ranks every token instead
        self.vocab_size, self.banned_id = manifest.vocab_size, manifest.banned_id
        self._every = np.zeros((0, self.vocab_size), np.int64)

    @staticmethod
    def _sessions(directory: Path, manifest: Manifest, variant: str, threads: int) -> dict:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Its threads otherwise spin between calls, on the cores the search's torch calls need
        # between steps: greedy search measured 1.6x faster without (2-core Xeon).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # warnings about unused initializers and the like: not the user's
        try:
            return {part: ort.InferenceSession(str(directory / manifest.graphs[f"{variant}/{part}"]), options,
                                               providers=["CPUExecutionProvider"]) for part in ("encoder", "decoder")}
        except Exception as e:  # onnxruntime's own kinds: a missing, truncated or foreign graph file
            raise CheckpointError(f"the ONNX export in {directory} cannot be loaded "
                                  f"({str(e).strip().splitlines()[0][:150]}): export again with "
                                  f"`nmt export {directory.parent.parent}`") from None

    def session(self, part: str):
        """The sessions of this thread: one-thread ones inside `decode_at_once`'s workers."""
        return (getattr(self.local, "sessions", None) or self.shared)[part]

    def encode(self, src: torch.Tensor, src_lens: torch.Tensor) -> DecoderState:
        outputs = self.session("encoder").run(None, {"src": src.cpu().numpy(), "src_lens": src_lens.cpu().numpy()})
        return unflat_state({name: torch.from_numpy(x) for name, x in zip(self.names, outputs)})

    def candidates(self, prev_ids: torch.Tensor, state: DecoderState, k: int | None, banned_id: int | None, eos_id: int,
                   also: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, DecoderState, torch.Tensor]:
        """`Seq2Seq.candidates`, run by ONNX Runtime. The graph holds the <eos> id and the banned id
        it was exported with: search bans that one (attention, which reads only the weights, may
        pass None). For k None (an ensemble's member, forced scoring) the graph reads every token by
        name, in vocabulary order, as the PyTorch model gives it. The `also` tokens' log-probabilities
        come from the graph beside its k best; an export made before it could (no `named` input)
        ranks every token instead, and the k best, the named ones or all of them are read from that."""
        if banned_id not in (None, self.banned_id):
            raise ValueError(f"this export bans id {self.banned_id}, not {banned_id}")
        by_name = k is None and self.reads_named  # every token named: read in vocabulary order, no sort
        whole = k is None or (also is not None and not self.reads_named)
        feeds = {"prev_ids": prev_ids.numpy(),
                 "k": np.array(1 if by_name else self.vocab_size if whole else min(k, self.vocab_size))}
        if by_name:
            feeds["named"] = self._every_id(len(prev_ids))
        elif self.reads_named:  # (<eos>, whose log-probability is read anyway, stands in for no named token)
            named = also if also is not None else torch.full((len(prev_ids), 1), eos_id, dtype=torch.long)
            feeds["named"] = named.contiguous().numpy()
        feeds.update((name, x.contiguous().numpy()) for name, x in zip(self.step_inputs,
                                                                        flat_state(state, self.step_inputs)))
        top, ids, eos, *rest = (torch.from_numpy(x) for x in self.session("decoder").run(None, feeds))
        named_scores, weights, *changed = rest if self.reads_named else (None, *rest)
        new = dict(zip(self.changed, changed))
        state = replace(state, hidden=(new["h"], new["c"]), feed=new.get("feed"))
        if by_name:
            top, ids = with_named(*ranked(named_scores, k), named_scores, also)
        elif whole:  # every token's log-probability, in vocabulary order
            full = torch.empty_like(top).scatter_(1, ids, top)
            top, ids = with_named(*ranked(full, k), full, also if not self.reads_named else None)
        if also is not None and self.reads_named and not by_name:
            top, ids = torch.cat((top, named_scores), 1), torch.cat((ids, also), 1)
        return top, ids, eos, state, weights

    def _every_id(self, rows: int) -> np.ndarray:
        """`named` that reads every token (ranking them all in the graph instead decoded an int8
        ensemble of two 30-minute runs at beam 5 at 28.7 test sentences/s, not 147.3: `AMD EPYC`),
        made once for the most rows asked yet and cut to `rows` (read once: batches decode on threads)."""
        every = self._every
        if len(every) < rows:
            every = self._every = np.ascontiguousarray(np.broadcast_to(np.arange(self.vocab_size),
                                                                       (rows, self.vocab_size)))
        return every[:rows]


def load_engine(checkpoint: Path, engine: str, threads: int | None = None) -> OnnxSeq2Seq:
    """The ONNX engine (`onnx`: int8, `onnx-fp32`) for the export of `checkpoint`."""
    require_onnx(export=False)
    directory, manifest = read_manifest(checkpoint)
    return OnnxSeq2Seq(directory, manifest, VARIANTS[engine], threads or torch.get_num_threads())
