"""`nmt eval`: a checkpoint's loss, and its BLEU and chrF on a split.

The data flows one way: config and checkpoint -> corpus and data -> loss and search -> scores.
Nothing here imports training.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from nmt.checkpoint import load_model
from nmt.corpus import Pair, load_splits, resolve_corpus
from nmt.data import encode_pairs
from nmt.errors import DataError
from nmt.loss import validation_loss
from nmt.metrics import References, group_references, score
from nmt.runtime import resolve_device
from nmt.translator import Translator
from nmt.vocab import UNK, Vocab


def rare_word_sources(references: References, train: Sequence[Pair], min_freq: int) -> tuple[list[bool], int]:
    """Which sources hold a word outside the word-level training vocabulary (the words seen at
    least `min_freq` times in the training split, as the word tokenizer keeps them), and its size."""
    words = Vocab.build((p.src for p in train), min_freq)
    return [any(w not in words.stoi for w in src) for src in references.source_words], len(words)


def evaluate_checkpoint(checkpoint: str | None, split: str, bleu: bool, device_name: str,
                        data_path: str | None, beam_size: int | None = None) -> list[str]:
    """Score a checkpoint on a split; returns the result lines and writes the hypotheses
    beside the checkpoint (`hyps.<split>.<search>.txt`, one per unique source sentence)."""
    device = resolve_device(device_name)
    loaded = load_model(checkpoint, device)
    splits = load_splits(resolve_corpus(data_path, loaded.cfg.data), loaded.cfg.data.num_pairs)
    pairs = getattr(splits, split)
    if not pairs:
        raise DataError(f"the {split} split is empty")
    vocab, tokenizer = loaded.tgt_vocab, loaded.tokenizer
    examples = encode_pairs(pairs, loaded.src_vocab, vocab, tokenizer=tokenizer)
    loss = validation_loss(loaded.model, examples, loaded.cfg.decode.batch_size, vocab.pad_id,
                           vocab.bos_id, device)
    refs = group_references(pairs)
    lines = [f"checkpoint {loaded.path} ({tokenizer.kind} tokenizer) | {split}: {len(refs.sources):,} sources, "
             f"{len(pairs):,} pairs",
             f"loss {loss:.3f} | ppl {math.exp(min(loss, 50)):.2f} (per {tokenizer.kind} token)"]
    if not bleu:
        return lines
    beam_size = beam_size or loaded.cfg.decode.beam_size
    start = time.perf_counter()
    outputs = Translator.from_loaded(loaded, device).translate_tokens(tokenizer.source_tokens(refs.sources),
                                                                      beam_size)
    seconds = time.perf_counter() - start
    hyps = [tokenizer.target_text(t) for t in outputs]
    legacy = [tokenizer.legacy_text(t) for t in outputs]
    has_unk = [UNK in t for t in outputs]
    rare, words = rare_word_sources(refs, splits.train, loaded.cfg.data.min_freq)
    rare_refs = refs.subset(rare)
    search = "greedy" if beam_size == 1 else f"beam {beam_size}"
    hyp_path = loaded.path.parent / f"hyps.{split}.{search.replace(' ', '')}.txt"
    hyp_path.write_text("\n".join(hyps) + "\n", encoding="utf-8")
    lines += [f"{search}: {score(hyps, refs.references).line()}",
              f"{search}, lowercased and tokenized (legacy): "
              f"{score(legacy, refs.legacy_references, tokenized=True).line()}"]
    if rare_refs.sources:
        subset = score([h for h, keep in zip(hyps, rare) if keep], rare_refs.references)
        lines.append(f"rare-word subset ({len(rare_refs.sources):,} sources with a word outside the "
                     f"{words:,}-word training vocabulary): BLEU {subset.bleu:.2f} | chrF {subset.chrf:.2f}")
    subset_unk = sum(u for u, keep in zip(has_unk, rare) if keep)
    lines += [f"outputs with <unk>: {sum(has_unk):,} of {len(hyps):,} ({100 * sum(has_unk) / len(hyps):.1f}%); "
              f"rare-word subset: {subset_unk:,} of {len(rare_refs.sources):,}",
              f"decoded {len(refs.sources):,} sentences in {seconds:.1f} s ({len(refs.sources) / seconds:,.1f} sent/s); "
              f"hypotheses written to {hyp_path}"]
    return lines
