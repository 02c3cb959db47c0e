"""Preparing a corpus once: its split, vocabularies and token ids on disk, in a folder a corpus
and data config (`nmt prepare`, and `nmt train` when the folder is missing or stale).

One streaming pass (`nmt.data.read_pass`) reads the corpus and writes each split's raw text (an indexed
byte store) and counts words; SentencePiece learns from a seeded sample of the training split;
the texts are encoded in chunks by a process pool into one flat id file per split and side. All
of it is written into a temporary folder that is renamed into place with the manifest last, so
an interrupted prepare leaves nothing that looks complete. The folder is trusted while the
manifest's format, corpus fingerprint, data config and file checks hold (`nmt.data.manifest`).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nmt.config import DataConfig
from nmt.data.corpus import HELD_OUT_MAX, held_out_files
from nmt.data.indexed import IndexedArray, IndexedWriter, closed, ids_dtype
from nmt.data.manifest import (FORMAT, MANIFEST, file_sha256, file_stat, fingerprint, prepared_path,
                               shaping_config, stale_reason, vocab_key)
from nmt.data.prepared_corpus import CASED_WORDS, TARGET_WORDS, TRAINING_WORDS, write_cased_words, write_word_counts
from nmt.data.read_pass import SIDES, SPLITS, split_corpus, worker_pool
from nmt.data.tokenizer import SAMPLE_SEED, SubwordTokenizer, Tokenizer, WordTokenizer
from nmt.data.vocab import Vocab
from nmt.progress_bar import Meter

logger = logging.getLogger(__name__)

CHUNK = 20_000  # sentences a pool task encodes
POOL_FROM = 100_000  # sentences in a split: below, one process encodes faster than a pool starts


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """One process at a time prepares or checks a folder: torchrun's processes on one machine,
    or two jobs started together, wait here and then find the other's work done."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(folder.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_prepared(corpus: Path, cfg: DataConfig, vocabularies: tuple[Tokenizer, Vocab, Vocab] | None = None,
                    quiet: bool = False) -> Path:
    """The prepared folder of `corpus` under `cfg`, prepared now if missing or stale (said in one
    log line). `vocabularies`: a resumed run's own tokenizer and vocabularies, to encode with
    instead of learning new ones (only where the learned folder's do not match them)."""
    vocab = None
    if vocabularies is not None:
        learned = prepared_path(corpus, cfg)
        if stale_reason(learned, corpus, cfg, None) is None and _same_vocab(learned, *vocabularies[1:]):
            return learned
        vocab = vocab_key(*vocabularies[1:])
    folder = prepared_path(corpus, cfg, vocab)
    with locked(folder):
        reason = stale_reason(folder, corpus, cfg, vocab)
        if reason is None:
            logger.info("prepared data: %s", folder)
            return folder
        logger.info("%s; preparing it", reason)
        prepare(corpus, cfg, folder, vocabularies, vocab, quiet)
    return folder


def _same_vocab(folder: Path, src_vocab: Vocab, tgt_vocab: Vocab) -> bool:
    return (Vocab.load(folder / "src_vocab.txt") == src_vocab) and (Vocab.load(folder / "tgt_vocab.txt") == tgt_vocab)


def prepare(corpus: Path, cfg: DataConfig, folder: Path, vocabularies: tuple[Tokenizer, Vocab, Vocab] | None = None,
            vocab: str | None = None, quiet: bool = False) -> None:
    """Prepare `corpus` into `folder` (replacing what is there), by way of a temporary folder."""
    start = time.monotonic()
    for kind in ("tmp", "old"):  # what a killed prepare left (this process holds the folder's lock)
        for leftover in folder.parent.glob(f"{folder.name}.{kind}-*"):
            shutil.rmtree(leftover, ignore_errors=True)
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    tmp.mkdir(parents=True)
    try:
        corpus_print = fingerprint(corpus, cfg)
        held_out_prints = {split: fingerprint(path, cfg) for split, path in held_out_files(cfg).items()}
        counts, src_words, tgt_words, cases, digests = split_corpus(corpus, cfg, tmp, quiet, folder)
        tokenizer, src_vocab, tgt_vocab = vocabularies or learn_vocabularies(cfg, tmp, src_words, tgt_words)
        tokenizer.save(tmp)
        src_vocab.save(tmp / "src_vocab.txt")
        tgt_vocab.save(tmp / "tgt_vocab.txt")
        write_word_counts(tmp / TRAINING_WORDS, src_words)
        write_word_counts(tmp / TARGET_WORDS, tgt_words)
        write_cased_words(tmp / CASED_WORDS, cases.forms(src_words))
        digests.update(encode_splits(tmp, tokenizer, src_vocab, tgt_vocab, counts, quiet))
        files = {p.name: {**file_stat(p), "sha256": digests.get(p.name) or file_sha256(p)}
                 for p in sorted(tmp.iterdir())}
        manifest = {"format": FORMAT, "corpus": corpus_print, "held_out": held_out_prints,
                    "data": shaping_config(cfg), "vocab": vocab,
                    "counts": counts, "held_out_max": HELD_OUT_MAX, "ids_dtype": np.dtype(ids_dtype(max(len(src_vocab), len(tgt_vocab)))).name,
                    "vocab_sizes": [len(src_vocab), len(tgt_vocab)], "files": files,
                    "seconds": round(time.monotonic() - start, 1)}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        _replace_folder(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("prepared %s in %.1f s: train %s | valid %s | test %s pairs, %s source and %s target types, "
                "%.1f MB", corpus, time.monotonic() - start, f"{counts['train']:,}", f"{counts['valid']:,}",
                f"{counts['test']:,}", f"{len(src_vocab):,}", f"{len(tgt_vocab):,}", folder_mb(folder))


def folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.iterdir()) / 1e6


