"""Training: teacher forcing, masked cross-entropy, Adam, clipping, validation, checkpoints."""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import torch
import torch.nn.functional as F
import yaml
from tqdm import tqdm

from nmt import runtime
from nmt.checkpoint import BEST, LAST, RUNS_DIR, save_checkpoint
from nmt.config import Config
from nmt.corpus import load_splits, resolve_corpus
from nmt.data import Batch, Example, encode_pairs, iterate_batches
from nmt.errors import NmtError
from nmt.evaluate import Scores, group_references, score
from nmt.model import Seq2Seq, build_model
from nmt.translator import Translator
from nmt.vocab import Vocab

logger = logging.getLogger(__name__)


def resolve_device(name: str) -> torch.device:
    """'auto' takes CUDA when present; 'cuda' without a usable GPU is an error, not a silent CPU run."""
    if name == "cuda" and not torch.cuda.is_available():
        raise NmtError(f"--device cuda: no CUDA device is available to this torch build "
                       f"({torch.__version__}); use --device cpu or --device auto")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


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
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


def batch_loss(model: Seq2Seq, batch: Batch, pad_id: int, precision: str = "fp32",
               label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over the batch's non-pad target tokens (divide by num_tokens for the mean)."""
    mask = batch.tgt_out != pad_id  # (batch, tgt_len); logits are computed for these positions only
    with autocast(batch.src.device, precision):
        logits = model(batch.src, batch.src_lens, batch.tgt_in, mask)  # (num_tokens, vocab)
    return F.cross_entropy(logits.float(), batch.tgt_out[mask], reduction="sum",
                           label_smoothing=label_smoothing)


def train_step(model: Seq2Seq, batch: Batch, optimizer: torch.optim.Optimizer, cfg: Config,
               pad_id: int) -> float:
    """One update; returns the batch's mean loss per target token."""
    loss = batch_loss(model, batch, pad_id, cfg.train.precision, cfg.train.label_smoothing) / batch.num_tokens
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.train.clip_grad > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip_grad)
    optimizer.step()
    return loss.item()


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

    def __init__(self, max_steps: int, max_minutes: float):
        self.max_steps, self.max_seconds = max_steps, max_minutes * 60
        self.start = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def exhausted(self, step: int) -> str | None:
        if self.max_steps and step >= self.max_steps:
            return f"train.max_steps={self.max_steps} reached"
        if self.max_seconds and self.elapsed() >= self.max_seconds:
            return f"time budget of {self.max_seconds / 60:g} min reached"
        return None


