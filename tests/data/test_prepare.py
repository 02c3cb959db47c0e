"""Prepared corpora: prepared once, trusted only while right (each way it can go wrong is found,
said in one line and rebuilt), never half-built, prepared by one process at a time."""

import dataclasses
import json
import logging
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY, toy_lines, seed_data

from nmt.config import config_from_dict
from nmt.data import manifest, prepare
from nmt.data.manifest import prepared_path
from nmt.data.prepare import ensure_prepared
from nmt.data.prepared_corpus import TARGET_WORDS, PreparedCorpus, word_counts, words_by_count
from nmt.data.vocab import Vocab
from nmt.errors import DataError
from nmt.training.run_data import epoch_batches, load_data

WORD = seed_data(min_freq=1, max_len=10)


@pytest.fixture
def tsv(tmp_path) -> Path:
    path = tmp_path / "toy.tsv"
    path.write_text("\n".join(toy_lines()) + "\n", encoding="utf-8")
    return path


def _prepare(corpus, cfg, caplog) -> tuple[Path, str]:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="nmt.data.prepare"):
        folder = ensure_prepared(corpus, cfg, quiet=True)
    return folder, caplog.text


def test_a_cache_hit_reads_what_was_prepared_and_encodes_nothing(tsv, caplog, monkeypatch):
    folder, log = _prepare(tsv, WORD, caplog)
    assert "no prepared data in" in log and "prepared " in log
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["counts"]["train"] + manifest["counts"]["valid"] + manifest["counts"]["test"] == len(toy_lines())
    assert manifest["ids_dtype"] == "uint16" and manifest["data"]["min_freq"] == 1
    monkeypatch.setattr(prepare, "encode_splits", lambda *a, **k: pytest.fail("a cache hit encoded again"))
    again, log = _prepare(tsv, WORD, caplog)
    assert again == folder and "prepared data: " in log and "preparing" not in log
    corpus = PreparedCorpus(folder, WORD)
    tokenizer, src_vocab, _ = corpus.vocabularies()
    ids = corpus.ids("train", "src")
    assert len(ids) == manifest["counts"]["train"]
    assert src_vocab.decode(ids[0].tolist()) == tokenizer.source_tokens([corpus.texts("train", "src").text(0)])[0]


