"""Several training corpora in one run: drawn by weight every epoch (counted), tagged with one reserved
source piece, prepared once each, resumed exactly, and drawn alike by two torchrun ranks."""

import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from conftest import TINY, toy_lines, write_corpus_zip

from nmt.config import CorpusSpec, config_from_dict
from nmt.errors import ConfigError
from nmt.training.run_data import epoch_batches, load_data

SUBWORD = {**TINY["data"], "tokenizer": "subword", "vocab_size": 320, "max_len": 24}


@pytest.fixture
def corpora(tmp_path):
    main = write_corpus_zip(tmp_path / "toy.zip", toy_lines())
    extra = tmp_path / "extra.tsv"  # every third toy line: pieces the main corpus's model knows
    extra.write_text("".join(line + "\n" for line in toy_lines()[::3]), encoding="utf-8")
    return main, extra


def _cfg(corpora=(), weight=1.0, **train):
    return config_from_dict({**TINY, "data": {**SUBWORD, "corpora": list(corpora), "weight": weight},
                             "train": {**TINY["train"], **train}})


def _load(cfg, main, out):
    out.mkdir(exist_ok=True)
    return load_data(cfg, str(main), out, None)


def _drawn(data, cfg, epoch):
    """How often each row of the mix is drawn in `epoch`, and the rows' corpora."""
    rows = np.concatenate(list(epoch_batches(data, cfg, epoch)))
    return np.bincount(rows, minlength=len(data.train)), data.train.part_of(np.arange(len(data.train)))


def test_spec_reads_path_weight_and_tag():
    assert CorpusSpec.parse("bt.tsv:0.5:<bt>") == CorpusSpec("bt.tsv", 0.5, "<bt>")
    assert CorpusSpec.parse("a:b.tsv:2") == CorpusSpec("a:b.tsv", 2.0)  # a path may hold a colon
    assert CorpusSpec.parse("plain.tsv") == CorpusSpec("plain.tsv")
    for bad in ("bt.tsv:0", "bt.tsv:-1:<bt>", "bt.tsv:1:<b t>"):
        with pytest.raises(ConfigError, match="bt.tsv"):
            CorpusSpec.parse(bad)
    with pytest.raises(ConfigError, match="a corpus tag needs data.tokenizer: subword"):
        config_from_dict({**TINY, "data": {**TINY["data"], "tokenizer": "word", "corpora": ["x.tsv:1:<bt>"]}})


def test_weights_draw_each_corpus_as_often_as_asked(corpora, tmp_path):
    main, extra = corpora
    cfg = _cfg([f"{extra}:0.5:<bt>"], weight=2.0)
    data = _load(cfg, main, tmp_path / "run")
    counts, parts = _drawn(data, cfg, 1)
    sizes = [len(p.pairs) for p in data.train.parts]
    assert sizes[1] > 100 and (parts == 1).sum() == sizes[1]
    fits = data.train.lengths.src > 0  # the pairs within data.max_len: no other is ever batched
    assert (counts[(parts == 0) & fits] == 2).all() and (counts[~fits] == 0).all()  # weight 2: every pair twice
    extra_counts = counts[parts == 1]
    drawn = round(0.5 * sizes[1])  # a half of the rows, once each, those within data.max_len batched
    assert set(extra_counts.tolist()) == {0, 1} and drawn - (~fits[parts == 1]).sum() <= extra_counts.sum() <= drawn
    again, _ = _drawn(data, cfg, 1)
    other, _ = _drawn(data, cfg, 2)
    assert (again == counts).all() and not (other[parts == 1] == extra_counts).all()  # by (seed, epoch)


def test_a_tag_is_one_piece_before_its_corpus_sources_only(corpora, tmp_path):
    main, extra = corpora
    cfg = _cfg([f"{extra}:1:<bt>"])
    data = _load(cfg, main, tmp_path / "run")
    tag = data.src_vocab.stoi["<bt>"]
    assert "<bt>" not in data.tgt_vocab.stoi  # the decoder has no such piece to write
    assert "<bt>" in data.tokenizer.source_tokens(["<bt> I see a cat."])[0]  # never split
    parts = data.train.part_of(np.arange(len(data.train)))
    examples = data.train.examples(np.arange(len(data.train)))
    assert all((ex.src[0] == tag) == (part == 1) for ex, part in zip(examples, parts))
    assert all(tag not in ex.src[1:] for ex in examples)
    batch = data.batch(np.flatnonzero(parts == 1)[:4])
    assert (batch.src[:, 0] == tag).all()  # it reaches the encoder


def test_every_weight_one_draws_as_a_single_corpus(corpora, tmp_path):
    main, _ = corpora
    single = _load(_cfg(), main, tmp_path / "a")
    assert not hasattr(single.train, "parts")
    batches = epoch_batches(single, _cfg(), 1)
    mixed = _load(_cfg(weight=1.0), main, tmp_path / "b")
    assert all((x == y).all() for x, y in zip(batches, epoch_batches(mixed, _cfg(), 1)))


