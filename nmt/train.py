"""Training: teacher forcing, masked cross-entropy, Adam, clipping, validation, checkpoints."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import random
import signal
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import torch
import yaml
from tqdm import tqdm

from nmt import distributed, runtime
from nmt.checkpoint import BEST, RUNS_DIR, checkpoint_state, publish, save_rotating
from nmt.config import Config
from nmt.corpus import Splits, load_splits, resolve_corpus
from nmt.data import Batch, Example, collate, encode_pairs
from nmt.errors import NmtError
from nmt.loss import batch_loss, validation_loss
from nmt.metrics import References, Scores, group_references, score
from nmt.model import Seq2Seq, build_model
from nmt.schedule import LRSchedule
from nmt.stopping import Budget, StopSignals, TrainingInterrupted
from nmt.tokenizer import SubwordTokenizer, Tokenizer, WordTokenizer, load_tokenizer
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


def train_step(model: torch.nn.Module, batch: Batch, optimizer: torch.optim.Optimizer, cfg: Config,
               pad_id: int, world: distributed.World = distributed.SINGLE) -> tuple[torch.Tensor | float, int]:
    """One update; returns the mean loss per target token and the target tokens, over all ranks.

    The loss stays a tensor on the device (float64, as exact as Python's floats): reading it
    here would make the host wait for the GPU every step. The loss is normalised by the global
    token count, so N processes compute the gradient a single process would over the union of
    their batches (DDP averages, hence the x world).
    """
    loss_sum = batch_loss(model, batch, pad_id, cfg.train.precision, cfg.train.label_smoothing)
    if world.distributed:
        total_loss, total_tokens = distributed.all_sum([loss_sum.item(), batch.num_tokens], world, batch.src.device)
        loss: torch.Tensor | float = total_loss / total_tokens
    else:
        total_tokens = batch.num_tokens
        loss = loss_sum.detach().double() / total_tokens
    optimizer.zero_grad(set_to_none=True)
    (loss_sum * (world.size / total_tokens)).backward()
    if cfg.train.clip_grad > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip_grad)
    optimizer.step()
    return loss, int(total_tokens)


@dataclass
class Validator:
    """Validation loss on the whole valid split, greedy BLEU on a fixed subset of its sources:
    legacy (lowercased, tokenized; what best.pt is chosen by, as in earlier runs) and standard."""
    examples: list[Example]
    references: References

    def __call__(self, model: Seq2Seq, translator: Translator, batch_size: int, pad_id: int, bos_id: int,
                 device: torch.device) -> tuple[float, Scores, Scores]:
        model.eval()
        loss = validation_loss(model, self.examples, batch_size, pad_id, bos_id, device)
        outputs = translator.translate_tokens(translator.tokenizer.source_tokens(self.references.sources))
        model.train()
        tokenizer = translator.tokenizer
        legacy = score([tokenizer.legacy_text(t) for t in outputs], self.references.legacy_references, tokenized=True)
        standard = score([tokenizer.target_text(t) for t in outputs], self.references.references)
        return loss, legacy, standard


def _truncate_metrics(path: Path, step: int) -> None:
    """On resume, forget validation records written after the checkpoint we resume from."""
    if path.is_file():
        lines = [x for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        kept = [x for x in lines if json.loads(x)["step"] <= step]
        if len(kept) != len(lines):
            path.write_text("".join(x + "\n" for x in kept), encoding="utf-8")


class _LossWindow:
    """Mean loss and target tokens/s since the last log line. Losses are summed on the device
    and read only when the log asks, so no step waits for the GPU."""

    def __init__(self) -> None:
        self.loss_sum: torch.Tensor | float = 0.0
        self.tokens, self.start = 0, time.monotonic()

    def add(self, loss: torch.Tensor | float, tokens: int) -> None:
        self.loss_sum = self.loss_sum + loss * tokens
        self.tokens += tokens

    @property
    def mean(self) -> float:
        return float(self.loss_sum) / max(self.tokens, 1)

    @property
    def tok_s(self) -> float:
        return self.tokens / max(time.monotonic() - self.start, 1e-9)


class Trainer:
    """The training loop (`run`) and everything it must carry across an interruption."""

    def __init__(self, cfg: Config, out_dir: Path, data_path: str | None, quiet: bool,
                 resume: dict | None, world: distributed.World = distributed.SINGLE):
        self.out_dir, self.world = out_dir, world
        self.quiet = quiet or not world.is_main  # one progress bar, from rank 0
        seed_everything(cfg.train.seed)
        runtime.configure(cfg.train.threads)
        self.device = runtime.resolve_device(cfg.train.device, world.local_rank)
        precision = runtime.resolve_precision(cfg.train.precision, self.device)
        logger.info("device %s, %s, %d threads", self.device,
                    runtime.describe_precision(cfg.train.precision, self.device), torch.get_num_threads())
        self.cfg = cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision=precision))
        self._load_data(data_path, resume)
        self._build_model()
        self.rng = random.Random(cfg.train.seed)  # drives the batch order, nothing else
        self.step, self.epoch, self.batch_in_epoch = 0, 1, 0
        self.epoch_rng = self.rng.getstate()  # the order of the current epoch is rebuilt from this
        self.best: dict = {}
        self.train_loss_sum: torch.Tensor | float = 0.0  # since the last validation, for metrics.jsonl
        self.train_tokens = 0
        self.unchecked_losses: list[tuple[int, torch.Tensor | float]] = []  # (step, loss) not yet read
        self.stale_validations = 0  # validations since the best one, for early stopping
        elapsed = self._restore(resume) if resume is not None else 0.0
        self.budget = Budget(cfg.train.max_steps, cfg.train.max_minutes, elapsed)
        self.shared_elapsed = elapsed  # under DDP: the ranks' mean clock, agreed after each step

    def _load_data(self, data_path: str | None, resume: dict | None) -> None:
        """The corpus, the vocabularies (built, or from the checkpoint we resume) and the encoded splits."""
        cfg = self.cfg
        corpus = resolve_corpus(data_path, cfg.data)
        splits = load_splits(corpus, cfg.data.num_pairs)
        logger.info("corpus %s: %s", corpus, splits.sizes())
        if resume is None:
            self.tokenizer, self.src_vocab, self.tgt_vocab = self._build_vocabularies(splits)
            if self.world.is_main:
                self.tokenizer.save(self.out_dir)
                self.src_vocab.save(self.out_dir / "src_vocab.txt")
                self.tgt_vocab.save(self.out_dir / "tgt_vocab.txt")
                (self.out_dir / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False),
                                                          encoding="utf-8")
        else:
            self.src_vocab, self.tgt_vocab = Vocab(resume["src_vocab"]), Vocab(resume["tgt_vocab"])
            self.tokenizer = load_tokenizer(cfg.data.tokenizer, self.out_dir, self.src_vocab, self.tgt_vocab)
        self.train_examples = encode_pairs(splits.train, self.src_vocab, self.tgt_vocab, cfg.data.max_len,
                                           self.tokenizer)
        if not self.train_examples:
            raise NmtError(f"no training pair fits data.max_len={cfg.data.max_len}; raise it")
        logger.info("vocab (%s): %d English, %d French types | %d training pairs within data.max_len=%d",
                    cfg.data.tokenizer, len(self.src_vocab), len(self.tgt_vocab), len(self.train_examples),
                    cfg.data.max_len)
        references = group_references(splits.valid)
        # Every k-th source: the corpus is sorted by length, so the first n would be the shortest.
        every = max(1, math.ceil(len(references.sources) / cfg.train.val_bleu_sentences))
        self.validator = Validator(encode_pairs(splits.valid, self.src_vocab, self.tgt_vocab, tokenizer=self.tokenizer),
                                   references.subset([i % every == 0 for i in range(len(references.sources))]))

    def _build_vocabularies(self, splits: Splits) -> tuple[Tokenizer, Vocab, Vocab]:
        """From the training split alone. Word vocabularies: every rank counts the same data.
        Subword models: rank 0 learns them and hands the others the bytes."""
        data = self.cfg.data
        if data.tokenizer == "word":
            return (WordTokenizer(), Vocab.build((p.src for p in splits.train), data.min_freq),
                    Vocab.build((p.tgt for p in splits.train), data.min_freq))
        models = None
        if self.world.is_main:
            start = time.monotonic()
            tokenizer = SubwordTokenizer.train([p.raw[0] for p in splits.train], [p.raw[1] for p in splits.train],
                                               data.vocab_size, data.subword_type, data.joint_vocab)
            logger.info("subword model%s (SentencePiece %s, %d pieces%s) learned in %.1f s",
                        "" if data.joint_vocab else "s", data.subword_type, data.vocab_size,
                        ", both languages" if data.joint_vocab else " a side", time.monotonic() - start)
            models = tokenizer.models
        tokenizer = SubwordTokenizer(*distributed.from_main(models, self.world))
        return (tokenizer, *tokenizer.vocabularies())

    def _build_model(self) -> None:
        cfg, world = self.cfg, self.world
        self.model = build_model(cfg.model, self.src_vocab, self.tgt_vocab).to(self.device)
        # The module that trains: DDP all-reduces gradients during backward; validation,
        # decoding and checkpoints use the plain model (rank 0 only).
        self.trained = self.model
        if world.distributed:
            self.trained = torch.nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        # The fused kernel updates all parameters in one pass instead of a dozen ops per tensor.
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.train.lr,
                                          fused=self.device.type in ("cpu", "cuda"))
        self.schedule = LRSchedule(cfg.train)
        batches_per_epoch = len(distributed.epoch_shard(self.train_examples, cfg.train.batch_size, None, world,
                                                        cfg.train.batch_tokens))
        self.total_steps = cfg.train.epochs * batches_per_epoch
        self.translator = Translator(self.model, self.src_vocab, self.tgt_vocab, cfg.decode, self.device,
                                     self.tokenizer)
        size, unit = ((cfg.train.batch_tokens, "padded target tokens") if cfg.train.batch_tokens
                      else (cfg.train.batch_size, "sentences"))
        logger.info("model: %s parameters on %s | batches of %s %s%s, %d an epoch",
                    f"{sum(p.numel() for p in self.model.parameters()):,}", self.device, f"{size:,}", unit,
                    f" | {world.size} process{'es' if world.size > 1 else ''}, global batch {world.size * size:,}"
                    if world.distributed else "",
                    batches_per_epoch)

    # The loop -------------------------------------------------------------------------------

    def run(self) -> dict:
        """Train until the epochs, the budget, early stopping or a signal end it; returns the best
        validation record. Per step: one update, a log line every log_every steps, and the checks
        of `_should_stop`. Per epoch: a validation (which saves a checkpoint)."""
        cfg = self.cfg.train
        spent = self.budget.exhausted(self.step)
        if spent:
            logger.warning("nothing to train: %s; raise it (--set train.max_steps=N or --max-minutes M) "
                           "to continue", spent)
            return self._finish()
        self.window = _LossWindow()  # spans epoch boundaries: it is reset by log lines only
        self.model.train()
        with StopSignals() as signals:
            while self.epoch <= cfg.epochs:
                batches = self._epoch_batches()
                epoch_start, first_step = time.monotonic(), self.step
                with self._progress_bar(len(batches)) as bar:
                    for indices in batches[self.batch_in_epoch:]:
                        self._train_batch(indices)
                        bar.update()
                        if self.step % cfg.log_every == 0:
                            self._log(bar)
                        if self._should_stop(signals):
                            return self._finish()
                self._log_epoch_time(epoch_start, first_step)
                self._next_epoch()
                self.validate("epoch end", epoch=self.epoch - 1)
                if self.patience_exhausted():
                    break
        return self._finish()

    # What happens at each step ----------------------------------------------------------------

    def _epoch_batches(self) -> list[list[int]]:
        """This epoch's batches (this rank's shard), rebuilt from the epoch's RNG state, so a
        resumed run sees the same order and continues at `batch_in_epoch`."""
        self.rng.setstate(self.epoch_rng)
        return distributed.epoch_shard(self.train_examples, self.cfg.train.batch_size, self.rng, self.world,
                                       self.cfg.train.batch_tokens)

    def _progress_bar(self, batches: int) -> tqdm:
        return tqdm(total=batches, initial=self.batch_in_epoch, desc=f"epoch {self.epoch}/{self.cfg.train.epochs}",
                    disable=self.quiet, unit="batch", dynamic_ncols=True, leave=False)

    def _train_batch(self, indices: list[int]) -> None:
        """One update on the examples at `indices`, at the learning rate the schedule gives now."""
        pad_id = self.tgt_vocab.pad_id
        batch = collate([self.train_examples[i] for i in indices], pad_id, self.tgt_vocab.bos_id)
        elapsed = self.shared_elapsed if self.world.distributed else None
        lr = self.schedule.lr(self.step, self.budget.progress(self.step, self.total_steps, elapsed))
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss, tokens = train_step(self.trained, batch.to(self.device), self.optimizer, self.cfg, pad_id, self.world)
        self.step += 1
        self.batch_in_epoch += 1
        self.unchecked_losses.append((self.step, loss))
        self.window.add(loss, tokens)  # all ranks' tokens: the log shows the job's throughput
        self.train_loss_sum = self.train_loss_sum + loss * tokens
        self.train_tokens += tokens

    def _check_losses(self) -> None:
        """Raise if a loss since the last check is not finite. Run before every log line and save
        (one wait for the GPU per check, not per step), so no checkpoint holds a diverged model."""
        if not self.unchecked_losses:
            return
        steps, losses = zip(*self.unchecked_losses)
        self.unchecked_losses = []
        values = torch.stack([torch.as_tensor(x, device=self.device, dtype=torch.float64) for x in losses]).tolist()
        for step, value in zip(steps, values):
            if not math.isfinite(value):
                raise NmtError(f"the loss became {value} at step {step}; the last good "
                               f"checkpoints are kept in {self.out_dir}; lower train.lr or "
                               f"train.clip_grad and resume or train again")

    def _log(self, bar: tqdm) -> None:
        self._check_losses()
        mean, tok_s, lr = self.window.mean, self.window.tok_s, self.optimizer.param_groups[0]["lr"]
        bar.set_postfix(loss=f"{mean:.3f}", tok_s=f"{tok_s:,.0f}", refresh=False)
        logger.info("step %d | loss %.3f | ppl %.1f | lr %.1e | %s tok/s", self.step, mean,
                    math.exp(min(mean, 50)), lr, f"{tok_s:,.0f}")
        self.window = _LossWindow()

    def _should_stop(self, signals: StopSignals) -> bool:
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

    def _log_epoch_time(self, start: float, first_step: int) -> None:
        """The epoch's training time (validation excluded), once the GPU has done its work."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.monotonic() - start
        logger.info("epoch %d: %d steps in %.1f s of training", self.epoch, self.step - first_step, seconds)

    def _next_epoch(self) -> None:
        self.epoch += 1
        self.batch_in_epoch = 0
        self.epoch_rng = self.rng.getstate()

    # Validation and checkpoints -----------------------------------------------------------------

    def validate(self, reason: str, epoch: int | None = None) -> None:
        """Validation loss and BLEU, a line in metrics.jsonl, best.pt if it improved, and a checkpoint.

        `epoch` is the epoch the record belongs to (at an epoch end the position has already moved on).
        """
        epoch = self.epoch if epoch is None else epoch
        self._check_losses()
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
        val_loss, scores, standard = distributed.from_main(result, self.world)
        train_loss = float(self.train_loss_sum) / max(self.train_tokens, 1)
        self.train_loss_sum, self.train_tokens = 0.0, 0
        record = {"step": self.step, "epoch": epoch, "train_loss": round(train_loss, 4), "val_loss": round(val_loss, 4),
                  "val_ppl": round(math.exp(min(val_loss, 50)), 2), "val_bleu": round(scores.bleu, 2),
                  "val_chrf": round(scores.chrf, 2), "val_sacrebleu": round(standard.bleu, 2),
                  "elapsed_s": round(self.budget.elapsed(), 1),
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
        logger.info("validation at step %d (epoch %d): loss %.3f | ppl %.1f | BLEU %.2f | chrF %.2f "
                    "(lowercased, tokenized) | sacreBLEU %.2f%s",
                    self.step, epoch, val_loss, record["val_ppl"], scores.bleu, scores.chrf, standard.bleu,
                    " | new best" if improved else "")

    def patience_exhausted(self) -> bool:
        patience = self.cfg.train.patience
        if patience and self.stale_validations >= patience:
            logger.info("early stopping: no better validation BLEU in %d validations (train.patience)", patience)
            return True
        return False

    def save(self) -> Path | None:
        """A checkpoint from rank 0 (all ranks must call it: it gathers their RNG states)."""
        self._check_losses()
        progress = self._progress()
        progress["rng"]["torch_ranks"] = distributed.gather(torch.get_rng_state(), self.world)
        if not self.world.is_main:
            return None
        state = checkpoint_state(self.model, self.optimizer, self.cfg, self.src_vocab, self.tgt_vocab, progress)
        return save_rotating(self.out_dir, state, self.step, self.cfg.train.keep_last)

    def _progress(self) -> dict:
        return {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                "best": self.best, "elapsed_s": self.budget.elapsed(),
                "train_loss": [float(self.train_loss_sum), self.train_tokens], "stale": self.stale_validations,
                "lr_schedule": self.schedule.state_dict(),
                "rng": {"batches": self.epoch_rng, "torch": torch.get_rng_state()}}

    def _restore(self, state: dict) -> float:
        """Continue from a checkpoint: weights, optimizer, position, RNG states; returns the time spent."""
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
