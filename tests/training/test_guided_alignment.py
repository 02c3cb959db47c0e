"""Guided alignment (train.guided_alignment): eflomal's links of the prepared training pairs, stored
once beside them; the gold attention a batch carries; a loss that pulls the attention onto it."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY
from helpers.linked_pairs import linked_batch, mass_on_links, trained_on

from nmt.config import config_from_dict
from nmt.data.batches import Example, collate, gold_attention
from nmt.data.corpus import resolve_corpus
from nmt.data.indexed import IndexedArray
from nmt.data.links import LINKS, RECORD, training_links
from nmt.data.prepare import ensure_prepared
from nmt.data.vocab import Vocab

pytest.importorskip("eflomal")



def test_gold_attention_spreads_a_target_over_its_linked_sources_and_links_eos():
    linked = Example([5, 6, 7, 2], [8, 9, 2], links=np.array([[0, 0], [1, 0], [2, 1], [7, 7]]))
    plain = Example([5, 2], [8, 2])
    gold = gold_attention([linked, plain], 3)
    assert gold.shape == (2, 3, 4)
    assert gold[0].tolist() == [[0.5, 0.5, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]  # (the link out of range is dropped)
    assert not gold[1].any()  # an example without links is not guided
    assert collate([plain], 0, 1).alignment is None and collate([linked, plain], 0, 1).alignment is not None


@pytest.mark.parametrize("decoder", ["parallel", "stepwise"])
def test_the_loss_pulls_the_attention_onto_the_links(decoder):
    sv, tv, batch = linked_batch()
    mass = {}
    for weight in (0.0, 1.0):
        cfg = config_from_dict({**TINY, "model": {**TINY["model"], "decoder": decoder},
                                "train": {**TINY["train"], "lr": 0.01, "guided_alignment": weight}})
        model = trained_on(batch, cfg, sv, tv)
        with torch.no_grad():
            _, weights, _ = model(batch.src, batch.src_lens, batch.tgt_in, attention=True)
        mass[weight] = mass_on_links(weights, batch)  # attention on the links
    assert mass[1.0] > 0.8 and mass[1.0] > mass[0.0] + 0.3, mass


def test_eflomals_links_are_stored_once_beside_the_prepared_corpus(toy_zip):
    cfg = config_from_dict({**TINY, "train": {**TINY["train"], "guided_alignment": 0.1}})
    folder = ensure_prepared(resolve_corpus(str(toy_zip), cfg.data), cfg.data, quiet=True)
    links = training_links(folder)
    src, tgt = IndexedArray(folder / "train.src"), IndexedArray(folder / "train.tgt")
    sv, tv = Vocab.load(folder / "src_vocab.txt"), Vocab.load(folder / "tgt_vocab.txt")
    assert len(links) == len(src)
    # the toy language is word for word: "cat" and "chat", "see" and "vois" are linked where both occur
    found = {("cat", "chat"): [0, 0], ("see", "vois"): [0, 0]}
    for i in range(len(src)):
        words, targets = [sv.itos[x] for x in src[i]], [tv.itos[x] for x in tgt[i]]
        pairs = {(words[s], targets[t]) for s, t in links[i].reshape(-1, 2)}
        for key, count in found.items():
            if key[0] in words and key[1] in targets:
                count[0] += 1
                count[1] += key in pairs
    assert all(both > 20 and linked >= 0.9 * both for both, linked in found.values()), found
    stored = os.stat(folder / f"{LINKS}.bin").st_mtime_ns
    training_links(folder)  # the record matches: read, not aligned again
    assert os.stat(folder / f"{LINKS}.bin").st_mtime_ns == stored
    (folder / RECORD).write_text("{}")  # a record of other ids: aligned again
    assert len(training_links(folder)) == len(src) and (folder / RECORD).read_text() != "{}"


def test_a_large_corpus_has_an_even_sample_aligned_and_an_interrupted_alignment_is_redone_alone(
        toy_zip, monkeypatch, caplog):
    """Past links.MOST_ALIGNED pairs, every k-th pair is aligned (the others stored without links);
    an alignment stopped half way leaves the prepared ids as they were and no record, so the next
    start aligns again, and only that."""
    from nmt.data import links as links_module

    cfg = config_from_dict({**TINY, "train": {**TINY["train"], "guided_alignment": 0.1}})
    folder = ensure_prepared(resolve_corpus(str(toy_zip), cfg.data), cfg.data, quiet=True)
    ids = {name: (folder / name).read_bytes() for name in ("train.src.bin", "train.tgt.bin")}
    src = IndexedArray(folder / "train.src")
    most = len(src) // 3
    monkeypatch.setattr(links_module, "MOST_ALIGNED", most)
    real = links_module.agreed_links

    def stopped(src_lines, tgt_lines):
        for n, links in enumerate(real(src_lines, tgt_lines)):
            if n == most // 2:
                raise KeyboardInterrupt
            yield links

    monkeypatch.setattr(links_module, "agreed_links", stopped)
    with pytest.raises(KeyboardInterrupt):
        training_links(folder)
    assert not (folder / RECORD).exists()
    assert {name: (folder / name).read_bytes() for name in ids} == ids  # the prepared corpus as it was
    monkeypatch.setattr(links_module, "agreed_links", real)
    with caplog.at_level("INFO"):
        links = training_links(folder)
    every = -(-len(src) // most)
    assert len(links) == len(src) and json.loads((folder / RECORD).read_text())["every"] == every
    aligned = [i for i in range(len(src)) if len(links[i])]
    assert aligned and all(i % every == 0 for i in aligned) and len(aligned) > 0.8 * len(src) / every
    assert f"one in {every} of {len(src):,}" in caplog.text
    stored = os.stat(folder / f"{LINKS}.bin").st_mtime_ns
    training_links(folder)  # the record matches: read, not aligned again
    assert os.stat(folder / f"{LINKS}.bin").st_mtime_ns == stored


def test_nmt_prepare_aligns_too_where_training_will_read_the_links(toy_zip, tmp_path):
    """`nmt prepare` with guided alignment leaves the links beside the corpus, so the first `nmt
    train` starts warm; without it, nothing is aligned."""
    from typer.testing import CliRunner

    from nmt.cli import app

    config = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"
    folders = {}
    for weight in (0.0, 0.1):
        result = CliRunner().invoke(app, ["prepare", str(config), "--data", str(toy_zip),
                                          "--set", f"train.guided_alignment={weight}",
                                          "--set", f"data.prepared_dir={tmp_path / str(weight)}"])
        assert result.exit_code == 0, result.output
        folders[weight] = Path(result.output.strip().splitlines()[-1])
    assert not (folders[0.0] / RECORD).exists()
    assert (folders[0.1] / RECORD).is_file() and (folders[0.1] / f"{LINKS}.bin").is_file()
