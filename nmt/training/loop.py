"""Training: teacher forcing, masked cross-entropy, Adam, clipping, validation, checkpoints.

`train(cfg, out_dir)` reads top to bottom: `setup` (nmt.training.run_setup) makes the run (the
runtime, the recipe's choices, the data, the model and optimizer), then one loop over epochs and
batches in which logging, validation, saving and stopping happen where they are written.
"""

from __future__ import annotations

import json
import logging
import math
import signal
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from nmt import hardware
from nmt.config import Config
from nmt.errors import NmtError
from nmt.evaluation.validation import search_name, validate
from nmt.inference.translator import Options
from nmt.evaluation.visualize import plot_curves
from nmt.model.checkpoint import checkpoint_state, publish, save_rotating
from nmt.model.runs import BEST
from nmt.progress_bar import on_terminal
from nmt.training import distributed
from nmt.training.finetune import Parent
from nmt.training.progress import LossWindow
from nmt.training.run_data import epoch_batches
from nmt.training.run_setup import Run, setup
from nmt.training.step import train_step
from nmt.training.stopping import StopSignals, TrainingInterrupted

logger = logging.getLogger(__name__)


# The loop ------------------------------------------------------------------------------------

def train(cfg: Config, out_dir: Path, data_path: str | None = None, quiet: bool = False,
          resume: dict | None = None, parent: Parent | None = None) -> dict:
    """Train `cfg` into `out_dir` (or continue the checkpoint `resume`, or start from `parent`'s
    weights) until the epochs, the budget, early stopping or a signal end it; returns the best
    validation record. Under torchrun, in this process's place (`distributed.init`)."""
    run = setup(cfg, out_dir, data_path, resume, quiet, parent)
    world = run.world
    cfg, progress, train_cfg = run.cfg, run.progress, run.cfg.train
    if spent := run.budget.exhausted(progress.step):
        logger.warning("nothing to train: %s; raise it (--set train.max_steps=N or --max-minutes M) "
                       "to continue", spent)
        return finish(run)
    total_steps = train_cfg.epochs * run.steps_per_epoch
    window = LossWindow()  # spans epochs: only log lines reset it
    quiet = quiet or not world.is_main  # one progress bar, from rank 0
    plain = not on_terminal()  # a log file gets the step lines alone, no carriage-return redraws
    run.model.train()
    with StopSignals() as signals:
        while progress.epoch <= train_cfg.epochs:
            # Epoch 1's batches were drawn in setup to count the steps; a resumed run skips ahead in either.
            batches = run.first_epoch if progress.epoch == 1 else epoch_batches(run.data, cfg, progress.epoch)
            run.first_epoch = None  # held no longer than its epoch
            epoch_start, first_step = time.monotonic(), progress.step
            with tqdm(total=len(batches), initial=progress.batch_in_epoch, desc=f"epoch {progress.epoch}/"
                      f"{train_cfg.epochs}", disable=quiet or plain, unit="batch", dynamic_ncols=True,
                      leave=False) as bar:
                for group in batches.groups(progress.batch_in_epoch, train_cfg.accum_steps):
                    loss, tokens = train_batches(run, group, total_steps)
                    window.add(loss, tokens)  # all ranks' tokens: the log shows the job's throughput
                    bar.update(len(group))
                    if progress.step % train_cfg.log_every == 0:
                        run.progress.check_losses(run.device, run.out_dir)
                        lr, used = run.optimizer.param_groups[0]["lr"], run.budget.progress(progress.step, total_steps)
                        window, figures = window.log(bar, progress.step, progress.epoch, lr, run.budget.elapsed(), used)
                        run.board.scalars(progress.step, figures)
                    stop_reason, signalled = agree_to_stop(run, signals)  # every rank stops at the same step
                    if signalled is not None:
                        where = save(run) or f"in {run.out_dir}"
                        raise TrainingInterrupted(f"interrupted at step {progress.step}; saved {where}. Resume "
                                                  f"with: nmt train --resume {run.out_dir}", signalled)
                    if stop_reason:
                        logger.info("%s: stopping after step %d", stop_reason, progress.step)
                        validate_and_save(run, "budget")
                        return finish(run)
                    if train_cfg.eval_every and progress.step % train_cfg.eval_every == 0:
                        validate_and_save(run, "eval_every")
                        if patience_exhausted(run):
                            return finish(run)
                    elif train_cfg.save_every and progress.step % train_cfg.save_every == 0:
                        save(run)
            if run.device.type == "cuda":  # the epoch's time includes the work it queued
                torch.cuda.synchronize(run.device)
            logger.info("epoch %d: %d steps in %.1f s of training", progress.epoch, progress.step - first_step,
                        time.monotonic() - epoch_start)
            progress.next_epoch()
            validate_and_save(run, "epoch end", epoch=progress.epoch - 1)
            if patience_exhausted(run):
                break
    return finish(run)


def train_batches(run: Run, group: list[np.ndarray], total_steps: int) -> tuple[torch.Tensor | float, int]:
    """One update on the micro-batches of training examples at `group`'s indices (train.accum_steps
    of them), at the learning rate the schedule gives now."""
    vocab, progress = run.data.tgt_vocab, run.progress
    batches = [run.data.batch(indices).to(run.device) for indices in group]
    used = run.budget.progress(progress.step, total_steps, run.clock if run.world.distributed else None)
    for param_group in run.optimizer.param_groups:
        param_group["lr"] = run.schedule.lr(progress.step, used)
    loss, tokens = train_step(run.trained, batches, run.optimizer, run.cfg, vocab.pad_id)
    progress.advance(loss, tokens, len(group))
    return loss, tokens


