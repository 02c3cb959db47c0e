"""Training: teacher forcing, masked cross-entropy, Adam, clipping, validation, checkpoints."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import random
import signal
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import torch
import torch.nn.functional as F
import yaml
from tqdm import tqdm

from nmt import distributed, runtime
from nmt.checkpoint import BEST, RUNS_DIR, checkpoint_state, publish, save_rotating
from nmt.config import Config
from nmt.corpus import load_splits, resolve_corpus
from nmt.data import Batch, Example, collate, encode_pairs, iterate_batches
from nmt.errors import NmtError
from nmt.evaluate import Scores, group_references, score
from nmt.model import Seq2Seq, build_model
from nmt.schedule import LRSchedule
from nmt.translator import Translator
from nmt.visualize import plot_curves
from nmt.vocab import Vocab

logger = logging.getLogger(__name__)


def prepare_run_dir(out: Path | None, config_path: Path, runs_dir: Path = RUNS_DIR) -> Path:
    """The run directory: `out`, or a new time-stamped one under runs/. Never reuse a non-empty one."""
    if out is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        out = runs_dir / f"{stamp}-{config_path.stem}"
        suffix = 1
        while out.exists():
            suffix += 1
            out = runs_dir / f"{stamp}-{config_path.stem}-{suffix}"
    elif out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise NmtError(f"run directory {out} already exists and is not empty; "
                       f"choose another --out (nothing was overwritten)")
    out.mkdir(parents=True, exist_ok=True)
    return out


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def autocast(device: torch.device, precision: str) -> torch.autocast:
    """bf16 autocast runs the matrix products in bfloat16 (several times the fp32 rate on CPUs
    with avx512_bf16 and on GPUs) while weights, optimizer state and the loss stay fp32."""
    return torch.autocast(device.type, dtype=torch.bfloat16,
                          enabled=runtime.resolve_precision(precision, device) == "bf16")


def batch_loss(model: Seq2Seq, batch: Batch, pad_id: int, precision: str = "fp32",
               label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over the batch's non-pad target tokens (divide by num_tokens for the mean)."""
    mask = batch.tgt_out != pad_id  # (batch, tgt_len); logits are computed for these positions only
    with autocast(batch.src.device, precision):
        logits = model(batch.src, batch.src_lens, batch.tgt_in, mask)  # (num_tokens, vocab)
    return F.cross_entropy(logits.float(), batch.tgt_out[mask], reduction="sum",
                           label_smoothing=label_smoothing)


def train_step(model: torch.nn.Module, batch: Batch, optimizer: torch.optim.Optimizer, cfg: Config,
               pad_id: int, world: distributed.World = distributed.SINGLE) -> tuple[float, int]:
    """One update; returns the mean loss per target token and the target tokens, over all ranks.

    The loss is normalised by the global token count, so N processes compute the gradient a
    single process would over the union of their batches (DDP averages, hence the x world).
    """
    loss_sum = batch_loss(model, batch, pad_id, cfg.train.precision, cfg.train.label_smoothing)
    total_loss, total_tokens = distributed.all_sum([loss_sum.item(), batch.num_tokens], world, batch.src.device)
    optimizer.zero_grad(set_to_none=True)
    (loss_sum * (world.size / total_tokens)).backward()
    if cfg.train.clip_grad > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip_grad)
    optimizer.step()
    return total_loss / total_tokens, int(total_tokens)


@torch.inference_mode()
def validation_loss(model: Seq2Seq, examples: list[Example], batch_size: int, pad_id: int, bos_id: int,
                    device: torch.device, precision: str = "fp32") -> float:
    total, tokens = 0.0, 0
    for batch in iterate_batches(examples, batch_size, pad_id, bos_id):
        batch = batch.to(device)
        total += batch_loss(model, batch, pad_id, precision).item()
        tokens += batch.num_tokens
    return total / max(tokens, 1)


@dataclass
class Validator:
    """Validation loss on the whole valid split, greedy BLEU on a fixed subset of its sources."""
    examples: list[Example]
    sources: list[list[str]]
    references: list[list[str]]

    def __call__(self, model: Seq2Seq, translator: Translator, batch_size: int, pad_id: int, bos_id: int,
                 device: torch.device) -> tuple[float, Scores]:
        model.eval()
        loss = validation_loss(model, self.examples, batch_size, pad_id, bos_id, device)
        hyps = [" ".join(t) for t in translator.translate_tokens(self.sources)]
        model.train()
        return loss, score(hyps, self.references)


