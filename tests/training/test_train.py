import json

import pytest
import torch
from conftest import TINY

from nmt.config import config_from_dict
from nmt.data.batches import collate, encode_pairs
from nmt.data.corpus import Pair
from nmt.data.prepared_corpus import word_counts
from nmt.data.vocab import Vocab
from nmt.inference.decoding.search import Sources, Specials
from helpers.searches import greedy
from nmt.inference.translator import Translator
from nmt.inference.text.words import FREQUENT_TOP
from nmt.model import build_model
from nmt.model.checkpoint import load_model, save_checkpoint
from nmt.training.loop import train, train_step

HANDFUL = [("go .", "va !"), ("hi .", "salut ."), ("run !", "cours !"), ("i won !", "j'ai gagné !"),
           ("he is calm .", "il est calme ."), ("i am home .", "je suis chez moi ."),
           ("we see a big red boat .", "nous voyons un grand bateau rouge ."), ("wait !", "attends !")]


def test_tiny_model_overfits_a_handful_of_pairs_exactly():
    torch.manual_seed(0)
    pairs = [Pair(en.split(), fr.split()) for en, fr in HANDFUL]
    sv, tv = Vocab.build((p.src for p in pairs), 1), Vocab.build((p.tgt for p in pairs), 1)
    cfg = config_from_dict({**TINY, "train": {**TINY["train"], "lr": 0.01}})
    model = build_model(cfg.model, sv, tv)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
    batch = collate(encode_pairs(pairs, sv, tv), tv.pad_id, tv.bos_id)
    losses = [train_step(model, [batch], optimizer, cfg, tv.pad_id)[0] for _ in range(150)]
    assert losses[-1] < 0.05 < losses[0]
    model.eval()
    outputs = greedy(model, Sources(batch.src, batch.src_lens, torch.full((8,), 12)), Specials(tv.bos_id, tv.eos_id))
    assert [" ".join(tv.decode(o.tokens)) for o in outputs] == [fr for _, fr in HANDFUL]


def _train(toy_zip, out_dir, **train_overrides):
    cfg = config_from_dict({**TINY, "train": {**TINY["train"], **train_overrides}})
    out_dir.mkdir()
    best = train(cfg, out_dir, str(toy_zip), quiet=True)
    return best, [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]


def test_training_writes_a_run_and_learns(toy_zip, tmp_path):
    best, metrics = _train(toy_zip, tmp_path / "run", epochs=4)
    run = tmp_path / "run"
    for name in ("config.yaml", "src_vocab.txt", "tgt_vocab.txt", "metrics.jsonl", "last.pt", "best.pt"):
        assert (run / name).is_file(), name
    assert [m["epoch"] for m in metrics] == [1, 2, 3, 4]
    assert metrics[-1]["val_loss"] < metrics[0]["val_loss"]
    assert best["val_bleu"] == max(m["val_bleu"] for m in metrics)
    loaded = load_model(run)
    assert loaded.path == run / "best.pt" and loaded.state["progress"]["step"] == best["step"]
    assert loaded.tgt_vocab == Vocab.load(run / "tgt_vocab.txt")
    # both sides' word counts: the translator reads the frequent words its alignments step past
    frequent = Translator.from_loaded(loaded, torch.device("cpu")).frequent
    counted = [w for w in word_counts(run / "target_words.tsv") if any(c.isalnum() for c in w)]
    assert frequent is not None and frequent.target == set(counted[:FREQUENT_TOP]) and "." not in frequent.target
    (run / "target_words.tsv").unlink()  # a run trained before they were kept: alignments as they were
    assert Translator.from_loaded(loaded, torch.device("cpu")).frequent is None


def test_same_seed_same_loss_curve(toy_zip, tmp_path):
    _, first = _train(toy_zip, tmp_path / "a", epochs=2)
    _, second = _train(toy_zip, tmp_path / "b", epochs=2)
    assert [m["val_loss"] for m in first] == [m["val_loss"] for m in second]


def test_step_budget_stops_and_saves(toy_zip, tmp_path):
    best, metrics = _train(toy_zip, tmp_path / "run", epochs=50, max_steps=7)
    assert metrics[-1]["step"] == 7 and metrics[-1]["at"] == "budget"
    assert (tmp_path / "run" / "best.pt").is_file()


def test_checkpoint_round_trip_gives_identical_outputs(tmp_path):
    pairs = [Pair(en.split(), fr.split()) for en, fr in HANDFUL]
    sv, tv = Vocab.build((p.src for p in pairs), 1), Vocab.build((p.tgt for p in pairs), 1)
    cfg = config_from_dict({**TINY, "model": {**TINY["model"], "dropout": 0.3}})
    model = build_model(cfg.model, sv, tv).eval()
    save_checkpoint(tmp_path / "m.pt", model, None, cfg, sv, tv, {"step": 0})
    loaded = load_model(tmp_path / "m.pt")
    batch = collate(encode_pairs(pairs, sv, tv), tv.pad_id, tv.bos_id)
    assert loaded.cfg == cfg and loaded.src_vocab == sv and loaded.tgt_vocab == tv
    assert not loaded.model.training
    assert torch.equal(model(batch.src, batch.src_lens, batch.tgt_in),
                       loaded.model(batch.src, batch.src_lens, batch.tgt_in))


def test_early_stopping_on_validation_bleu(toy_zip, tmp_path):
    # lr 0 never improves after the first validation: patience 2 stops two validations later
    best, metrics = _train(toy_zip, tmp_path / "run", epochs=20, lr=1e-12, patience=2)
    assert len(metrics) == 3 and best["step"] == metrics[0]["step"]


def test_early_stopping_waits_while_the_validation_loss_still_falls():
    from nmt.training.progress import Progress

    progress = Progress()
    stale = []
    for bleu, loss in [(30.0, 2.0), (29.0, 1.9), (30.0, 1.8), (29.5, 1.85), (30.5, 1.9), (30.0, 1.8)]:
        progress.record({"val_bleu": bleu, "val_loss": loss})
        stale.append(progress.stale)
    # a lower loss (1.9, 1.8) or a better BLEU (30.5) resets the count; a loss equal to the lowest does not
    assert stale == [0, 0, 0, 1, 0, 1]
    assert progress.best == {"val_bleu": 30.5, "val_loss": 1.9} and progress.lowest_loss == 1.8
    resumed = Progress()
    resumed.load_state_dict(progress.state_dict())
    assert resumed.lowest_loss == 1.8 and resumed.stale == 1
    old = {k: v for k, v in progress.state_dict().items() if k != "lowest_loss"}  # a run saved before the key
    resumed.load_state_dict(old)
    assert resumed.lowest_loss == 1.9  # its best record's loss


def test_token_batches_train_and_size_the_schedule_by_their_count(toy_zip, tmp_path):
    best, metrics = _train(toy_zip, tmp_path / "run", epochs=1, batch_tokens=150, lr_schedule="linear")
    steps = metrics[-1]["step"]
    assert metrics[-1]["at"] == "epoch end" and steps > 0
    # The linear schedule knew the epoch's length: its last step ran at 1/steps of the peak rate.
    assert metrics[-1]["lr"] == pytest.approx(TINY["train"]["lr"] / steps)
    assert len(metrics) == 1
