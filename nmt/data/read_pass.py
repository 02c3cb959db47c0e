"""A prepare's streaming pass: the corpus read once, line by line, into each split's raw text
stores, with the training split's word counts and the source's capitals; the training pairs are
cleaned on the way (`nmt.data.cleaning`: the pair rules where a pair is split, the rules that read
the pairs before it where the stores are written).

Splitting a line (the md5 rule) and counting its words is most of the pass's CPU; on a large
corpus it runs in a pool of worker processes, a few chunks of lines ahead of the main process,
which reads the corpus and writes the stores in order (the same stores and counts as one process
writes: a chunk's counts merge in order).
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
from collections import Counter, deque
from collections.abc import Callable, Iterator
from multiprocessing.pool import AsyncResult, Pool
from pathlib import Path
from typing import Any

import numpy as np

from nmt.config import DataConfig
from nmt.data.cleaning.report import Report
from nmt.data.cleaning.rules import InOrder, LanguageSample, PairRules, pair_key
from nmt.data.corpus import (HELD_OUT_MAX, Overlap, Pair, PairReader, SplitCounter, directed, held_out_files,
                             held_out_stride, split_pair, split_pairs, stays_held_out)
from nmt.data.indexed import IndexedArray, IndexedWriter, closed
from nmt.data.manifest import corpus_name
from nmt.data.prepared_corpus import CaseCounts
from nmt.progress_bar import Meter

logger = logging.getLogger(__name__)

SPLITS, SIDES = ("train", "valid", "test"), ("src", "tgt")
CHUNK_LINES = 20_000  # lines a worker splits at a time
AHEAD = 4  # chunks in the workers' hands: enough to keep them busy, few enough that memory stays flat
PARALLEL_FROM = 16_000_000  # bytes of corpus: below (about 200k pairs), one process is as fast

# (split, source text, target text, corpus line, the pair rule that drops it or None, its pair_key) of a
# chunk's pairs, in corpus order
Rows = list[tuple[str, str, str, int, str | None, int]]
Chunk = tuple[Rows, Counter, Counter]  # its rows and its training pairs' source and target word counts


def worker_pool(initializer: Callable[..., None], initargs: tuple) -> Pool:
    """A pool of one process a core, forked where the platform can (no re-import of torch)."""
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method).Pool(os.cpu_count(), initializer, initargs)


def split_corpus(corpus: Path, cfg: DataConfig, out: Path, quiet: bool, shown: Path | None = None
                 ) -> tuple[dict[str, Any], Counter, Counter, CaseCounts, dict[str, str]]:
    """The streaming pass: each line to its split's text stores, a training pair only if cleaning
    keeps it (the others to `out`'s dropped.tsv; `shown`: the folder the report names); the training
    split's word counts (the source's: the rare-word subset's vocabulary; the target's: word
    vocabularies, and the frequent words markup's alignment steps past) and the source's capitals
    (how a source in capitals is read). Returns the counts of pairs (with those dropped, by rule), the
    word counts, the capitals and the sha256 of the stores."""
    reader, counter, overlap = PairReader(corpus, cfg), SplitCounter(corpus), Overlap()
    writers = {(split, side): IndexedWriter(out / f"{split}.{side}.txt", np.uint8)
               for split in SPLITS for side in SIDES}
    src_words: Counter = Counter()
    tgt_words: Counter = Counter()
    cases = CaseCounts()
    counts: dict[str, Any] = dict.fromkeys(SPLITS, 0)
    in_order, report, removed = InOrder(cfg, reader.total_bytes), Report(out), (Counter(), Counter())
    forward = DataConfig(src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang)  # the rows hold the model's direction
    # (a given dev or test set's overlap rule reads every pair's words in order: one process)
    parallel = not held_out_files(cfg) and (os.cpu_count() or 1) > 1 and reader.total_bytes >= PARALLEL_FROM
    sample = LanguageSample(bool(cfg.drop_language))
    chunks = _split_in_workers(reader, cfg, counter, sample) if parallel else \
        _split_here(reader, cfg, counter, overlap, sample)
    with Meter(reader.total_bytes, f"prepare {corpus_name(corpus)}: reading", "B", quiet, unit_scale=True) as meter:
        read = 0
        for rows, src_counts, tgt_counts in chunks:
            kept = [row for row in rows if row[0] == "train" and row[4] is None]
            late = iter(in_order.judge([(src_text, tgt_text, key) for _, src_text, tgt_text, _, _, key in kept]))
            for split, src_text, tgt_text, line, rule, _ in rows:
                if split == "train" and (rule := rule or next(late)):
                    report.drop(rule, line, src_text, tgt_text)
                    if rule in ("ratio", "duplicates"):  # (their words were counted where the pair was split)
                        _count_words(src_text, tgt_text, forward, *removed)
                    continue
                counts[split] += 1
                writers[split, "src"].add(src_text.encode("utf-8"))
                writers[split, "tgt"].add(tgt_text.encode("utf-8"))
                if split == "train":
                    cases.add(src_text)
            src_words.update(src_counts)
            tgt_words.update(tgt_counts)
            meter.update(reader.bytes_read - read)
            read = reader.bytes_read
    for split, path in held_out_files(cfg).items():
        logger.info("data.%s %s: %s pairs; the md5 split's %s pairs train instead", split, path,
                    f"{counts[split]:,}", split)
    if held_out_files(cfg):
        action = "dropped from training (data.drop_overlap)" if cfg.drop_overlap else \
            "kept in training (data.drop_overlap: false)"
        logger.info("overlap: %s source(s) of data.valid/data.test also occur in the training corpus, in %s "
                    "training pair(s), %s", f"{len(overlap.sources):,}", f"{overlap.pairs:,}", action)
    for split in ("valid", "test"):
        if (stride := held_out_stride(split, counts[split], cfg)) > 1:
            moved, dropped = thin_held_out(out, split, stride, writers, cfg, src_words, tgt_words, report, sample.on)
            logger.info("%s: %s of its %s pairs train (one source in %d stays held out: about %s pairs a split "
                        "at most)", split, f"{moved:,}", f"{counts[split]:,}", stride, f"{HELD_OUT_MAX:,}")
            counts[split] -= moved + dropped
            counts["train"] += moved
    digests = closed(writers.values())
    counts["dropped"] = report.finish(counts["train"], cfg, shown or out)  # (first: it says why nothing is left)
    counter.finish(counts["train"])
    src_words -= removed[0]
    tgt_words -= removed[1]
    counts["skipped"] = counter.skipped
    counts["overlap"] = overlap.pairs
    return counts, src_words, tgt_words, cases, digests


def _split_here(reader: PairReader, cfg: DataConfig, counter: SplitCounter, overlap: Overlap,
                sample: LanguageSample) -> Iterator[Chunk]:
    """The pairs in chunks, split and counted by this process (`split_pairs`' rule, held-out sets included)."""
    rows: Rows = []
    src_words: Counter = Counter()
    tgt_words: Counter = Counter()
    rules = PairRules(cfg)
    for split, pair in split_pairs(reader, cfg, counter, overlap, cfg.num_pairs):
        rule, key = _judged(rules, pair, sample.judges(pair.line)) if split == "train" else (None, 0)
        if split == "train":
            sample.count(pair.line, rule)
        rows.append((split, *pair.raw, pair.line, rule, key))
        if split == "train" and not rule:
            src_words.update(pair.src)
            tgt_words.update(pair.tgt)
        if len(rows) == CHUNK_LINES:
            yield rows, src_words, tgt_words
            rows, src_words, tgt_words = [], Counter(), Counter()
    yield rows, src_words, tgt_words


def _split_in_workers(reader: PairReader, cfg: DataConfig, counter: SplitCounter, sample: LanguageSample
                      ) -> Iterator[Chunk]:
    """The same chunks, split and counted by a pool of workers, AHEAD chunks ahead of the reader."""
    lines = itertools.islice(reader, cfg.num_pairs or None)
    pending: deque[tuple[list, AsyncResult]] = deque()
    with worker_pool(_init_split_worker, (cfg,)) as pool:
        while chunk := list(itertools.islice(lines, CHUNK_LINES)):
            if chunk[-1][0] > sample.size and not sample.decided:  # the sample's pairs all judged first
                while pending:
                    yield _tallied(*pending.popleft(), cfg, counter, sample)
            judges = [sample.judges(number) for number, _, _ in chunk]
            pending.append((chunk, pool.apply_async(_split_chunk, ([(first, second) for _, first, second in chunk],
                                                                    judges))))
            if len(pending) > AHEAD:
                yield _tallied(*pending.popleft(), cfg, counter, sample)
        while pending:
            yield _tallied(*pending.popleft(), cfg, counter, sample)


def _tallied(chunk: list[tuple[int, str | None, str | None]], result: AsyncResult, cfg: DataConfig,
             counter: SplitCounter, sample: LanguageSample) -> Chunk:
    judged, src_words, tgt_words = result.get()
    rows: Rows = []
    for (number, first, second), (split, rule, key) in zip(chunk, judged):
        counter.tally(number, first is not None, split is not None)
        if split == "train":
            sample.count(number, rule)
        if split is not None:
            src_text, tgt_text = directed(first, second, cfg)
            rows.append((split, src_text.strip(), tgt_text.strip(), number, rule, key))
    return rows, src_words, tgt_words


_worker: dict[str, Any] = {}


def _init_split_worker(cfg: DataConfig) -> None:
    _worker.update(cfg=cfg, rules=PairRules(cfg))


def _split_chunk(lines: list[tuple[str | None, str | None]], judges: list[bool]
                 ) -> tuple[list[tuple[str | None, str | None, int]], Counter, Counter]:
    """Each line's split (None: no pair), the pair rule that drops a training pair (or None: the
    language rule where `judges` says) and its pair_key; the word counts of the chunk's training
    pairs that the rules keep."""
    judged: list[tuple[str | None, str | None, int]] = []
    src_words: Counter = Counter()
    tgt_words: Counter = Counter()
    for (first, second), language in zip(lines, judges):
        found = split_pair(first, second, _worker["cfg"])
        if not found or found[0] != "train":
            judged.append((found[0] if found else None, None, 0))
            continue
        pair = found[1]
        rule, key = _judged(_worker["rules"], pair, language)
        judged.append(("train", rule, key))
        if not rule:
            src_words.update(pair.src)
            tgt_words.update(pair.tgt)
    return judged, src_words, tgt_words


def _judged(rules: PairRules, pair: Pair, language: bool) -> tuple[str | None, int]:
    """The pair rule that drops a training pair (None: none does) and, where none does, its pair_key."""
    rule = rules.broken(*pair.raw, language)
    return rule, 0 if rule else pair_key(*pair.raw)


def _count_words(src_text: str, tgt_text: str, forward: DataConfig, src_words: Counter, tgt_words: Counter) -> None:
    """Add a (source, target) pair's words, as the split counts them, to the counters."""
    if found := split_pair(src_text, tgt_text, forward):
        src_words.update(found[1].src)
        tgt_words.update(found[1].tgt)


def thin_held_out(out: Path, split: str, stride: int, writers: dict[tuple[str, str], IndexedWriter], cfg: DataConfig,
                  src_words: Counter, tgt_words: Counter, report: Report, language: bool) -> tuple[int, int]:
    """Keep every `stride`-th source of a large held-out split (`stays_held_out`); the other pairs
    join the training split's stores and word counts, where the pair rules keep them (those they
    drop go to the report; `language`: whether the language rule still judges). Returns how many moved
    and how many the rules dropped."""
    stores = {}
    for side in SIDES:
        writers[split, side].close()
        for suffix in (".bin", ".idx"):
            os.replace(out / f"{split}.{side}.txt{suffix}", out / f"{split}.{side}.all{suffix}")
        stores[side] = IndexedArray(out / f"{split}.{side}.all")
        writers[split, side] = IndexedWriter(out / f"{split}.{side}.txt", np.uint8)
    forward = DataConfig(src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang)  # the stores hold the model's direction
    rules, moved, dropped = PairRules(cfg), 0, 0
    for i in range(len(stores["src"])):
        src_text, tgt_text = stores["src"].text(i), stores["tgt"].text(i)
        to = split if stays_held_out(src_text, stride) else "train"
        if to == "train" and (rule := rules.broken(src_text, tgt_text, language)):
            report.drop(rule, None, src_text, tgt_text)
            dropped += 1
            continue
        writers[to, "src"].add(src_text.encode("utf-8"))
        writers[to, "tgt"].add(tgt_text.encode("utf-8"))
        if to == "train":
            moved += 1
            _count_words(src_text, tgt_text, forward, src_words, tgt_words)
    for path in out.glob(f"{split}.*.all.*"):
        path.unlink()
    return moved, dropped