class Budget:
    """Stops training at max_steps or max_minutes, whichever comes first (0 disables either)."""

    def __init__(self, max_steps: int, max_minutes: float, already_elapsed: float = 0.0):
        self.max_steps, self.max_seconds = max_steps, max_minutes * 60
        self.start = time.monotonic() - already_elapsed  # a resumed run continues its clock

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def progress(self, step: int, total_steps: int, elapsed: float | None = None) -> float:
        """The used share of the budget in [0, 1]: steps, minutes or `total_steps` (the
        configured epochs), whichever runs out first. `elapsed` replaces this process's clock
        (under DDP all ranks must agree on it, or their learning rates would differ)."""
        shares = [step / total_steps]
        if self.max_steps:
            shares.append(step / self.max_steps)
        if self.max_seconds:
            shares.append((self.elapsed() if elapsed is None else elapsed) / self.max_seconds)
        return min(1.0, max(shares))

    def exhausted(self, step: int) -> str | None:
        if self.max_steps and step >= self.max_steps:
            return f"train.max_steps={self.max_steps} reached"
        if self.max_seconds and self.elapsed() >= self.max_seconds:
            return f"time budget of {self.max_seconds / 60:g} min reached"
        return None



class TrainingInterrupted(NmtError):
    """Ctrl-C or SIGTERM: a checkpoint was saved; the message says how to resume."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + signum


class _StopSignals:
    """While active, SIGINT and SIGTERM only set a flag: the loop saves at the next step boundary."""

    def __init__(self) -> None:
        self.received: int | None = None

    def __enter__(self) -> _StopSignals:
        self._previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: object) -> None:
        if self.received == signum:  # a second Ctrl-C while saving: give up at once
            raise KeyboardInterrupt
        if self.received is not None:  # torchrun's SIGTERM after the terminal's SIGINT: already saving
            return
        self.received = signum
        logger.warning("%s received: saving a checkpoint at the end of this step",
                       signal.Signals(signum).name)

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def _truncate_metrics(path: Path, step: int) -> None:
    """On resume, forget validation records written after the checkpoint we resume from."""
    if path.is_file():
        lines = [x for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        kept = [x for x in lines if json.loads(x)["step"] <= step]
        if len(kept) != len(lines):
            path.write_text("".join(x + "\n" for x in kept), encoding="utf-8")


class _LossWindow:
    """Mean loss and target tokens/s since the last log line, for the progress bar and the log."""

    def __init__(self) -> None:
        self.loss_sum, self.tokens, self.start = 0.0, 0, time.monotonic()

    def add(self, loss: float, tokens: int) -> None:
        self.loss_sum += loss * tokens
        self.tokens += tokens

    @property
    def mean(self) -> float:
        return self.loss_sum / max(self.tokens, 1)

    @property
    def tok_s(self) -> float:
        return self.tokens / max(time.monotonic() - self.start, 1e-9)


class Trainer:
    """The training loop and everything it must carry across an interruption."""

    def __init__(self, cfg: Config, out_dir: Path, data_path: str | None, quiet: bool,
                 resume: dict | None, world: distributed.World = distributed.SINGLE):
        self.cfg, self.out_dir, self.world = cfg, out_dir, world
        self.quiet = quiet or not world.is_main  # one progress bar, from rank 0
        seed_everything(cfg.train.seed)
        runtime.configure(cfg.train.threads)
        self.device = runtime.resolve_device(cfg.train.device, world.local_rank)
        precision = runtime.resolve_precision(cfg.train.precision, self.device)
        if precision != cfg.train.precision:
            cfg = self.cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision=precision))
        logger.info("device %s, precision %s, %d threads%s", self.device, precision, torch.get_num_threads(),
                    f" | {world.size} processes, global batch {world.size * cfg.train.batch_size}"
                    if world.distributed else "")

        corpus = resolve_corpus(data_path, cfg.data)
        splits = load_splits(corpus, cfg.data.num_pairs)
        logger.info("corpus %s: %s", corpus, splits.sizes())
        if resume is None:  # every rank builds the same vocabularies from the same data
            self.src_vocab = Vocab.build((p.src for p in splits.train), cfg.data.min_freq)
            self.tgt_vocab = Vocab.build((p.tgt for p in splits.train), cfg.data.min_freq)
            if world.is_main:
                self.src_vocab.save(out_dir / "src_vocab.txt")
                self.tgt_vocab.save(out_dir / "tgt_vocab.txt")
                (out_dir / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False),
                                                     encoding="utf-8")
        else:
            self.src_vocab, self.tgt_vocab = Vocab(resume["src_vocab"]), Vocab(resume["tgt_vocab"])

        self.train_examples = encode_pairs(splits.train, self.src_vocab, self.tgt_vocab, cfg.data.max_len)
        if not self.train_examples:
            raise NmtError(f"no training pair fits data.max_len={cfg.data.max_len}; raise it")
        logger.info("vocab: %d English, %d French types | %d training pairs within data.max_len=%d",
                    len(self.src_vocab), len(self.tgt_vocab), len(self.train_examples), cfg.data.max_len)
        val_sources, val_refs = group_references(splits.valid)
        # Every k-th source: the corpus is sorted by length, so the first n would be the shortest.
        every = max(1, math.ceil(len(val_sources) / cfg.train.val_bleu_sentences))
        self.validator = Validator(encode_pairs(splits.valid, self.src_vocab, self.tgt_vocab),
                                   val_sources[::every], val_refs[::every])

        self.model = build_model(cfg.model, self.src_vocab, self.tgt_vocab).to(self.device)
        # The module that trains: DDP all-reduces gradients during backward; validation,
        # decoding and checkpoints use the plain model (rank 0 only).
        self.trained = self.model
        if world.distributed:
            self.trained = torch.nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        logger.info("model: %s parameters on %s",
                    f"{sum(p.numel() for p in self.model.parameters()):,}", self.device)
        # The fused kernel updates all parameters in one pass instead of a dozen ops per tensor.
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.train.lr,
                                          fused=self.device.type in ("cpu", "cuda"))
        self.schedule = LRSchedule(cfg.train)
        global_batch = cfg.train.batch_size * world.size
        self.total_steps = cfg.train.epochs * math.ceil(len(self.train_examples) / global_batch)
        self.translator = Translator(self.model, self.src_vocab, self.tgt_vocab, cfg.decode, self.device)
        self.rng = random.Random(cfg.train.seed)  # drives the batch order, nothing else
        self.step, self.epoch, self.batch_in_epoch = 0, 1, 0
        self.epoch_rng = self.rng.getstate()  # the order of the current epoch is rebuilt from this
        self.best: dict = {}
        self.train_loss_sum, self.train_tokens = 0.0, 0  # since the last validation, for metrics.jsonl
        self.stale_validations = 0  # validations since the best one, for early stopping
        elapsed = 0.0
        if resume is not None:
            elapsed = self._restore(resume)
        self.budget = Budget(cfg.train.max_steps, cfg.train.max_minutes, elapsed)
        self.shared_elapsed = elapsed  # under DDP: the ranks' mean clock, agreed after each step

    def _progress(self) -> dict:
        return {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                "best": self.best, "elapsed_s": self.budget.elapsed(),
                "train_loss": [self.train_loss_sum, self.train_tokens], "stale": self.stale_validations,
                "lr_schedule": self.schedule.state_dict(),
                "rng": {"batches": self.epoch_rng, "torch": torch.get_rng_state()}}

    def _rank_rng_states(self) -> list[torch.Tensor]:
        """Each rank's torch RNG (dropout draws differ per rank), so a resume is exact under DDP too."""
        return distributed.gather(torch.get_rng_state(), self.world)

    def _restore(self, state: dict) -> float:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        progress = state["progress"]
        self.step, self.epoch = progress["step"], progress["epoch"]
        self.batch_in_epoch, self.best = progress["batch_in_epoch"], progress["best"]
        self.epoch_rng = progress["rng"]["batches"]
        self.train_loss_sum, self.train_tokens = progress["train_loss"]
        self.stale_validations = progress["stale"]
        self.schedule.load_state_dict(progress.get("lr_schedule", {"scale": 1.0, "stale": 0}))
        rank_states = progress["rng"].get("torch_ranks", [])
        if len(rank_states) == self.world.size:
            torch.set_rng_state(rank_states[self.world.rank])
        else:  # a different number of processes: the run continues, not bit for bit
            torch.set_rng_state(progress["rng"]["torch"])
            if rank_states:
                logger.warning("resuming %d-process training with %d processes: the batch order and "
                               "dropout draws differ from an uninterrupted run", len(rank_states), self.world.size)
        if self.world.is_main:
            _truncate_metrics(self.out_dir / "metrics.jsonl", self.step)
        logger.info("resuming at step %d (epoch %d, batch %d)", self.step, self.epoch, self.batch_in_epoch)
        return progress["elapsed_s"]

    def save(self) -> Path | None:
        """A checkpoint from rank 0 (all ranks must call it: it gathers their RNG states)."""
        progress = self._progress()
        progress["rng"]["torch_ranks"] = self._rank_rng_states()
        if not self.world.is_main:
            return None
        state = checkpoint_state(self.model, self.optimizer, self.cfg, self.src_vocab, self.tgt_vocab, progress)
        return save_rotating(self.out_dir, state, self.step, self.cfg.train.keep_last)

    def patience_exhausted(self) -> bool:
        patience = self.cfg.train.patience
        if patience and self.stale_validations >= patience:
            logger.info("early stopping: no better validation BLEU in %d validations (train.patience)", patience)
            return True
        return False

    def validate(self, reason: str, epoch: int | None = None) -> None:
        """Validation loss and BLEU, a line in metrics.jsonl, best.pt if it improved, and a checkpoint.

        `epoch` is the epoch the record belongs to (at an epoch end the position has already moved on).
        """
        epoch = self.epoch if epoch is None else epoch
        if not self.validator.examples:
            logger.warning("the valid split is empty; saving without validation")
            path = self.save()
            if path is not None:
                publish(path, self.out_dir / BEST)
            return
        result = None
        if self.world.is_main:  # once, not once per process; the others wait for the result
            vocab = self.tgt_vocab
            result = self.validator(self.model, self.translator, self.cfg.decode.batch_size,
                                    vocab.pad_id, vocab.bos_id, self.device)
        val_loss, scores = distributed.from_main(result, self.world)
        train_loss = self.train_loss_sum / max(self.train_tokens, 1)
        self.train_loss_sum, self.train_tokens = 0.0, 0
        record = {"step": self.step, "epoch": epoch, "train_loss": round(train_loss, 4), "val_loss": round(val_loss, 4),
                  "val_ppl": round(math.exp(min(val_loss, 50)), 2), "val_bleu": round(scores.bleu, 2),
                  "val_chrf": round(scores.chrf, 2), "elapsed_s": round(self.budget.elapsed(), 1),
                  "lr": self.optimizer.param_groups[0]["lr"], "peak_rss_mb": round(runtime.peak_rss_mb()), "at": reason}
        if self.world.is_main:
            with open(self.out_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        # Compared as recorded (BLEU to 0.01, loss to 1e-4): float noise is not an improvement.
        improved = not self.best or (record["val_bleu"], -record["val_loss"]) > (self.best["val_bleu"], -self.best["val_loss"])
        if improved:
            self.best = record
        self.stale_validations = 0 if improved else self.stale_validations + 1
        self.schedule.on_validation(improved)
        path = self.save()
        if improved and path is not None:
            publish(path, self.out_dir / BEST)
        logger.info("validation at step %d (epoch %d): loss %.3f | ppl %.1f | BLEU %.2f | chrF %.2f%s",
                    self.step, epoch, val_loss, record["val_ppl"], scores.bleu, scores.chrf,
                    " | new best" if improved else "")

    def run(self) -> dict:
        spent = self.budget.exhausted(self.step)
        if spent:
            logger.warning("nothing to train: %s; raise it (--set train.max_steps=N or --max-minutes M) "
                           "to continue", spent)
            return self._finish()
        self.window = _LossWindow()  # spans epoch boundaries: it is reset by log lines only
        self.model.train()
        with _StopSignals() as signals:
            while self.epoch <= self.cfg.train.epochs:
                if self._train_epoch(signals):
                    return self._finish()
                self.epoch += 1
                self.batch_in_epoch = 0
                self.epoch_rng = self.rng.getstate()
                self.validate("epoch end", epoch=self.epoch - 1)
                if self.patience_exhausted():
                    break
        return self._finish()

    def _train_epoch(self, signals: _StopSignals) -> bool:
        """Train the rest of the current epoch; True when training must stop before its end."""
        cfg = self.cfg.train
        self.rng.setstate(self.epoch_rng)  # rebuilds this epoch's order, also after a resume
        order = distributed.epoch_shard(self.train_examples, cfg.batch_size, self.rng, self.world)
        with tqdm(total=len(order), initial=self.batch_in_epoch, desc=f"epoch {self.epoch}/{cfg.epochs}",
                  disable=self.quiet, unit="batch", dynamic_ncols=True, leave=False) as bar:
            for indices in order[self.batch_in_epoch:]:
                self._train_batch(indices)
                bar.update()
                bar.set_postfix(loss=f"{self.window.mean:.3f}", tok_s=f"{self.window.tok_s:,.0f}", refresh=False)
                if self.step % cfg.log_every == 0:
                    logger.info("step %d | loss %.3f | ppl %.1f | lr %.1e | %s tok/s", self.step, self.window.mean,
                                math.exp(min(self.window.mean, 50)), self.optimizer.param_groups[0]["lr"],
                                f"{self.window.tok_s:,.0f}")
                    self.window = _LossWindow()
                if self._should_stop(signals):
                    return True
        return False

    def _train_batch(self, indices: list[int]) -> None:
        pad_id = self.tgt_vocab.pad_id
        batch = collate([self.train_examples[i] for i in indices], pad_id, self.tgt_vocab.bos_id)
        elapsed = self.shared_elapsed if self.world.distributed else None
        lr = self.schedule.lr(self.step, self.budget.progress(self.step, self.total_steps, elapsed))
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss, tokens = train_step(self.trained, batch.to(self.device), self.optimizer, self.cfg, pad_id, self.world)
        if not math.isfinite(loss):
            raise NmtError(f"the loss became {loss} at step {self.step + 1}; the last good "
                           f"checkpoints are kept in {self.out_dir}; lower train.lr or "
                           f"train.clip_grad and resume or train again")
        self.step += 1
        self.batch_in_epoch += 1
        self.window.add(loss, tokens)  # all ranks' tokens: the log shows the job's throughput
        self.train_loss_sum += loss * tokens
        self.train_tokens += tokens

    def _should_stop(self, signals: _StopSignals) -> bool:
        """After a step: save and leave on a signal; validate on budget or eval_every; save on save_every."""
        cfg = self.cfg.train
        stop_reason = self.budget.exhausted(self.step)
        if self.world.distributed:  # every rank stops at the same step, or the others would hang
            signalled, out_of_budget, clocks = distributed.all_sum(
                [float(signals.received is not None), float(stop_reason is not None), self.budget.elapsed()],
                self.world, self.device)
            self.shared_elapsed = clocks / self.world.size
            if signalled and signals.received is None:
                signals.received = signal.SIGTERM
            if out_of_budget and not stop_reason:
                stop_reason = "another process reached the budget"
        if signals.received is not None:
            path = self.save()
            where = f"saved {path}" if path is not None else f"saved in {self.out_dir}"
            raise TrainingInterrupted(f"interrupted at step {self.step}; {where}. Resume with: "
                                      f"nmt train --resume {self.out_dir}", signals.received)
        if stop_reason:
            logger.info("%s: stopping after step %d", stop_reason, self.step)
            self.validate("budget")
            return True
        if cfg.eval_every and self.step % cfg.eval_every == 0:
            self.validate("eval_every")
            return self.patience_exhausted()
        if cfg.save_every and self.step % cfg.save_every == 0:
            self.save()
        return False

    def _finish(self) -> dict:
        if not self.world.is_main:
            return self.best
        try:
            logger.info("training curves: %s", plot_curves(self.out_dir))
        except NmtError as e:  # matplotlib is optional; no validation yet means nothing to draw
            logger.info("no training curves: %s", e)
        logger.info("done: best validation BLEU %.2f at step %d; checkpoints in %s",
                    self.best.get("val_bleu", float("nan")), self.best.get("step", 0), self.out_dir)
        return self.best


def train(cfg: Config, out_dir: Path, data_path: str | None = None, quiet: bool = False,
          resume: dict | None = None, world: distributed.World = distributed.SINGLE) -> dict:
    """Train `cfg` into `out_dir` (or continue the checkpoint `resume`); returns the best validation record.
    Under torchrun, pass this process's `world` (`distributed.init`)."""
    return Trainer(cfg, out_dir, data_path, quiet, resume, world).run()