def agree_to_stop(run: Run, signals: StopSignals) -> tuple[str | None, int | None]:
    """Why to stop after this step (the budget), if at all, and the signal to stop for. Under
    torchrun the ranks agree on both, and on the clock, or one would wait for the others forever.
    The signal is the one the ranks agreed on, never this rank's flag read again afterwards: a
    SIGTERM that lands between the all-reduce and such a read would send this rank into the
    checkpoint's all-gather while the others train on into the next step's gradient all-reduce,
    and both would wait there until torchrun killed them (1 run in 25 of the SIGTERM test)."""
    stop_reason = run.budget.exhausted(run.progress.step)
    if not run.world.distributed:
        return stop_reason, signals.received
    signalled, out_of_budget, clocks = distributed.all_sum(
        [float(signals.received is not None), float(stop_reason is not None), run.budget.elapsed()], run.device)
    run.clock = clocks / run.world.size
    if signalled:
        signals.from_peer(signal.SIGTERM)
    return stop_reason or ("another process reached the budget" if out_of_budget else None), (
        signals.received if signalled else None)


# Validation and checkpoints -----------------------------------------------------------------

def validate_and_save(run: Run, reason: str, epoch: int | None = None) -> None:
    """Validation loss and BLEU (rank 0 validates, the others wait for its result), a line in
    metrics.jsonl, the schedule's and early stopping's bookkeeping, a checkpoint, and best.pt if
    it improved. `epoch`: the epoch the record belongs to (at an epoch end the position has moved on)."""
    progress = run.progress
    if not run.data.valid:
        logger.warning("the valid split is empty; saving without validation")
        path = save(run)
        if path is not None:
            publish(path, run.out_dir / BEST)
        return
    result = None
    if run.world.is_main:
        result = validate(run.translator, run.data.valid, run.data.references,
                          Options(beam=run.cfg.train.val_beam_size))
    result = distributed.from_main(result)
    record = {"step": progress.step, "epoch": progress.epoch if epoch is None else epoch,
              "train_loss": round(progress.take_train_loss(), 4), "val_loss": round(result.loss, 4),
              "val_ppl": round(math.exp(min(result.loss, 50)), 2), "val_bleu": round(result.legacy.bleu, 2),
              "val_chrf": round(result.legacy.chrf, 2), "val_sacrebleu": round(result.standard.bleu, 2),
              "elapsed_s": round(run.budget.elapsed(), 1), "lr": run.optimizer.param_groups[0]["lr"],
              "peak_rss_mb": round(hardware.peak_rss_mb()), "at": reason, "val_search": search_name(
                  run.cfg.train.val_beam_size)}
    if run.world.is_main:
        with open(run.out_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
    run.board.scalars(record["step"], {"valid/loss": result.loss, "valid/bleu": result.legacy.bleu,
                                       "valid/chrf": result.legacy.chrf, "valid/sacrebleu": result.standard.bleu})
    improved = progress.record(record)
    path = save(run)
    if improved and path is not None:
        publish(path, run.out_dir / BEST)
    logger.info("validation at step %d (epoch %d, %s): loss %.3f | ppl %.1f | BLEU %.2f | chrF %.2f (lowercased, "
                "tokenized) | sacreBLEU %.2f%s", record["step"], record["epoch"], record["val_search"], result.loss,
                record["val_ppl"], result.legacy.bleu, result.legacy.chrf, result.standard.bleu,
                " | new best" if improved else "")


def patience_exhausted(run: Run) -> bool:
    patience = run.cfg.train.patience
    if patience and run.progress.stale >= patience:
        logger.info("early stopping: neither a better validation BLEU nor a lower validation loss in %d validations "
                    "(train.patience)", patience)
        return True
    return False


def save(run: Run) -> Path | None:
    """A checkpoint from rank 0 (all ranks must call it: it gathers their RNG states); the one place
    that checks the losses before anything is written, so no checkpoint holds a diverged model."""
    run.progress.check_losses(run.device, run.out_dir)
    progress = {**run.progress.state_dict(), "elapsed_s": run.budget.elapsed()}
    progress["rng"].update(torch=torch.get_rng_state(), torch_ranks=distributed.gather(torch.get_rng_state()))
    if not run.world.is_main:
        return None
    data = run.data
    state = checkpoint_state(run.model, run.optimizer, run.cfg, data.src_vocab, data.tgt_vocab, progress)
    state["corpus"] = data.corpus  # what --resume must continue on
    return save_rotating(run.out_dir, state, run.progress.step, run.cfg.train.keep_last)


def finish(run: Run) -> dict:
    best = run.progress.best
    run.board.close()
    if not run.world.is_main:
        return best
    try:
        logger.info("training curves: %s", plot_curves(run.out_dir))
    except NmtError as e:  # matplotlib is optional; no validation yet means nothing to draw
        logger.info("no training curves: %s", e)
    logger.info("done: best validation BLEU %.2f at step %d; checkpoints in %s", best.get("val_bleu", float("nan")),
                best.get("step", 0), run.out_dir)
    return best