def test_editing_one_corpus_prepares_only_its_copy_again(corpora, tmp_path, caplog):
    main, extra = corpora
    cfg = _cfg([f"{extra}:1:<bt>"])
    _load(cfg, main, tmp_path / "a")
    extra.write_text(extra.read_text(encoding="utf-8") + "I see a cat now.\tJe vois un chat maintenant.\n",
                     encoding="utf-8")
    caplog.clear()
    with caplog.at_level("INFO"):
        data = _load(cfg, main, tmp_path / "b")
    preparing = [r.getMessage() for r in caplog.records if "preparing it" in r.getMessage()]
    assert len(preparing) == 1 and "changed" in preparing[0]  # the extra corpus, not the main one
    assert any(m.startswith("prepared data: ") and "toy-" in m for m in caplog.messages)
    assert len(data.train.parts[1].pairs) > 0


def _nmt(*args, cwd):
    proc = subprocess.run([sys.executable, "-m", "nmt", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=300)
    return proc


def _params(run):
    return torch.load(run / "last.pt", weights_only=True)["model"]


def _config(path, corpora, **train):
    raw = {**TINY, "data": {**SUBWORD, "corpora": corpora},
           "model": {**TINY["model"], "dropout": 0.3},
           "train": {**TINY["train"], "precision": "fp32", "eval_every": 0, **train}}
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def test_resume_mid_epoch_with_two_weighted_corpora_is_exact(corpora, tmp_path):
    main, extra = corpora
    mix = [f"{extra}:1.5:<bt>"]
    full = _nmt("train", _config(tmp_path / "full.yaml", mix, max_steps=30), "--data", main, "--out", "full",
                "--quiet", cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    half = _nmt("train", _config(tmp_path / "half.yaml", mix, max_steps=17), "--data", main, "--out", "half",
                "--quiet", cwd=tmp_path)
    assert half.returncode == 0, half.stderr
    resumed = _nmt("train", "--resume", "half", "--data", main, "--set", "train.max_steps=30", "--quiet",
                   cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    ours, theirs = _params(tmp_path / "half"), _params(tmp_path / "full")
    assert max((ours[k] - theirs[k]).abs().max().item() for k in ours) == 0.0
    log = (tmp_path / "full" / "train.log").read_text()
    assert "corpora: toy.zip" in log and "x 1.5, tag <bt>" in log  # the log says what the run drew


def test_two_ranks_draw_what_one_process_draws(corpora, tmp_path):
    main, extra = corpora
    mix = [f"{extra}:0.5:<bt>"]
    no_dropout = {"max_steps": 8}
    single = _config(tmp_path / "single.yaml", mix, batch_size=32, **no_dropout)
    ddp = _config(tmp_path / "ddp.yaml", mix, **no_dropout)
    for path in (single, ddp):
        raw = yaml.safe_load(path.read_text())
        raw["model"]["dropout"] = 0.0  # DDP equals one process only when neither draws dropout masks
        path.write_text(yaml.safe_dump(raw))
    one = _nmt("train", single, "--data", main, "--out", "single", "--quiet", cwd=tmp_path)
    two = _nmt("train", ddp, "--data", main, "--out", "ddp", "--nproc", 2, "--quiet", cwd=tmp_path)
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    ours, theirs = _params(tmp_path / "ddp"), _params(tmp_path / "single")
    assert max((ours[k] - theirs[k]).abs().max().item() for k in ours) < 1e-4  # float noise only


def test_bad_corpora_are_one_line_each(corpora, tmp_path):
    main, extra = corpora
    config = _config(tmp_path / "c.yaml", [])
    cases = [(["--data", f"{main}:1:<bt>"], "the first --data"),
             (["--data", main, "--data", f"{tmp_path}/missing.tsv:0.5"], "missing.tsv"),
             (["--data", main, "--data", f"{extra}:0"], "weight must be > 0")]
    for args, expected in cases:
        proc = _nmt("train", config, *args, "--out", "bad", "--quiet", cwd=tmp_path)
        assert proc.returncode == 1 and expected in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_eval_names_the_corpora_a_run_trained_on():
    from nmt.evaluation.report import lineage

    cfg = config_from_dict({**TINY, "data": {**SUBWORD, "path": "real.tsv", "weight": 2.0,
                                             "corpora": ["bt.tsv:1:<bt>", "general.tsv:0.5"]}})
    assert lineage(cfg) == " | trained on real.tsv x 2 + bt.tsv x 1 (tag <bt>) + general.tsv x 0.5"
    assert lineage(config_from_dict({**TINY, "data": SUBWORD})) == ""
