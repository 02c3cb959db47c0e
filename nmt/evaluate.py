"""`nmt eval`: a checkpoint's loss, and its BLEU and chrF on a split.

The data flows one way: config and checkpoint -> corpus and data -> `validation.validate` (the
routine training validates with) -> the extras only evaluation reports: the rare-word subset,
the shares of outputs with <unk> and of numbers copied, and the hypotheses file.
Nothing here imports training.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from nmt.checkpoint import load_model
from nmt.corpus import resolve_corpus
from nmt.data import encode_pairs
from nmt.errors import DataError
from nmt.loss import validation_loss
from nmt.metrics import References, group_references, score
from nmt.onnx_engine import engine_device
from nmt.prepare import ensure_prepared
from nmt.prepared import PreparedCorpus
from nmt.translator import Translator
from nmt.validation import search_name, validate
from nmt.vocab import UNK, Vocab

_NUMBER = re.compile(r"\d+")


def rare_word_sources(references: References, words: Vocab) -> list[bool]:
    """Which sources hold a word outside `words` (`training_words`)."""
    return [any(w not in words.stoi for w in src) for src in references.source_words]


def numbers_copied(source: str, output: str) -> bool:
    """Whether every run of digits in `source` comes out unchanged in `output` (as often as it occurs):
    3 -> 3, 1987 -> 1987, 10:30 -> 10 h 30; not 1987 -> 1978, nor 3 -> trois."""
    return not Counter(_NUMBER.findall(source)) - Counter(_NUMBER.findall(output))


def evaluate_checkpoint(checkpoint: str | None, split: str, bleu: bool, device_name: str,
                        data_path: str | None, beam_size: int | None = None, engine: str = "torch") -> list[str]:
    """Score a checkpoint on a split; returns the result lines and writes the hypotheses
    beside the checkpoint (`hyps.<split>.<search>.txt`, one per unique source sentence)."""
    device = engine_device(engine, device_name)
    loaded = load_model(checkpoint, device)
    translator, tokenizer = Translator.from_loaded(loaded, device, engine=engine), loaded.tokenizer
    data = loaded.cfg.data
    prepared = PreparedCorpus(ensure_prepared(resolve_corpus(data_path, data), data), data)
    pairs = prepared.pairs(split)
    if not pairs:
        raise DataError(f"the {split} split is empty")
    examples = encode_pairs(pairs, loaded.src_vocab, loaded.tgt_vocab, tokenizer=tokenizer)
    refs = group_references(pairs)
    head = (f"checkpoint {loaded.path} ({tokenizer.kind} tokenizer, {tokenizer.source_lang} -> "
            f"{tokenizer.target_lang}) | {split}: {len(refs.sources):,} sources, {len(pairs):,} pairs"
            + ("" if engine == "torch" else f" | decoded with --engine {engine}"))
    if not bleu:
        vocab = loaded.tgt_vocab
        loss = validation_loss(loaded.model, examples, loaded.cfg.decode.batch_size, vocab.pad_id, vocab.bos_id, device)
        return [head, f"loss {loss:.3f} | ppl {math.exp(min(loss, 50)):.2f} (per {tokenizer.kind} token)"]
    beam_size = beam_size or loaded.cfg.decode.beam_size
    result = validate(translator, examples, refs, beam_size, loss_model=loaded.model)
    hyps = [t.text for t in result.translations]
    search = search_name(beam_size)
    hyp_path = loaded.path.parent / f"hyps.{split}.{search.replace(' ', '')}.txt"
    hyp_path.write_text("\n".join(hyps) + "\n", encoding="utf-8")
    lines = [head, f"loss {result.loss:.3f} | ppl {math.exp(min(result.loss, 50)):.2f} (per {tokenizer.kind} token)",
             f"{search}: {result.standard.line()}",
             f"{search}, lowercased and tokenized (legacy): {result.legacy.line()}"]
    words = prepared.training_words(data.min_freq)
    rare = rare_word_sources(refs, words)
    rare_refs = refs.subset(rare)
    if rare_refs.sources:
        subset = score([h for h, keep in zip(hyps, rare) if keep], rare_refs.references,
                       target_lang=tokenizer.target_lang)
        lines.append(f"rare-word subset ({len(rare_refs.sources):,} sources with a word outside the "
                     f"{len(words):,}-word training vocabulary): BLEU {subset.bleu:.2f} | chrF {subset.chrf:.2f}")
    has_unk = [UNK in t.tokens for t in result.translations]
    subset_unk = sum(u for u, keep in zip(has_unk, rare) if keep)
    lines.append(f"outputs with <unk>: {sum(has_unk):,} of {len(hyps):,} ({100 * sum(has_unk) / len(hyps):.1f}%); "
                 f"rare-word subset: {subset_unk:,} of {len(rare_refs.sources):,}")
    with_digits = [(src, hyp) for src, hyp in zip(refs.sources, hyps) if _NUMBER.search(src)]
    if with_digits:
        copied = sum(numbers_copied(src, hyp) for src, hyp in with_digits)
        lines.append(f"numbers copied: {copied:,} of {len(with_digits):,} sources with digits "
                     f"({100 * copied / len(with_digits):.1f}%) keep every number unchanged")
    seconds = result.decode_seconds
    lines.append(f"decoded {len(refs.sources):,} sentences in {seconds:.1f} s ({len(refs.sources) / seconds:,.1f} "
                 f"sent/s); hypotheses written to {hyp_path}")
    return lines
