"""`train.precision: auto` on a CPU with native bf16, decided by measurement: a few real training
steps of the run's own model and batches in fp32 and in bf16, and the faster wins.

The flags only say bf16 is native, not that it is faster for this model: on one avx512_bf16
Xeon without AMX, bf16 training reached 1.98x the seed's speed where a Zen 4 EPYC with the same
flags reached 4.10x. The figures are cached per CPU, torch version, threads and model shape
(`$NMT_CACHE_DIR/precision.json`, default ~/.cache/nmt), so later runs start at once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from nmt import hardware
from nmt.config import Config
from nmt.files import write_text_atomically
from nmt.model import build_model
from nmt.training import distributed
from nmt.training.run_data import TrainingData
from nmt.training.step import train_step

logger = logging.getLogger(__name__)

WARMUP, TIMED = 2, 6  # steps: the first allocate and pick kernels; the timed ones give tok/s
CANDIDATES = ("fp32", "bf16")


def cache_file() -> Path:
    return Path(os.environ.get("NMT_CACHE_DIR") or Path.home() / ".cache" / "nmt") / "precision.json"


def cache_key(cfg: Config, data: TrainingData) -> str:
    """What the speed of the two precisions depends on: the CPU, torch, threads and the shape of
    the work (model, vocabularies, batches)."""
    shape = {"model": dataclasses.asdict(cfg.model), "vocab": [len(data.src_vocab), len(data.tgt_vocab)],
             "batch": [cfg.train.batch_size, cfg.train.batch_tokens, cfg.data.max_len]}
    digest = hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:12]
    return f"{hardware.cpu_name()} | torch {torch.__version__} | {torch.get_num_threads()} threads | {digest}"


def measure(cfg: Config, data: TrainingData, batches: Sequence[np.ndarray], precision: str,
            device: torch.device) -> float:
    """Target tokens/s of training steps in `precision` on a fresh copy of the run's model (the
    run's own weights and random state are untouched)."""
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision=precision))
    with torch.random.fork_rng(devices=[]):
        model = build_model(cfg.model, data.src_vocab, data.tgt_vocab).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr, fused=True)
        tokens, start = 0, 0.0
        for i, rows in enumerate(batches[: WARMUP + TIMED]):
            if i == WARMUP:
                tokens, start = 0, time.perf_counter()
            tokens += train_step(model, [data.batch(rows).to(device)], optimizer, cfg,
                                 data.tgt_vocab.pad_id)[1]
    return tokens / max(time.perf_counter() - start, 1e-9)


def measured_precision(cfg: Config, data: TrainingData, batches: Sequence[np.ndarray],
                       device: torch.device) -> tuple[str, str]:
    """The faster of fp32 and bf16 for this run, and how it was decided (for the log line)."""
    path, key = cache_file(), cache_key(cfg, data)
    cache = _read(path)
    figures, how = cache.get(key), "cached"
    if figures is None:
        logger.info("precision auto: timing %d training steps in fp32 and in bf16", WARMUP + TIMED)
        figures = {p: round(measure(cfg, data, batches, p, device)) for p in CANDIDATES}
        how = "measured"
        _write(path, {**cache, key: figures})
    chosen = max(CANDIDATES, key=lambda p: figures[p])
    return chosen, (f"auto, {how}: bf16 {figures['bf16']:,} tok/s, fp32 {figures['fp32']:,} tok/s "
                    f"on this CPU and model")


def settle_precision(cfg: Config, requested: str, device: torch.device, data: TrainingData,
                     batches: Sequence[np.ndarray]) -> tuple[Config, str]:
    """The run's config with its precision final, and the log's words for it. Only `auto` on a
    CPU where bf16 is native is measured (rank 0 measures, every rank takes its answer)."""
    if requested != "auto" or device.type != "cpu" or cfg.train.precision != "bf16":
        return cfg, hardware.describe_precision(requested, device)
    main = distributed.world().is_main
    chosen, how = distributed.from_main(measured_precision(cfg, data, batches, device) if main else None)
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision=chosen))
    return cfg, f"precision {chosen} ({how}; {hardware.bf16_support(device).reason})"


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write(path: Path, cache: dict) -> None:
    """Best effort and atomic: a cache that cannot be written only costs the next run a measurement."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(path, json.dumps(cache, indent=1, sort_keys=True) + "\n")
    except OSError as e:
        logger.warning("could not cache the precision measurement in %s: %s", path, e)