def _replace_folder(tmp: Path, folder: Path) -> None:
    """Move the finished folder into place; a stale one is moved aside first, then deleted."""
    old = folder.with_name(f"{folder.name}.old-{os.getpid()}")
    if folder.exists():
        os.replace(folder, old)
    os.replace(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)


def learn_vocabularies(cfg: DataConfig, out: Path, src_words: Counter, tgt_words: Counter
                       ) -> tuple[Tokenizer, Vocab, Vocab]:
    """Word vocabularies from the counts; subword models learned by SentencePiece from at most
    data.subword_sample sentences a side of the training split, read from the text stores."""
    if cfg.tokenizer == "word":
        return (WordTokenizer(cfg.source_lang, cfg.target_lang), Vocab.from_counts(src_words, cfg.min_freq),
                Vocab.from_counts(tgt_words, cfg.min_freq))
    start = time.monotonic()
    src, tgt = (IndexedArray(out / f"train.{side}.txt") for side in SIDES)
    rows = sample_rows(len(src), cfg.subword_sample)
    tokenizer = SubwordTokenizer.train((src.text(i) for i in rows), (tgt.text(i) for i in rows), cfg)
    logger.info("subword models (SentencePiece %s, %d pieces a side) learned from %s sentences a side in %.1f s",
                cfg.subword_type, cfg.vocab_size, f"{min(len(src), cfg.subword_sample):,}", time.monotonic() - start)
    return (tokenizer, *tokenizer.vocabularies())


def sample_rows(n: int, size: int) -> Sequence[int]:
    """The training rows SentencePiece learns from: all of them up to `size`, else a seeded sample
    of `size` drawn here, in order, so that the other sentences of 36 million are never read."""
    if not size or n <= size:
        return range(n)
    return np.sort(np.random.default_rng(SAMPLE_SEED).choice(n, size, replace=False)).tolist()


# Encoding ----------------------------------------------------------------------------------------

def encode_texts(tokenizer: Tokenizer, vocabs: dict[str, Vocab], src: list[str], tgt: list[str]
                 ) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids (without <eos>) of both sides' sentences, in the tokenizer's best segmentation
    (numbers as placeholders with data.protect, which reads both sides of a pair)."""
    if isinstance(tokenizer, SubwordTokenizer):
        return tokenizer.pair_ids(src, tgt)
    return ([vocabs["src"].encode(t) for t in tokenizer.source_tokens(src)],
            [vocabs["tgt"].encode(t) for t in tokenizer.target_tokens(tgt)])


_worker: dict[str, Any] = {}


def _init_worker(tokenizer: Tokenizer, vocabs: dict[str, Vocab], folder: Path) -> None:
    _worker.update(tokenizer=tokenizer, vocabs=vocabs, folder=folder)


def _encode_chunk(task: tuple[str, int, int]) -> list[tuple[np.ndarray, list[int]]]:
    """Both sides of the pairs start:stop of a split: per side, the ids end to end and their sizes."""
    split, start, stop = task
    texts = [IndexedArray(_worker["folder"] / f"{split}.{side}.txt").texts(range(start, stop)) for side in SIDES]
    out = []
    for ids in encode_texts(_worker["tokenizer"], _worker["vocabs"], *texts):
        sizes = [len(x) for x in ids]
        out.append((np.fromiter(itertools.chain.from_iterable(ids), dtype=np.uint32, count=sum(sizes)), sizes))
    return out


def encode_splits(folder: Path, tokenizer: Tokenizer, src_vocab: Vocab, tgt_vocab: Vocab, counts: dict[str, int],
                  quiet: bool) -> dict[str, str]:
    """Every split's text stores to id stores, in chunks (by a process pool for a large split);
    returns the sha256 of what was written."""
    vocabs, dtype = {"src": src_vocab, "tgt": tgt_vocab}, ids_dtype(max(len(src_vocab), len(tgt_vocab)))
    tasks = [(split, start, min(start + CHUNK, counts[split]))
             for split in SPLITS for start in range(0, counts[split], CHUNK)]
    writers = {(split, side): IndexedWriter(folder / f"{split}.{side}", dtype) for split in SPLITS for side in SIDES}
    _init_worker(tokenizer, vocabs, folder)
    big = counts["train"] >= POOL_FROM and (os.cpu_count() or 1) > 1
    with contextlib.ExitStack() as stack:
        if big:
            pool = stack.enter_context(worker_pool(_init_worker, (tokenizer, vocabs, folder)))
            results = pool.imap(_encode_chunk, tasks)
        else:
            results = map(_encode_chunk, tasks)
        total = 2 * sum(counts[s] for s in SPLITS)
        with Meter(total, "prepare: encoding", "sentences", quiet) as meter:
            for (split, start, stop), sides in zip(tasks, results):
                for side, (ids, sizes) in zip(SIDES, sides):
                    writers[split, side].add_array(ids, sizes)
                meter.update(2 * (stop - start))
    _worker.clear()
    return closed(writers.values())
