"""BLEU and chrF with sacrebleu, one hypothesis per source against all of its references."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from nmt.corpus import Pair


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
