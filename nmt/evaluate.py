"""`nmt eval`: a checkpoint's loss, and its BLEU and chrF on a split.

The data flows one way: config and checkpoint -> corpus and data -> loss and search -> scores.
Nothing here imports training.
"""

from __future__ import annotations

import math
import time

from nmt.checkpoint import load_model
from nmt.corpus import load_splits, resolve_corpus
from nmt.data import encode_pairs
from nmt.errors import DataError
from nmt.loss import validation_loss
from nmt.metrics import group_references, score
from nmt.runtime import resolve_device
from nmt.translator import Translator


def evaluate_checkpoint(checkpoint: str | None, split: str, bleu: bool, device_name: str,
                        data_path: str | None, beam_size: int | None = None) -> list[str]:
    """Score a checkpoint on a split; returns the result lines and writes the hypotheses
    beside the checkpoint (`hyps.<split>.txt`, one per unique source sentence)."""
    device = resolve_device(device_name)
    loaded = load_model(checkpoint, device)
    splits = load_splits(resolve_corpus(data_path, loaded.cfg.data), loaded.cfg.data.num_pairs)
    pairs = getattr(splits, split)
    if not pairs:
        raise DataError(f"the {split} split is empty")
    vocab = loaded.tgt_vocab
    examples = encode_pairs(pairs, loaded.src_vocab, vocab)
    loss = validation_loss(loaded.model, examples, loaded.cfg.decode.batch_size, vocab.pad_id,
                           vocab.bos_id, device)
    sources, refs = group_references(pairs)
    lines = [f"checkpoint {loaded.path} | {split}: {len(sources):,} sources, {len(pairs):,} pairs",
             f"loss {loss:.3f} | ppl {math.exp(min(loss, 50)):.2f}"]
    if bleu:
        beam_size = beam_size or loaded.cfg.decode.beam_size
        start = time.perf_counter()
        hyps = [" ".join(t) for t in Translator.from_loaded(loaded, device).translate_tokens(sources, beam_size)]
        seconds = time.perf_counter() - start
        search = "greedy" if beam_size == 1 else f"beam {beam_size}"
        hyp_path = loaded.path.parent / f"hyps.{split}.{search.replace(' ', '')}.txt"
        hyp_path.write_text("\n".join(hyps) + "\n", encoding="utf-8")
        lines += [f"{search}: {score(hyps, refs).line()}",
                  f"decoded {len(sources):,} sentences in {seconds:.1f} s ({len(sources) / seconds:,.1f} sent/s); "
                  f"hypotheses written to {hyp_path}"]
    return lines
