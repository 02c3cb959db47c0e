"""A training run's start: the runtime (device, threads, precision), the recipe's choices, the data
and vocabularies, the model and optimizer, and with --resume everything the checkpoint restores.
`setup` returns the `Run` the loop (`nmt.training.loop`) trains."""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from nmt import hardware
from nmt.config import Config, require_decided
from nmt.data.epoch_order import EpochBatches
from nmt.inference.translator import Translator
from nmt.model import Seq2Seq, build_model
from nmt.model.runs import ensemble_members, truncate_metrics
from nmt.training import distributed
from nmt.training.board import Board
from nmt.training.finetune import Parent
from nmt.training.measured_precision import settle_precision
from nmt.training.progress import Progress
from nmt.training.recipe import fit_to_corpus
from nmt.training.run_data import TrainingData, epoch_batches, load_data, write_run_files
from nmt.training.stopping import Budget, LRSchedule
from nmt.training.student_size import parameters

logger = logging.getLogger(__name__)


def resolve_runtime(cfg: Config) -> tuple[torch.device, Config]:
    """This process's device and the config with its precision decided ('auto' becomes bf16 where it
    is native, fp32 elsewhere; an explicit bf16 where it is not native is an error, here)."""
    device = hardware.resolve_device(cfg.train.device, distributed.world().local_rank)
    precision = hardware.resolve_precision(cfg.train.precision, device)
    return device, dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision=precision))


def build_training_model(cfg: Config, data: TrainingData, device: torch.device
                         ) -> tuple[Seq2Seq, torch.nn.Module, torch.optim.Optimizer]:
    """The model, the module that trains (under torchrun DDP, which all-reduces gradients during
    backward; validation, decoding and checkpoints use the plain model), and Adam."""
    model = build_model(cfg.model, data.src_vocab, data.tgt_vocab).to(device)
    trained: torch.nn.Module = model
    if distributed.world().distributed:
        # (the alignment head has no gradient from a batch without the aligner's links)
        trained = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=model.alignment_head is not None)
    # The fused kernel updates all parameters in one pass instead of a dozen ops per tensor.
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr, fused=device.type in ("cpu", "cuda"))
    return model, trained, optimizer


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


@dataclass
class Run:
    """What the loop and its helpers share."""
    cfg: Config
    out_dir: Path
    world: distributed.World
    device: torch.device
    data: TrainingData
    model: Seq2Seq
    trained: torch.nn.Module  # the model, or its DDP wrapper under torchrun
    optimizer: torch.optim.Optimizer
    schedule: LRSchedule
    translator: Translator  # decodes with the model being trained, for validation
    progress: Progress
    budget: Budget
    steps_per_epoch: int  # the first epoch's, drawn once in setup: the schedule counts epochs with it
    first_epoch: EpochBatches | None  # those batches: the loop trains them rather than draw and count them again
    board: Board  # TensorBoard's curves (train.tensorboard), or a no-op
    clock: float = 0.0  # seconds trained; under DDP the ranks' mean, so their learning rates agree


def setup(cfg: Config, out_dir: Path, data_path: str | None = None, resume: dict | None = None,
          quiet: bool = False, parent: Parent | None = None) -> Run:
    """Everything the loop needs, in order: seeds, runtime, data, model and optimizer, and with
    `resume` the checkpoint's weights, optimizer, position and RNG states; with `parent` its
    weights (averaged, where it kept an average) and vocabularies, and nothing else."""
    seed_everything(cfg.train.seed)
    world = distributed.world()
    board = Board(out_dir if cfg.train.tensorboard and world.is_main else None,
                  resume["progress"]["step"] if resume else 0)  # before the data: a missing package fails at once
    hardware.configure(cfg.train.threads)
    requested = cfg.train.precision
    device, cfg = resolve_runtime(cfg)
    cfg = fit_to_corpus(cfg, data_path, quiet)
    data = load_data(cfg, data_path, out_dir, resume, quiet, parent.vocabularies() if parent else None)
    if resume is None and world.is_main:
        write_run_files(data, cfg, out_dir)
    first_epoch = epoch_batches(data, cfg, 1)
    cfg, precision = settle_precision(cfg, requested, device, data, first_epoch)
    cfg = require_decided(cfg)  # what the model and the loop read from here on
    logger.info("device %s, %s, %d threads", device, precision, torch.get_num_threads())
    model, trained, optimizer = build_training_model(cfg, data, device)
    size, unit = ((cfg.train.batch_tokens, "padded target tokens") if cfg.train.batch_tokens
                  else (cfg.train.batch_size, "sentences"))
    accumulated, steps = cfg.train.accum_steps, math.ceil(len(first_epoch) / cfg.train.accum_steps)
    together = (f" x {accumulated} accumulated" if accumulated > 1 else "") + (
        f" x {world.size} processes" if world.distributed else "")
    global_batch = f" (global batch {world.size * accumulated * size:,} {unit})" if together else ""
    weights = sum(p.numel() for p in model.parameters())
    logger.info("model: %s parameters on %s | batches of %s %s%s%s, %d an epoch, %d steps",
                f"{weights:,}", device, f"{size:,}", unit, together, global_batch, len(first_epoch), steps)
    schedule, progress = LRSchedule(cfg.train), Progress()
    elapsed = 0.0
    if parent is not None and not parent.weights:
        teachers = parameters(parent.cfg.model, data.src_vocab, data.tgt_vocab)
        logger.info("distilled from %s: its tokenizer and vocabularies, new weights; model.embed_size %d, "
                    "model.hidden_size %d: %.1f%% of %s %s parameters", cfg.train.teacher, cfg.model.embed_size,
                    cfg.model.hidden_size, 100 * weights / teachers,
                    "each member's" if ensemble_members(cfg.train.teacher) else "the teacher's", f"{teachers:,}")
    elif parent is not None:
        model.load_state_dict(parent.state["model"])
        logger.info("initialised from %s (sha256 %s): its weights, tokenizer and vocabularies; optimizer, "
                    "schedule, progress and budget start fresh", parent.path, parent.sha256[:12])
    if resume is not None:
        elapsed = restore(resume, model, optimizer, progress, out_dir)
    translator = Translator(model, data.src_vocab, data.tgt_vocab, cfg.decode, device, data.tokenizer)
    return Run(cfg, out_dir, world, device, data, model, trained, optimizer, schedule, translator, progress,
               Budget(cfg.train.max_steps, cfg.train.max_minutes, elapsed), steps, first_epoch, board,
               clock=elapsed)


def restore(state: dict, model: Seq2Seq, optimizer: torch.optim.Optimizer, progress: Progress, out_dir: Path
            ) -> float:
    """Continue from a checkpoint: weights, optimizer, position, RNG states; returns the time spent."""
    world = distributed.world()
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    saved = state["progress"]
    progress.load_state_dict(saved)
    rank_states = saved["rng"].get("torch_ranks", [])
    if len(rank_states) == world.size:
        torch.set_rng_state(rank_states[world.rank])
    else:  # a different number of processes: the run continues, not bit for bit
        torch.set_rng_state(saved["rng"]["torch"])
        if rank_states:
            logger.warning("resuming %d-process training with %d processes: the batch order and dropout draws "
                           "differ from an uninterrupted run", len(rank_states), world.size)
    if world.is_main:
        truncate_metrics(out_dir / "metrics.jsonl", progress.step)
    logger.info("resuming at step %d (epoch %d, batch %d)", progress.step, progress.epoch, progress.batch_in_epoch)
    return saved["elapsed_s"]