def _edit_in_place(path: Path) -> None:
    """Swap two words of one line: same size, other content."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("I see a cat.", "I see a tac.", 1), encoding="utf-8")


def _truncate(folder: Path) -> None:
    path = folder / "train.src.bin"
    path.write_bytes(path.read_bytes()[:-2])


def _corrupt(folder: Path) -> None:
    path = folder / "train.tgt.bin"
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))


def _older_format(folder: Path) -> None:
    stored = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**stored, "format": manifest.FORMAT - 1}))


@pytest.mark.parametrize("damage, said", [
    (lambda folder, corpus: _edit_in_place(corpus), "the corpus changed since it was prepared (its content differs)"),
    (lambda folder, corpus: corpus.write_text(corpus.read_text() + "Go.\tVa !\n"), "(its size differs)"),
    (lambda folder, corpus: _truncate(folder), "train.src.bin is truncated"),
    (lambda folder, corpus: _corrupt(folder), "train.tgt.bin is corrupt"),
    (lambda folder, corpus: _older_format(folder), f"holds format {manifest.FORMAT - 1}; this nmt reads format"),
    (lambda folder, corpus: (folder / "tgt_vocab.txt").unlink(), "tgt_vocab.txt is missing"),
])
def test_each_invalidation_is_said_in_one_line_and_rebuilt(tsv, caplog, damage, said):
    folder, _ = _prepare(tsv, WORD, caplog)
    time.sleep(0.01)  # a new mtime even on coarse clocks
    damage(folder, tsv)
    rebuilt, log = _prepare(tsv, WORD, caplog)
    lines = [line for line in log.splitlines() if "preparing it" in line]
    assert len(lines) == 1 and said in lines[0], log
    assert rebuilt == folder
    _, log = _prepare(tsv, WORD, caplog)
    assert "preparing" not in log  # and the rebuilt folder is a hit


def test_a_changed_data_config_prepares_its_own_folder_and_says_what_changed(tsv, caplog):
    first, _ = _prepare(tsv, WORD, caplog)
    other = seed_data(min_freq=2, max_len=10)
    second, log = _prepare(tsv, other, caplog)
    assert second != first and "data config changed since" in log and "data.min_freq 1 -> 2" in log
    assert "preparing" not in _prepare(tsv, WORD, caplog)[1]  # switching back is a hit
    # max_len filters when reading: it does not shape the prepared data.
    assert prepared_path(tsv, seed_data(min_freq=1, max_len=30)) == first


def test_a_folder_made_for_another_config_is_not_trusted(tsv, caplog):
    folder, _ = _prepare(tsv, WORD, caplog)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["data"]["min_freq"] = 5
    (folder / "manifest.json").write_text(json.dumps(manifest))
    _, log = _prepare(tsv, WORD, caplog)
    assert "was prepared for another data config (data.min_freq 5 -> 1); preparing it" in log


def test_a_corpus_touched_but_unchanged_is_still_a_hit(tsv, caplog):
    _prepare(tsv, WORD, caplog)
    os.utime(tsv, ns=(1, 1))
    assert "preparing" not in _prepare(tsv, WORD, caplog)[1]


def test_an_interrupted_prepare_leaves_nothing_that_looks_complete(tsv, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare, "encode_splits", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ensure_prepared(tsv, WORD, quiet=True)
    assert [p.name for p in Path(WORD.prepared_dir).iterdir() if not p.name.endswith(".lock")] == []


def test_a_killed_prepare_is_cleaned_up_by_the_next(tsv, caplog):
    folder = prepared_path(tsv, WORD)
    folder.parent.mkdir(parents=True)
    (folder.parent / f"{folder.name}.tmp-99999").mkdir()  # as SIGKILL mid-prepare leaves it
    assert "no prepared data in" in _prepare(tsv, WORD, caplog)[1]
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name, f"{folder.name}.lock"]


def test_bad_input_is_one_error_and_no_cache(tmp_path):
    no_pairs = tmp_path / "no-pairs.txt"
    no_pairs.write_text("no tab here\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 1 has no tab"):
        ensure_prepared(no_pairs, WORD, quiet=True)
    assert not list(Path(WORD.prepared_dir).glob("no-pairs-*[!k]"))  # only the lock file


def test_a_resumed_run_whose_vocabulary_differs_gets_the_corpus_in_its_own(tsv, caplog):
    folder, _ = _prepare(tsv, WORD, caplog)
    tokenizer, src_vocab, tgt_vocab = PreparedCorpus(folder, WORD).vocabularies()
    assert ensure_prepared(tsv, WORD, (tokenizer, src_vocab, tgt_vocab), quiet=True) == folder  # the same: shared
    reordered = Vocab(src_vocab.itos[:4] + src_vocab.itos[4:][::-1])
    own = ensure_prepared(tsv, WORD, (tokenizer, reordered, tgt_vocab), quiet=True)
    assert own != folder
    corpus, learned = PreparedCorpus(own, WORD), PreparedCorpus(folder, WORD)
    assert reordered.decode(corpus.ids("train", "src")[3].tolist()) == \
        src_vocab.decode(learned.ids("train", "src")[3].tolist())


def test_the_same_seed_gives_the_same_batches_after_a_restart(tsv, tmp_path):
    cfg = config_from_dict({**TINY, "train": {**TINY["train"], "batch_size": 8}})
    first = load_data(cfg, str(tsv), tmp_path, None)
    again = load_data(cfg, str(tsv), tmp_path, None)  # as a new process would
    for epoch in (1, 2):
        a, b = epoch_batches(first, cfg, epoch), epoch_batches(again, cfg, epoch)
        assert [x.tolist() for x in a] == [x.tolist() for x in b]
    one, two = (epoch_batches(first, cfg, epoch) for epoch in (1, 2))
    assert [x.tolist() for x in one] != [x.tolist() for x in two]
    assert sorted(np.concatenate(list(one)).tolist()) == list(range(len(first.train)))


def test_two_processes_started_together_prepare_once(tmp_path):
    corpus = tmp_path / "big.tsv"
    corpus.write_text("\n".join(toy_lines() * 200) + "\n", encoding="utf-8")  # seconds to prepare: they overlap
    command = [sys.executable, "-m", "nmt", "prepare", str(Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"),
               "--data", str(corpus), "--set", "data.num_pairs=null", "--set", "data.drop_duplicates=false"]  # (200 copies)
    procs = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    logs = [err for _, err in outputs]
    assert sum("preparing it" in log for log in logs) == 1, logs
    assert outputs[0][0] == outputs[1][0]  # the same folder
    assert len([p for p in (tmp_path / "data" / "prepared").iterdir() if p.is_dir()]) == 1


def test_real_corpus_prepares_the_canonical_split(real_corpus, tmp_path):
    folder = ensure_prepared(real_corpus, seed_data(prepared_dir=str(tmp_path)), quiet=True)
    counts = PreparedCorpus(folder, seed_data()).counts
    # cleaning takes 503 of the md5 split's 162,252 training pairs (docs/data.md says which)
    assert (counts["train"], counts["valid"], counts["test"]) == (161_749, 1_753, 3_125)
    assert counts["train"] + sum(counts["dropped"].values()) == 162_252


def test_a_capped_validation_split_keeps_whole_sources_spread_over_it(tsv, caplog):
    corpus = PreparedCorpus(_prepare(tsv, WORD, caplog)[0], WORD)
    everything = corpus.pairs("train")  # the training split stands in for a large valid split
    capped = corpus.pairs("train", at_most=len(everything) // 4)
    assert len(everything) // 8 < len(capped) < len(everything) // 2
    kept = {tuple(p.src) for p in capped}
    assert [p for p in everything if tuple(p.src) in kept] == capped  # every translation of a kept source
    assert corpus.pairs("train", at_most=len(everything)) == everything


def test_a_script_splits_the_corpus_as_training_does_with_a_given_dev_set(tsv, tmp_path):
    """`load_splits` (what scripts read) and the prepared copy (what training reads) hold the same
    pairs in each split when data.valid replaces the md5 dev split and the overlap is dropped."""
    from nmt.data.corpus import load_splits

    lines = toy_lines()
    dev = tmp_path / "dev.tsv"
    dev.write_text("\n".join(lines[:5] + ["a sentence of my own\tune phrase à moi"]) + "\n", encoding="utf-8")
    cfg = dataclasses.replace(WORD, valid=str(dev))
    prepared = PreparedCorpus(ensure_prepared(tsv, cfg, quiet=True), cfg)
    splits = load_splits(tsv, cfg.num_pairs, cfg)
    for split in ("train", "valid", "test"):
        src, tgt = prepared.texts(split, "src"), prepared.texts(split, "tgt")
        assert [(src.text(i), tgt.text(i)) for i in range(len(src))] == [p.raw for p in getattr(splits, split)]
    assert [p.raw[0] for p in splits.valid] == [line.split("\t")[0] for line in lines[:5]] + ["a sentence of my own"]
    dev_sources = {" ".join(p.src) for p in splits.valid}
    assert not any(" ".join(p.src) in dev_sources for p in splits.train)  # data.drop_overlap
    assert sum(map(len, (splits.train, splits.valid, splits.test))) < len(lines) + 6


def test_a_large_held_out_split_keeps_about_its_bound_and_the_rest_trains(tsv, caplog, monkeypatch):
    """36 million pairs would hold 1% valid and 2% test by the md5 rule alone; above HELD_OUT_MAX
    (2 here) one source in k stays held out and the others train, in the prepared copy and in
    `load_splits` alike, all translations of a source together."""
    from nmt.data import corpus as corpus_module
    from nmt.data.corpus import load_splits

    unbounded = PreparedCorpus(_prepare(tsv, WORD, caplog)[0], WORD).counts
    monkeypatch.setattr(corpus_module, "HELD_OUT_MAX", 2)
    monkeypatch.setattr(prepare, "HELD_OUT_MAX", 2)
    monkeypatch.setattr(manifest, "HELD_OUT_MAX", 2)
    folder, log = _prepare(tsv, WORD, caplog)
    assert "test split holds 7 pairs, prepared before held-out splits were bounded to about 2" in log
    prepared = PreparedCorpus(folder, WORD)
    counts = prepared.counts
    assert counts["valid"] == unbounded["valid"] == 2 and counts["test"] < unbounded["test"] == 7
    assert sum(counts[s] for s in ("train", "valid", "test")) == sum(unbounded[s] for s in ("train", "valid", "test"))
    splits = load_splits(tsv, WORD.num_pairs, WORD)
    for split in ("train", "valid", "test"):
        src, tgt = prepared.texts(split, "src"), prepared.texts(split, "tgt")
        assert [(src.text(i), tgt.text(i)) for i in range(len(src))] == [p.raw for p in getattr(splits, split)]
        assert len(prepared.ids(split, "src")) == counts[split]
    trained = {" ".join(p.src) for p in splits.train}
    assert not any(" ".join(p.src) in trained for p in splits.valid + splits.test)
    words = prepared.training_words(1)
    assert all(word in words.stoi for p in splits.train for word in p.src)  # the moved pairs' words counted
    targets = word_counts(folder / TARGET_WORDS)  # the target side's too (markup's frequent words)
    assert targets == Counter(word for p in splits.train for word in p.tgt)
    assert list(words_by_count(folder / TARGET_WORDS)) == sorted(targets, key=lambda w: (-targets[w], w))
    _, log = _prepare(tsv, WORD, caplog)
    assert "preparing" not in log  # bounded now: a hit, though a split may hold a few more than the bound


# (the toy corpus's first column is English: read as French, the language rule would drop every pair)
@pytest.mark.parametrize("direction", [{}, {"src_lang": "fr", "tgt_lang": "en", "num_pairs": 500, "drop_language": 0.0}])
def test_a_large_corpus_split_by_workers_gives_the_stores_and_counts_one_process_gives(tmp_path, monkeypatch,
                                                                                      direction):
    from nmt.data import read_pass

    lines = toy_lines()
    lines[5], lines[9] = "a line without a tab", "only a source\t "  # skipped: counted the same way
    path = tmp_path / "toy.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = dataclasses.replace(WORD, **direction)
    monkeypatch.setattr(read_pass, "CHUNK_LINES", 50)  # many chunks, several in the workers' hands at once
    passes = {}
    for parallel in (False, True):
        monkeypatch.setattr(read_pass, "PARALLEL_FROM", 0 if parallel else float("inf"))
        monkeypatch.setattr(read_pass, "worker_pool", _spy(read_pass.worker_pool, used := []))
        out = tmp_path / f"parallel-{parallel}"
        out.mkdir()
        counts, src_words, tgt_words, cases, digests = read_pass.split_corpus(path, cfg, out, quiet=True)
        assert bool(used) == parallel
        passes[parallel] = counts, list(src_words.items()), list(tgt_words.items()), cases.forms(src_words), digests
    assert passes[True] == passes[False]
    assert passes[True][0]["skipped"] == 2


def _spy(function, calls: list):
    def spied(*args):
        calls.append(args)
        return function(*args)
    return spied


def test_training_lengths_are_kept_beside_the_stores_and_a_later_start_reads_them(tmp_path, monkeypatch):
    from nmt.data import batches
    from nmt.data.batches import StoredLengths, TrainingSet
    from nmt.data.epoch_order import EpochBatches, Lengths
    from nmt.data.indexed import IndexedArray, IndexedWriter

    rng = np.random.default_rng(1)
    for side in ("src", "tgt"):
        writer = IndexedWriter(tmp_path / side, np.uint16)
        for _ in range(300):
            writer.add(rng.integers(4, 50, size=int(rng.integers(1, 12))).tolist())
        writer.close()
    src, tgt = IndexedArray(tmp_path / "src"), IndexedArray(tmp_path / "tgt")
    cache = tmp_path / "train_lengths.8.npy"
    first = TrainingSet.from_stores(src, tgt, 8, 2, folder=tmp_path)
    plain = TrainingSet.from_stores(src, tgt, 8, 2)
    assert cache.is_file() and 0 < first.fitting() < 300
    assert all((a == b).all() for a, b in zip(first.lengths.arrays(), plain.lengths.arrays()))
    monkeypatch.setattr(IndexedArray, "sizes", lambda *a, **k: pytest.fail("read the sizes again"))
    again = TrainingSet.from_stores(src, tgt, 8, 2, folder=tmp_path)
    assert all((a == b).all() for a, b in zip(again.lengths.arrays(), plain.lengths.arrays()))
    # Read from the file a slice at a time (here 64 rows), never whole: the same as in memory.
    monkeypatch.setattr(batches, "STORED_SLICE", 64)
    stored, held = again.lengths, Lengths(*plain.lengths.arrays())
    assert isinstance(stored, StoredLengths) and isinstance(plain.lengths, Lengths)
    rows = np.random.default_rng(2).integers(0, 300, 500)  # repeats, out of order
    assert all((a == b).all() for a, b in zip(stored.take(rows), held.take(rows)))
    assert stored.too_long().tolist() == held.too_long().tolist() and stored.longest_target() == held.longest_target()
    epochs = [EpochBatches(lengths, 8, np.random.default_rng(3), batch_tokens) for lengths in (stored, held)
              for batch_tokens in (0, 40)]
    assert [b.tolist() for b in epochs[0]] == [b.tolist() for b in epochs[2]]
    assert [b.tolist() for b in epochs[1]] == [b.tolist() for b in epochs[3]]
    np.save(cache, np.zeros((2, 299), np.uint8))  # lengths of other stores are not trusted
    with pytest.raises(pytest.fail.Exception):
        TrainingSet.from_stores(src, tgt, 8, 2, folder=tmp_path)
