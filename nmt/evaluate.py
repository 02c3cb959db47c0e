"""BLEU and chrF with sacrebleu, one hypothesis per source against all of its references."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from nmt.corpus import Pair
from nmt.errors import DataError


@dataclass(frozen=True)
class Scores:
    bleu: float
    chrf: float
    signature: str

    def line(self) -> str:
        return f"BLEU {self.bleu:.2f} | chrF {self.chrf:.2f} | {self.signature}"


def group_references(pairs: Sequence[Pair]) -> tuple[list[list[str]], list[list[str]]]:
    """Unique source sentences (first-seen order) and all of each one's target sentences."""
    refs: dict[tuple[str, ...], list[str]] = {}
    for pair in pairs:
        refs.setdefault(tuple(pair.src), []).append(" ".join(pair.tgt))
    return [list(src) for src in refs], list(refs.values())


def reference_streams(refs: Sequence[Sequence[str]]) -> list[list[str]]:
    """Transpose per-source reference lists into sacrebleu's equally long streams.

    A source with fewer references repeats its first one. Never pad with '': sacrebleu would
    count it as a reference of length 0 when it picks the closest reference length, letting
    short hypotheses escape the brevity penalty.
    """
    width = max(len(r) for r in refs)
    return [[r[k] if k < len(r) else r[0] for r in refs] for k in range(width)]


def score(hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> Scores:
    streams = reference_streams(refs)
    # The text is nmt's preprocessed form (punctuation split off), which 13a leaves as it is;
    # force=True silences sacrebleu's "forgot to detokenize" warning for exactly that reason.
    bleu, chrf = BLEU(force=True), CHRF()
    bleu_score = bleu.corpus_score(list(hyps), streams)
    chrf_score = chrf.corpus_score(list(hyps), streams)
    return Scores(bleu_score.score, chrf_score.score, f"{bleu.get_signature()} | {chrf.get_signature()}")


def evaluate_checkpoint(checkpoint: str | None, split: str, bleu: bool, device_name: str,
                        data_path: str | None, beam_size: int | None = None) -> list[str]:
    """Score a checkpoint on a split; returns the result lines and writes the hypotheses
    beside the checkpoint (`hyps.<split>.txt`, one per unique source sentence)."""
    import math
    import time

    from nmt.checkpoint import load_model
    from nmt.corpus import load_splits, resolve_corpus
    from nmt.data import encode_pairs
    from nmt.runtime import resolve_device
    from nmt.train import validation_loss
    from nmt.translator import Translator

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
