from pathlib import Path

import pytest
import yaml
from conftest import REPO, TINY

from nmt.config import load_config
from nmt.errors import ConfigError


def _write(tmp_path: Path, raw) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw) if not isinstance(raw, str) else raw, encoding="utf-8")
    return path


def _with(section, key, value):
    raw = {s: dict(v) for s, v in TINY.items()}
    raw[section][key] = value
    return raw


@pytest.mark.parametrize("raw, message", [
    (_with("train", "lrr", 0.1), r"train: unknown key\(s\) \['lrr'\]"),
    (_with("model", "hidden_size", "big"), "model.hidden_size must be a number or auto"),
    (_with("model", "hidden_size", "auto"), "model.embed_size and model.hidden_size are auto together"),
    (_with("model", "hidden_size", 2.5), "model.hidden_size must be int or auto"),
    (_with("model", "hidden_size", 0), r"model.hidden_size must be > 0 \(got 0\)"),
    (_with("model", "num_layers", -1), "model.num_layers must be > 0"),
    (_with("train", "lr", 0), "train.lr must be > 0"),
    (_with("train", "batch_size", 2.5), "train.batch_size must be int"),
    (_with("model", "attention", "luong"), r"Invalid setting for `model.attention`.*\{additive, dot\}"),
    (_with("train", "device", "tpu"), "Invalid setting for `train.device`"),
    (_with("data", "max_len", 1), "data.max_len must be >= 2"),
    (_with("model", "dropout", 1.5), r"model.dropout must be in \[0, 1\)"),
    (_with("train", "lr_schedule", "cosine"), r"Invalid setting for `train.lr_schedule`.*\{constant, linear\}"),
    (_with("train", "lr_schedule", "plateau"), r"train.lr_schedule: plateau was removed .* needs the nmt docs/results.md names"),
    (_with("train", "lr_decay_factor", 0.3), "train.lr_decay_factor was removed"),
    (_with("model", "bidirectional", "yes"), "model.bidirectional must be bool"),
    (_with("model", "decoder", "stacked"), r"Invalid setting for `model.decoder`.*\{stepwise, parallel\}"),
    ({**TINY, "model": {**TINY["model"], "decoder": "parallel", "input_feeding": True}},
     "model.decoder: parallel feeds nothing back.*model.input_feeding: false"),
    (_with("model", "residual", True), "model.residual was removed"),
    (_with("model", "attention_heads", 5), "model.attention_heads was removed"),
    (_with("model", "embed_dropout", 1.0), r"model.embed_dropout must be in \[0, 1\)"),
    ({**TINY, "model": {**TINY["model"], "embed_size": 8, "hidden_size": 16, "tie_embeddings": True}},
     r"model.tie_embeddings needs model.embed_size == model.hidden_size \(8 != 16\)"),
    ({**TINY, "model": {**TINY["model"], "hidden_size": 15, "bidirectional": True}},
     "model.bidirectional needs an even model.hidden_size"),
    ({"data": {"tokenizer": "word"}, "model": {}}, "data.protect .on by default. needs data.tokenizer: subword"),
    ({"model": TINY["model"]}, "missing required section `data`"),
    ({**TINY, "optim": {}}, r"unknown section\(s\) \['optim'\]"),
    ("- just\n- a list\n", "must be a YAML mapping"),
    ("model: [unclosed\n", "not valid YAML"),
])
def test_bad_configs_name_the_key_and_file(tmp_path, raw, message):
    path = _write(tmp_path, raw)
    with pytest.raises(ConfigError, match=message) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_overrides(tmp_path):
    path = _write(tmp_path, TINY)
    cfg = load_config(path, ["train.lr=0.5", "model.attention=dot", "data.num_pairs=null", "train.epochs=7"])
    assert (cfg.train.lr, cfg.model.attention, cfg.data.num_pairs, cfg.train.epochs) == (0.5, "dot", None, 7)
    with pytest.raises(ConfigError, match="expected section.key=value"):
        load_config(path, ["lr=0.5"])
    with pytest.raises(ConfigError, match="unknown section 'optim'"):
        load_config(path, ["optim.lr=0.5"])
    with pytest.raises(ConfigError, match="train.epochs must be a number or auto"):
        load_config(path, ["train.epochs=many"])


@pytest.mark.parametrize("name", ["default", "tiny", "d2l", "large", "gpu", "quickstart"])
def test_shipped_configs_load(name):
    cfg = load_config(REPO / "configs" / f"{name}.yaml")
    assert cfg.model.attention == "additive"


def test_d2l_config_is_the_seed_experiment():
    cfg = load_config(REPO / "configs" / "d2l.yaml")
    m, t, d = cfg.model, cfg.train, cfg.data
    assert (m.embed_size, m.hidden_size, m.num_layers, m.dropout) == (32, 32, 2, 0.0)
    assert (t.batch_size, t.lr, t.epochs, d.max_len, d.num_pairs) == (64, 0.005, 500, 10, 50_000)
    assert not (m.bidirectional or m.bridge or m.input_feeding or m.tie_embeddings)  # the seed's design
    assert m.decoder == "stepwise" and not d.protect
    assert t.lr_schedule == "constant"
    assert d.tokenizer == "word" and d.min_freq == 3  # d2l's word vocabulary


def test_the_dataclass_defaults_are_the_default_configs():
    """One set of defaults: `Config()` is configs/default.yaml's config, but for the keys the recipe
    decides (`auto` there), and a config says only what it changes."""
    from nmt.config import Config

    default, written = load_config(REPO / "configs" / "default.yaml").to_dict(), Config().to_dict()
    auto = {(s, k) for s, keys in default.items() for k, v in keys.items() if v == "auto"}
    assert auto  # (the recipe's keys exist)
    assert {(s, k): v for s, keys in written.items() for k, v in keys.items() if (s, k) not in auto} == \
        {(s, k): v for s, keys in default.items() for k, v in keys.items() if (s, k) not in auto}


def test_a_run_starts_with_every_auto_decided():
    from nmt.config import config_from_dict, require_decided
    from nmt.data.vocab import SPECIALS, Vocab
    from nmt.model.seq2seq import build_model
    vocab = Vocab(list(SPECIALS) + ["a", "b"])
    raw = yaml.safe_load((REPO / "configs/default.yaml").read_text())
    undecided = config_from_dict(raw)
    with pytest.raises(ConfigError, match="model.alignment_head.*still auto"):
        require_decided(undecided)
    with pytest.raises(ConfigError, match="alignment_head must be decided"):
        build_model(undecided.model, vocab, vocab)
    student = config_from_dict({**raw, "model": {**raw["model"], "embed_size": "auto", "hidden_size": "auto"}})
    with pytest.raises(ConfigError, match="model.alignment_head, model.embed_size, model.hidden_size, train.precision: still auto"):
        require_decided(student)
