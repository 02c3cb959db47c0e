"""One validation routine for training and `nmt eval`: the loss over a split's pairs, then the
translations of its unique sources scored in the standard and the legacy form.

It stands on the translator, the loss and the metrics; evaluation adds only its extras (the
rare-word subset, <unk> and digit shares, files), training its records and checkpoints.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from nmt.data.batches import Example
from nmt.evaluation.metrics import References, Scores, score
from nmt.inference.translator import Options, Translation, Translator, best_of
from nmt.model import Seq2Seq
from nmt.model.loss import validation_loss
from nmt.progress_bar import Meter


@dataclass(frozen=True)
class Validation:
    loss: float  # cross-entropy per target token over every pair (no label smoothing, no dropout)
    standard: Scores  # sacreBLEU's defaults on the plain text against the corpus's sentences
    legacy: Scores  # lowercased and tokenized, as the project's earlier figures
    translations: list[Translation]  # one per source of the references, in their order
    decode_seconds: float  # the time the translations took


def search_name(beam: int) -> str:
    """How results name their search: greedy, or beam N."""
    return "greedy" if beam == 1 else f"beam {beam}"


def validate(translator: Translator, examples: Sequence[Example], references: References,
             options: Options = Options(), loss_model: Seq2Seq | None = None, meter: str | None = None
             ) -> Validation:
    """The loss over `examples`, then `references`' sources translated (with `options`: its beam,
    default the translator's decode.beam_size, and glossary) and scored against all of their
    references. The loss is the PyTorch model's: the translator's, or `loss_model` when the
    translator runs another engine (nan for an ensemble, which has no one loss). `meter`: decode in
    chunks behind a progress bar of that name (`nmt eval` on long test sets)."""
    model, vocab = loss_model or translator.model, translator.tgt_vocab
    if not isinstance(model, torch.nn.Module):
        model = None
    was_training = model is not None and model.training
    if model is not None:
        model.eval()
    try:
        loss = float("nan") if model is None else validation_loss(
            model, examples, translator.cfg.batch_size, vocab.pad_id, vocab.bos_id, translator.device)
        start = time.perf_counter()
        sources = references.sources
        outputs = ([best_of(hyps) for hyps in translator.run(sources, options)] if meter is None
                   else _translations_metered(translator, sources, options, meter))
        seconds = time.perf_counter() - start
    finally:
        if model is not None:
            model.train(was_training)
    standard = score([t.text for t in outputs], references.references,
                     target_lang=translator.tokenizer.target_lang)
    legacy = score([t.tokenized for t in outputs], references.legacy_references, tokenized=True)
    return Validation(loss, standard, legacy, outputs, seconds)


def _translations_metered(translator: Translator, sources: list[str], options: Options, desc: str
                          ) -> list[Translation]:
    """The translations of `sources` in chunks of 32 batches, counted on a progress bar."""
    outputs: list[Translation] = []
    with Meter(len(sources), desc, "sentences") as meter:
        for chunk, results in translator.stream(sources, options, 32 * translator.cfg.batch_size):
            outputs += map(best_of, results)
            meter.update(len(chunk))
    return outputs
