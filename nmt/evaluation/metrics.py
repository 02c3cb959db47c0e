"""BLEU and chrF with sacrebleu, one hypothesis per source against all of its references.

Two forms: standard sacreBLEU (cased, detokenized output against the corpus's own sentences,
13a or the target language's own tokenizer) and the legacy form of earlier results
(lowercased, punctuation split off).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from nmt.data.corpus import Pair
from nmt.errors import NmtError


@dataclass(frozen=True)
class Scores:
    bleu: float
    chrf: float
    signature: str

    def line(self) -> str:
        return f"BLEU {self.bleu:.2f} | chrF {self.chrf:.2f} | {self.signature}"


@dataclass
class References:
    """A split's unique sources (first-seen order; sources equal after d2l's preprocessing are
    one) with all of each one's translations."""
    sources: list[str]  # as the corpus writes them
    source_words: list[list[str]]  # the word tokens, the grouping key
    references: list[list[str]]  # as the corpus writes them
    legacy_references: list[list[str]]  # lowercased and tokenized

    def subset(self, keep: Sequence[bool]) -> References:
        return References(*([x for x, k in zip(column, keep) if k] for column in
                            (self.sources, self.source_words, self.references, self.legacy_references)))


def group_references(pairs: Sequence[Pair]) -> References:
    groups: dict[tuple[str, ...], tuple[str, list[str], list[str]]] = {}
    for pair in pairs:
        src_text, tgt_text = pair.raw
        _, refs, legacy = groups.setdefault(tuple(pair.src), (src_text, [], []))
        refs.append(tgt_text)
        legacy.append(" ".join(pair.tgt))
    return References([g[0] for g in groups.values()], [list(key) for key in groups],
                      [g[1] for g in groups.values()], [g[2] for g in groups.values()])


def reference_streams(refs: Sequence[Sequence[str]]) -> list[list[str]]:
    """Transpose per-source reference lists into sacrebleu's equally long streams.

    A source with fewer references repeats its first one. Never pad with '': sacrebleu would
    count it as a reference of length 0 when it picks the closest reference length, letting
    short hypotheses escape the brevity penalty.
    """
    width = max(len(r) for r in refs)
    return [[r[k] if k < len(r) else r[0] for r in refs] for k in range(width)]


def sacrebleu_metrics(target_lang: str, tokenized: bool = False) -> dict[str, BLEU | CHRF]:
    """sacreBLEU's BLEU (its tokenizer for `target_lang`, or none for the legacy tokenized form) and chrF."""
    try:
        bleu = BLEU(force=tokenized, trg_lang="" if tokenized else target_lang.split("-")[0].lower())
    except (ImportError, RuntimeError) as e:  # ja-mecab and ko-mecab need packages of their own
        raise NmtError(f"sacreBLEU's tokenizer for {target_lang!r} cannot load ({e}); "
                       f"pip install 'sacrebleu[ja]' or 'sacrebleu[ko]'") from None
    return {"BLEU": bleu, "chrF": CHRF()}


def score(hyps: Sequence[str], refs: Sequence[Sequence[str]], tokenized: bool = False,
          target_lang: str = "") -> Scores:
    """Corpus BLEU and chrF. Standard BLEU takes sacreBLEU's tokenizer for `target_lang` where it
    has one (zh, ja-mecab, ko-mecab; 13a elsewhere), as its signature says. `tokenized`: the legacy
    form, whose punctuation is split off on purpose; force=True silences sacreBLEU's "forgot to
    detokenize" warning for exactly that."""
    streams = reference_streams(refs)
    bleu, chrf = sacrebleu_metrics(target_lang, tokenized).values()
    bleu_score = bleu.corpus_score(list(hyps), streams)
    chrf_score = chrf.corpus_score(list(hyps), streams)
    return Scores(bleu_score.score, chrf_score.score, f"{bleu.get_signature()} | {chrf.get_signature()}")
