"""The default recipe: what a config's `auto` keys become for the corpus a run trains on.

configs/default.yaml leaves to the recipe the keys that depend on the corpus. They are decided
once, when a new run starts (and by `nmt prepare`), from two facts: how many pairs the corpus
holds and how long its training pairs are in pieces. The choice is logged in one line and written
into the run's config.yaml as numbers, so the run can be repeated; a key the config or `--set`
gives is never touched, and a resumed run keeps what it chose.

- The size band (pairs, counted up to COUNT_UP_TO): a corpus below SMALL_CORPUS pairs (Multi30k's
  29k captions) gets a smaller vocabulary, about one piece per PAIRS_PER_PIECE pairs (2,000 for
  29k: +1.4 / +1.6 test BLEU over 5,000 at 30 minutes on Multi30k en->de, two seeds, chrF level;
  +0.6 BLEU and chrF on fra-eng's 29k subset at 10 minutes; Sennrich and Zhang (2019) found small
  vocabularies best for RNN models on small corpora: each piece is seen more often), and the
  regularization a small corpus needs: dropout between layers, on the embeddings and on the
  decoder's outputs, and label smoothing (LIUM-CVC's Multi30k systems and OpenNMT-py drop out all
  three places), and twice fra-eng's learning rate: a small corpus's budget ends long before its
  model converges, and 0.004 gained 3.1 BLEU at 10 minutes and 1.6 at 30 on Multi30k en->de
  (docs/results.md). From SMALL_CORPUS pairs on, the values measured on fra-eng's 162k pairs, which
  no larger corpus has been measured against yet; at 80k pairs the two bands tied (43.70 / 43.72
  test BLEU on fra-eng's 80k subset) and at 45k the small band won by 5.6, so the boundary sits
  about where they meet (docs/results.md).
- data.max_len: the shortest length (pieces, <eos> included) that keeps all but MAX_DROPPED of the
  training pairs, at most MAX_LEN_CAP for memory; on fra-eng that is the 26 it always had.
- train.epochs: with a time budget, as many as fit (the budget and train.patience end the run);
  without one, 10.
- train.guided_alignment: GUIDED_WEIGHT where eflomal is installed (the `align` extra), else 0 and
  the log line says so: on fra-eng, two seeds, the tags of `--markup` land on the right words more
  often and test BLEU held (+0.61, p = 0.09; -0.03, p = 0.39; docs/results.md).
- model.alignment_head: on where eflomal is installed: the alignments `--align` prints and
  `--markup` reads come from a head trained on the same links (Hansards AER 33.6% against 45.4%
  on fra-eng, the tags right 90% of the time against 88%), at no cost to the translation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nmt.config import Config, DataConfig
from nmt.data.batches import training_lengths
from nmt.data.corpus import count_pairs, resolve_corpus
from nmt.data.links import aligner_installed
from nmt.data.manifest import corpus_files, corpus_name, file_stat
from nmt.data.prepared_corpus import PreparedCorpus
from nmt.errors import DataError
from nmt.files import write_text_atomically
from nmt.training import distributed
from nmt.training.run_data import prepared_once

logger = logging.getLogger(__name__)

COUNT_UP_TO = 1_000_000  # no band is decided above this, so a corpus of millions is not read to the end
SMALL_CORPUS = 60_000
PAIRS_PER_PIECE = 15  # 29k pairs -> 2,000 pieces: beat 1,000, 3,000 and 5,000 (docs/results.md)
MAX_DROPPED = 0.004
MAX_LEN_CAP = 250  # pieces: a batch of 64 such pairs still fits a laptop's memory
LENGTH_LIMIT = "recipe_max_len.json"  # in a prepared folder: the max_len its training pairs give
EPOCHS_WITH_BUDGET = 100
EPOCHS_WITHOUT_BUDGET = 10
GUIDED_WEIGHT = 0.5


@dataclass(frozen=True)
class SizeBand:
    name: str
    vocab_size: int
    dropout: float
    embed_dropout: float
    output_dropout: float
    label_smoothing: float
    lr: float


def size_band(pairs: int) -> SizeBand:
    """The settings a corpus of `pairs` pairs trains with."""
    if pairs < SMALL_CORPUS:
        vocab = int(np.clip(round(pairs / PAIRS_PER_PIECE, -3), 1000, 8000))
        return SizeBand(f"small (under {SMALL_CORPUS:,} pairs)", vocab, dropout=0.3, embed_dropout=0.2,
                        output_dropout=0.3, label_smoothing=0.1, lr=0.004)
    return SizeBand(f"{SMALL_CORPUS:,} pairs or more", 8000, dropout=0.2, embed_dropout=0.0, output_dropout=0.0,
                    label_smoothing=0.0, lr=0.002)


def max_len_for(lengths: np.ndarray, corpus: Path) -> int:
    """The shortest data.max_len that keeps all but MAX_DROPPED of pairs of these `lengths` (the
    longer side's pieces + <eos>), within MAX_LEN_CAP; refused where most pairs are over the cap."""
    if not len(lengths):
        raise DataError(f"{corpus}: no training pairs to train on; give a larger corpus with --data")
    median = int(np.median(lengths))
    if median > MAX_LEN_CAP:
        raise DataError(f"{corpus}: half its training pairs are over {median} pieces, past the recipe's "
                        f"{MAX_LEN_CAP}: is it split into sentences? Split it, or set data.max_len yourself")
    return int(min(MAX_LEN_CAP, np.ceil(np.quantile(lengths, 1 - MAX_DROPPED, method="higher"))))


def fit_to_corpus(cfg: Config, data_path: str | None, quiet: bool = False) -> Config:
    """`cfg` with its `auto` keys decided for the corpus (unchanged where it has none)."""
    auto = cfg.auto_keys()
    if not auto:
        return cfg
    corpus = resolve_corpus(data_path, cfg.data)
    pairs = counted_pairs(corpus, cfg.data)
    band, aligner = size_band(pairs), aligner_installed()
    chosen: dict[str, Any] = {
        "data.vocab_size": band.vocab_size, "model.dropout": band.dropout, "model.embed_dropout": band.embed_dropout,
        "model.output_dropout": band.output_dropout, "train.label_smoothing": band.label_smoothing, "train.lr": band.lr,
        "train.epochs": EPOCHS_WITH_BUDGET if cfg.train.max_minutes else EPOCHS_WITHOUT_BUDGET,
        "train.guided_alignment": GUIDED_WEIGHT if aligner else 0.0, "model.alignment_head": aligner}
    cfg = settled(cfg, {key: chosen[key] for key in auto if key in chosen})
    why = f"{'over ' if pairs >= COUNT_UP_TO else ''}{pairs:,} pairs in the corpus: {band.name}"
    if {"train.guided_alignment", "model.alignment_head"} & set(auto) and not aligner:
        why += "; no guided alignment or alignment head: eflomal is not installed (pip install -e '.[align]')"
    if "data.max_len" in auto:
        max_len, kept = length_limit(prepared_once(corpus, cfg.data, None, quiet), cfg.data, corpus)
        cfg = settled(cfg, {"data.max_len": max_len})
        why += f"; data.max_len keeps {kept:.1%} of training pairs"
    logger.info("recipe for %s: %s (%s)", corpus.name, ", ".join(f"{k}={cfg.value(k)}" for k in auto), why)
    return cfg


def counted_pairs(corpus: Path, cfg: DataConfig) -> int:
    """count_pairs up to COUNT_UP_TO, remembered beside the prepared folders for as long as the
    corpus files keep their size and mtime: a warm start of a run on millions of pairs does not
    read its first million lines again (3.7 s of a 4M-pair corpus's start)."""
    record = Path(cfg.prepared_dir) / f"{corpus_name(corpus)}.pairs.json"
    try:
        key = {"path": str(corpus.resolve()), "files": [file_stat(f) for f in corpus_files(corpus, cfg)],
               "languages": [cfg.src_lang, cfg.tgt_lang], "num_pairs": cfg.num_pairs, "up_to": COUNT_UP_TO}
    except OSError:  # a missing file: count_pairs says which, in one line
        return count_pairs(corpus, cfg, COUNT_UP_TO)
    try:
        stored = json.loads(record.read_text(encoding="utf-8"))
        if stored["key"] == key:
            return int(stored["pairs"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    pairs = count_pairs(corpus, cfg, COUNT_UP_TO)
    with contextlib.suppress(OSError):
        record.parent.mkdir(parents=True, exist_ok=True)
    _write_record(record, {"key": key, "pairs": pairs})
    return pairs


def length_limit(folder: Path, cfg: DataConfig, corpus: Path) -> tuple[int, float]:
    """`max_len_for` the prepared corpus's training pairs and the share of them it keeps,
    remembered in the folder (a rebuild replaces the folder whole): a warm start on 36M pairs does
    not read and rank their 36M lengths again (2.8 s of it)."""
    record, rule = folder / LENGTH_LIMIT, [MAX_DROPPED, MAX_LEN_CAP]
    try:
        stored = json.loads(record.read_text(encoding="utf-8"))
        if stored["rule"] == rule:
            return int(stored["max_len"]), float(stored["kept"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    prepared = PreparedCorpus(folder, cfg)
    src, tgt = prepared.ids("train", "src"), prepared.ids("train", "tgt")
    lengths = np.maximum(src.sizes(), tgt.sizes()) + 1
    max_len = max_len_for(lengths, corpus)
    kept = float(np.mean(lengths <= max_len))
    del lengths
    training_lengths(src, tgt, max_len, folder)  # kept for the training set: the first start reads them too
    _write_record(record, {"rule": rule, "max_len": max_len, "kept": kept})
    return max_len, kept


def _write_record(path: Path, record: dict[str, Any]) -> None:
    """A shortcut written atomically; where it cannot be written, the next start works it out again."""
    try:
        write_text_atomically(path, json.dumps(record))
    except OSError:
        pass


def settled(cfg: Config, values: dict[str, Any]) -> Config:
    """`cfg` with these dotted keys set."""
    sections: dict[str, dict[str, Any]] = {}
    for dotted, value in values.items():
        section, key = dotted.split(".")
        sections.setdefault(section, {})[key] = value
    return dataclasses.replace(cfg, **{name: dataclasses.replace(getattr(cfg, name), **changes)
                                       for name, changes in sections.items()})