def train(cfg: Config, out_dir: Path, data_path: str | None = None, quiet: bool = False) -> dict:
    """Train `cfg` into `out_dir`; returns the best validation record."""
    seed_everything(cfg.train.seed)
    runtime.configure(cfg.train.threads)
    device = resolve_device(cfg.train.device)

    corpus = resolve_corpus(data_path, cfg.data)
    splits = load_splits(corpus, cfg.data.num_pairs)
    logger.info("corpus %s: %s", corpus, splits.sizes())
    src_vocab = Vocab.build((p.src for p in splits.train), cfg.data.min_freq)
    tgt_vocab = Vocab.build((p.tgt for p in splits.train), cfg.data.min_freq)
    src_vocab.save(out_dir / "src_vocab.txt")
    tgt_vocab.save(out_dir / "tgt_vocab.txt")
    (out_dir / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False), encoding="utf-8")

    train_examples = encode_pairs(splits.train, src_vocab, tgt_vocab, cfg.data.max_len)
    if not train_examples:
        raise NmtError(f"no training pair fits data.max_len={cfg.data.max_len}; raise it")
    logger.info("vocab: %d English, %d French types | %d training pairs within data.max_len=%d",
                len(src_vocab), len(tgt_vocab), len(train_examples), cfg.data.max_len)
    val_sources, val_refs = group_references(splits.valid)
    validator = Validator(encode_pairs(splits.valid, src_vocab, tgt_vocab),
                          val_sources[: cfg.train.val_bleu_sentences], val_refs[: cfg.train.val_bleu_sentences])

    model = build_model(cfg.model, src_vocab, tgt_vocab).to(device)
    logger.info("model: %s parameters on %s", f"{sum(p.numel() for p in model.parameters()):,}", device)
    # The fused kernel updates all parameters in one pass instead of a dozen ops per tensor.
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr, fused=device.type in ("cpu", "cuda"))
    translator = Translator(model, src_vocab, tgt_vocab, cfg.decode, device)
    pad_id, bos_id = tgt_vocab.pad_id, tgt_vocab.bos_id
    rng = random.Random(cfg.train.seed)
    budget = Budget(cfg.train.max_steps, cfg.train.max_minutes)
    best: dict = {}
    step, window_loss, window_tokens, window_start = 0, 0.0, 0, time.monotonic()

    def validate(epoch: int, reason: str) -> None:
        nonlocal best
        if not validator.examples:
            logger.warning("the valid split is empty; saving without validation")
            save_checkpoint(out_dir / BEST, model, optimizer, cfg, src_vocab, tgt_vocab, {"step": step})
            return
        val_loss, scores = validator(model, translator, cfg.decode.batch_size, pad_id, bos_id, device)
        record = {"step": step, "epoch": epoch, "val_loss": round(val_loss, 4),
                  "val_ppl": round(math.exp(min(val_loss, 50)), 2), "val_bleu": round(scores.bleu, 2),
                  "val_chrf": round(scores.chrf, 2), "elapsed_s": round(budget.elapsed(), 1), "at": reason}
        with open(out_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        improved = not best or (scores.bleu, -val_loss) > (best["val_bleu"], -best["val_loss"])
        progress = {"step": step, "epoch": epoch, "best": record if improved else best}
        save_checkpoint(out_dir / LAST, model, optimizer, cfg, src_vocab, tgt_vocab, progress)
        if improved:
            best = record
            save_checkpoint(out_dir / BEST, model, optimizer, cfg, src_vocab, tgt_vocab, progress)
        logger.info("validation at step %d (epoch %d): loss %.3f | ppl %.1f | BLEU %.2f | chrF %.2f%s",
                    step, epoch, val_loss, record["val_ppl"], scores.bleu, scores.chrf,
                    " | new best" if improved else "")

    model.train()
    stop_reason = None
    for epoch in range(1, cfg.train.epochs + 1):
        batches = iterate_batches(train_examples, cfg.train.batch_size, pad_id, bos_id, rng)
        num_batches = math.ceil(len(train_examples) / cfg.train.batch_size)
        with tqdm(batches, total=num_batches, desc=f"epoch {epoch}/{cfg.train.epochs}",
                  disable=quiet, unit="batch", dynamic_ncols=True, leave=False) as bar:
            for batch in bar:
                loss = train_step(model, batch.to(device), optimizer, cfg, pad_id)
                if not math.isfinite(loss):
                    raise NmtError(f"the loss became {loss} at step {step + 1}; lower train.lr or "
                                   f"train.clip_grad and train again (best.pt so far is kept)")
                step += 1
                window_loss += loss * batch.num_tokens
                window_tokens += batch.num_tokens
                tok_s = window_tokens / max(time.monotonic() - window_start, 1e-9)
                bar.set_postfix(loss=f"{window_loss / window_tokens:.3f}", tok_s=f"{tok_s:,.0f}", refresh=False)
                if step % cfg.train.log_every == 0:
                    logger.info("step %d | loss %.3f | ppl %.1f | lr %.1e | %s tok/s", step,
                                window_loss / window_tokens, math.exp(min(window_loss / window_tokens, 50)),
                                optimizer.param_groups[0]["lr"], f"{tok_s:,.0f}")
                    window_loss, window_tokens, window_start = 0.0, 0, time.monotonic()
                stop_reason = budget.exhausted(step)
                if stop_reason:
                    break
                if cfg.train.eval_every and step % cfg.train.eval_every == 0:
                    validate(epoch, "eval_every")
        if stop_reason:
            logger.info("%s: stopping after step %d", stop_reason, step)
            validate(epoch, "budget")
            break
        validate(epoch, "epoch end")
    logger.info("done: best validation BLEU %.2f at step %d; checkpoints in %s",
                best.get("val_bleu", float("nan")), best.get("step", 0), out_dir)
    return best
