"""Starting a run from another run's weights (`nmt train --init-from RUN`): continued training on
new data, the way a general model is adapted to a domain.

The child keeps what its weights mean, the parent's model and tokenizer and vocabularies (a new
corpus is encoded with them, never with newly learned ones), and starts fresh what training
is: optimizer, schedule, progress, budget, best score. The parent is named in the child's
config (train.init_from and its sha256), so every checkpoint of the child names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.config import AUTO, Config, apply_overrides, config_from_dict, read_raw_config, saved_config
from nmt.data.manifest import VOCABULARY_KEYS, file_sha256
from nmt.data.tokenizer import Tokenizer, load_tokenizer
from nmt.data.vocab import Vocab
from nmt.errors import CheckpointError, ConfigError, NmtError
from nmt.model.checkpoint import read_checkpoint
from nmt.model.runs import resolve_checkpoint
from nmt.training.student_size import student_width

# The data keys whose change would call for other vocabularies than the parent's.
@dataclass(frozen=True)
class Parent:
    path: Path
    sha256: str
    state: dict[str, Any]
    cfg: Config
    weights: bool = True  # False: a distillation teacher, of which the run takes the tokenizer and vocabularies alone

    def vocabularies(self) -> tuple[Tokenizer, Vocab, Vocab]:
        src_vocab, tgt_vocab = Vocab(self.state["src_vocab"]), Vocab(self.state["tgt_vocab"])
        return load_tokenizer(self.cfg.data, self.path.parent, src_vocab, tgt_vocab), src_vocab, tgt_vocab


def load_parent(init_from: str, weights: bool = True) -> Parent:
    """The checkpoint `--init-from` names (a run directory: its best.pt), read and checked."""
    path = Path(init_from)
    if not path.exists():
        raise CheckpointError(f"--init-from {init_from}: no such run directory or checkpoint file")
    path = resolve_checkpoint(path)
    sha256 = file_sha256(path)  # before reading: a checkpoint rewritten meanwhile reads as another
    state = read_checkpoint(path)
    try:
        cfg = saved_config(state["config"])
    except ConfigError as e:
        raise CheckpointError(f"{path}: its config is invalid ({e})") from None
    return Parent(path, sha256, state, cfg, weights)


def child_config(parent: Parent, config_path: Path | None, overrides: list[str]) -> Config:
    """The child's config: the parent's model and vocabulary-shaping data keys; the other data
    keys, train.* and decode.* from `config_path` (default: the parent's), then `overrides`. What
    the file leaves out of model.* and data.* is the parent's, so one fine-tuning config serves
    any parent. A config or override that would change the model or the vocabularies is an
    error naming the key."""
    parent_raw = parent.cfg.to_dict()
    if config_path is None:
        raw = {**parent_raw, "train": {**parent_raw["train"], "precision": "auto"}}  # measured anew on this machine
    else:
        raw = read_raw_config(config_path)
        for section in ("model", "data"):
            written = raw.get(section) or {}
            if not isinstance(written, dict):
                raise ConfigError(f"{config_path}: {section} must be a mapping of keys to values")
            raw[section] = {**parent_raw[section], **written}
        try:
            given = config_from_dict(raw).to_dict()
        except ConfigError as e:
            raise ConfigError(f"{config_path}: {e}") from None
        _refuse_changes(parent_raw, given, str(config_path))
        raw = {**given, "model": parent_raw["model"]}
    try:
        changed = config_from_dict(apply_overrides(raw, overrides)).to_dict()
    except ConfigError as e:
        raise ConfigError(f"--init-from: {e}") from None
    _refuse_changes(parent_raw, changed, "--set")
    changed["train"].update(init_from=str(parent.path), init_from_sha256=parent.sha256)
    return config_from_dict(changed)


def student_config(teacher: Parent, config_path: Path, overrides: list[str], lineage: tuple[str, str]) -> Config:
    """A distilled student's config: its model and training from `config_path`, then `overrides`;
    its width, where the file leaves it `auto`, sized to the teacher (nmt/training/student_size.py);
    its data keys the teacher's (tokenizer, vocabularies, direction, length limit, held-out sets),
    but for those the file or the overrides set that shape no vocabulary (a key the file leaves
    `auto` is the teacher's, so that a student may take configs/default.yaml); `lineage` (the teacher
    as given, and the sha256 of its checkpoints) recorded as train.teacher and train.teacher_sha256."""
    raw = read_raw_config(config_path)
    written = raw.get("data") or {}
    if not isinstance(written, dict):
        raise ConfigError(f"{config_path}: data must be a mapping of keys to values")
    written = {key: value for key, value in written.items() if value != "auto"}  # e.g. configs/default.yaml's
    taught = {**teacher.cfg.to_dict()["data"], "path": None, "num_pairs": None, "weight": 1.0, "corpora": []}
    raw["data"] = {**taught, **written}
    try:
        child = config_from_dict(apply_overrides(raw, overrides)).to_dict()
    except ConfigError as e:
        raise ConfigError(f"{config_path}: {e}") from None
    _refuse_vocabulary_changes(taught, child["data"], f"{config_path} or --set", "a student", "teacher")
    child["train"].update(teacher=lineage[0], teacher_sha256=lineage[1])
    if child["model"]["hidden_size"] == AUTO:
        src_vocab, tgt_vocab = Vocab(teacher.state["src_vocab"]), Vocab(teacher.state["tgt_vocab"])
        width = student_width(config_from_dict(child).model, teacher.cfg.model, src_vocab, tgt_vocab)
        child["model"].update(embed_size=width, hidden_size=width)
    return config_from_dict(child)


def _refuse_changes(parent: dict[str, Any], child: dict[str, Any], where: str) -> None:
    for key, value in child["model"].items():
        if value != parent["model"].get(key):
            raise NmtError(f"--init-from keeps the parent's model, but {where} sets model.{key}={value!r} (the "
                           f"parent has {parent['model'].get(key)!r}); drop it, or train a new model without "
                           f"--init-from")
    _refuse_vocabulary_changes(parent["data"], child["data"], where, "--init-from", "parent")


def _refuse_vocabulary_changes(parent: dict[str, Any], child: dict[str, Any], where: str, keeper: str,
                               whose: str) -> None:
    for key in VOCABULARY_KEYS:
        if child.get(key) != parent.get(key):
            raise NmtError(f"{keeper} keeps the {whose}'s tokenizer and vocabularies, but {where} sets "
                           f"data.{key}={child.get(key)!r} (the {whose} has {parent.get(key)!r}), which would "
                           f"need new ones; drop it")
