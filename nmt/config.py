"""Typed, validated configuration: one frozen dataclass per YAML section.

Unknown keys, missing required keys, wrong types and out-of-range values all raise
`ConfigError` with the dotted key and the file, so a typo never silently keeps a default.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from nmt.errors import ConfigError

D2L_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
D2L_SHA1 = "94646ad1522d915e7b0f9296181140edcf86a4f5"
ATTENTION_TYPES = ("additive", "dot")
DECODERS = ("stepwise", "parallel")
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16")
LR_SCHEDULES = ("constant", "linear")
TOKENIZERS = ("word", "subword")
SUBWORD_TYPES = ("unigram", "bpe")
# A key set to `auto` is decided by the recipe for the corpus a run trains on (nmt/training/recipe.py).
AUTO = "auto"
RECIPE_KEYS = ("data.vocab_size", "data.max_len", "model.dropout", "model.embed_dropout", "model.output_dropout",
               "train.label_smoothing", "train.lr", "train.epochs", "train.guided_alignment", "model.alignment_head")
# A width set to `auto` is a distilled student's, decided from its teacher by `nmt distill`
# (nmt/training/student_size.py): the widest at which it holds a quarter of the teacher's parameters.
STUDENT_KEYS = ("model.embed_size", "model.hidden_size")
# A language code as it names files (PREFIX.en) and sacreBLEU tokenizers: letters, then -REGION.
LANGUAGE_CODE = re.compile(r"[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})?")


def _decided(values: dict[str, Any]) -> dict[str, Any]:
    """The values that are numbers: an `auto` is checked once the recipe has decided it."""
    return {key: value for key, value in values.items() if value != AUTO}


def _auto_or_number(section: str, obj: Any) -> None:
    """A recipe key or a student's width holds a number or `auto`, no other string."""
    for dotted in RECIPE_KEYS + STUDENT_KEYS:
        key_section, key = dotted.split(".")
        value = getattr(obj, key) if key_section == section else None
        if isinstance(value, str) and value != AUTO:
            kind = "true, false" if isinstance(getattr(type(obj), key, None), bool) else "a number"  # (by its default)
            raise ConfigError(f"{section}.{key} must be {kind} or auto (got {value!r})")


def _positive(section: str, **values: float) -> None:
    for key, value in _decided(values).items():
        if value <= 0:
            raise ConfigError(f"{section}.{key} must be > 0 (got {value})")


def _at_least(section: str, low: int, **values: float) -> None:
    for key, value in _decided(values).items():
        if value < low:
            raise ConfigError(f"{section}.{key} must be >= {low} (got {value})")


_INTERVALS = {"[0, 1)": lambda v: 0 <= v < 1, "[0, 1]": lambda v: 0 <= v <= 1, "(0, 1)": lambda v: 0 < v < 1}


def _within(section: str, interval: str, **values: float) -> None:
    """Each value in `interval`: "[0, 1)", "[0, 1]" or "(0, 1)"."""
    for key, value in _decided(values).items():
        if not _INTERVALS[interval](value):
            raise ConfigError(f"{section}.{key} must be in {interval} (got {value})")


def _one_of(section: str, choices: tuple[str, ...], **values: str) -> None:
    for key, value in values.items():
        if value not in choices:
            raise ConfigError(f"Invalid setting for `{section}.{key}`: {value!r}. "
                              f"Valid choices: {{{', '.join(choices)}}}")


@dataclass(frozen=True)
class CorpusSpec:
    """One training corpus of a mix: "PATH[:WEIGHT[:TAG]]" (a weight of 2 draws each pair twice an
    epoch, 0.5 a random half; a tag is put before each source as one reserved piece)."""
    path: str
    weight: float = 1.0
    tag: str | None = None

    @classmethod
    def parse(cls, spec: str, where: str = "--data") -> CorpusSpec:
        if not isinstance(spec, str) or not spec.strip():
            raise ConfigError(f"{where}: expected PATH[:WEIGHT[:TAG]] (got {spec!r})")
        parts = spec.rsplit(":", 2)  # from the right: a path may hold colons of its own
        if len(parts) == 3 and _is_number(parts[1]):
            return cls(parts[0], float(parts[1]), parts[2] or None).checked(spec, where)
        if len(parts) >= 2 and _is_number(parts[-1]):
            return cls(spec.rsplit(":", 1)[0], float(parts[-1])).checked(spec, where)
        return cls(spec).checked(spec, where)

    def checked(self, spec: str, where: str) -> CorpusSpec:
        if self.weight <= 0:
            raise ConfigError(f"{where} {spec!r}: the weight must be > 0 (got {self.weight:g})")
        if self.tag is not None and (any(c.isspace() for c in self.tag) or self.tag.startswith("⦅")):
            raise ConfigError(f"{where} {spec!r}: a tag is one token without spaces, such as <bt> "
                              f"(got {self.tag!r})")
        return self


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class DataConfig:
    path: str | None = None  # a zip, a tab-separated file, or PREFIX of PREFIX.<src_lang> + PREFIX.<tgt_lang>
    url: str = D2L_URL
    sha1: str | None = D2L_SHA1  # checksum of the downloaded zip; null: no check
    src_lang: str = "en"  # the language of the corpus's first column (or of PREFIX.<src_lang>)
    tgt_lang: str = "fr"  # the language of its second column
    reverse: bool = False  # translate from tgt_lang into src_lang (French to English from fra.txt)
    num_pairs: int | None = None  # keep only the first N lines of the corpus (d2l's num_examples)
    max_len: int | str = 20  # tokens per side including <eos>; longer training pairs are dropped
    min_freq: int = 2  # word tokenizer: rarer words are <unk>; also defines the rare-word test subset
    tokenizer: str = "subword"  # subword (SentencePiece, cased) | word (d2l: lowercased, whitespace)
    vocab_size: int | str = 8000  # subword: pieces per language, learned from the training split
    subword_type: str = "bpe"  # subword: SentencePiece's bpe or unigram
    split_digits: bool = True  # subword: every digit its own piece on both sides, so numbers copy digit by digit
    # subword: sentences a side SentencePiece learns from, a seeded sample of the training split when it is
    # larger (SentencePiece's input_sentence_size)
    subword_sample: int = 2_000_000
    # where `nmt prepare` keeps the split, encoded corpus (one folder a corpus and data config)
    prepared_dir: str = "data/prepared"
    # a dev set in any form `path` takes: validation, early stopping and best.pt follow it, and the pairs the
    # md5 split would have held out for validation go back to training
    valid: str | None = None
    test: str | None = None  # a test set likewise: the test split (`nmt eval --split test`) is this file
    drop_overlap: bool = True  # drop training pairs whose source is also in data.valid or data.test
    # Cleaning the training split (nmt/data/cleaning, docs/data.md): each rule drops the pairs it names,
    # `nmt prepare` says how many and keeps them in the prepared folder's dropped.tsv; false or 0 takes it off.
    drop_empty: bool = True  # a side with no letter or digit
    drop_junk: bool = True  # markup tags or entities, mojibake, a side that is a bare web address
    drop_copies: bool = True  # a target that repeats its source (case, spaces and punctuation aside)
    drop_language: float = 0.01  # a side whose language py3langid gives a probability below this
    drop_ratio: float = 3.0  # a pair whose length ratio (characters) is this many times off the corpus's mean
    drop_duplicates: bool = True  # the same pair again (case, spaces and punctuation aside): the first kept
    drop_max_share: float = 0.5  # more than this share of the training pairs dropped: an error, not a run
    # subword: numbers become placeholders the model moves and the translator restores exactly, in the
    # target's conventions (nmt/data/protected_numbers.py)
    protect: bool = True
    weight: float = 1.0  # how often an epoch draws each training pair of `path`: 2 twice, 0.5 a random half
    # more training corpora, each "PATH[:WEIGHT[:TAG]]": only their training split trains; TAG (e.g. <bt>) is
    # one reserved source piece put before each of their sources (tagged back-translation). The vocabularies
    # are learned from `path` alone.
    corpora: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _auto_or_number("data", self)
        _positive("data", min_freq=self.min_freq, vocab_size=self.vocab_size, subword_sample=self.subword_sample,
                  weight=self.weight)
        _one_of("data", TOKENIZERS, tokenizer=self.tokenizer)
        _one_of("data", SUBWORD_TYPES, subword_type=self.subword_type)
        if self.num_pairs is not None:
            _positive("data", num_pairs=self.num_pairs)
        _at_least("data", 2, max_len=self.max_len)
        if not 0 <= self.drop_language < 1:
            raise ConfigError(f"data.drop_language must be a probability from 0 (off) to below 1 (got {self.drop_language})")
        if self.drop_ratio and self.drop_ratio <= 1:
            raise ConfigError(f"data.drop_ratio must be 0 (off) or more than 1 (got {self.drop_ratio})")
        if not 0 < self.drop_max_share <= 1:
            raise ConfigError(f"data.drop_max_share must be a share above 0, at most 1 (got {self.drop_max_share})")
        for key in ("src_lang", "tgt_lang"):
            if not LANGUAGE_CODE.fullmatch(getattr(self, key)):
                raise ConfigError(f"data.{key} must be a language code such as en, fr or pt-BR "
                                  f"(got {getattr(self, key)!r})")
        if self.protect and self.tokenizer != "subword":
            raise ConfigError("data.protect (on by default) needs data.tokenizer: subword (its placeholders are "
                              "pieces of a SentencePiece model): with data.tokenizer: word, set data.protect: false")
        if self.src_lang == self.tgt_lang:
            raise ConfigError(f"data.src_lang and data.tgt_lang must differ (both {self.src_lang!r})")
        self.corpus_specs()  # (a malformed data.corpora is an error here)
        if self.tags() and self.tokenizer != "subword":
            raise ConfigError("a corpus tag needs data.tokenizer: subword (the tag is a reserved piece of the "
                              "source model alone, so the decoder can never write it)")

    def corpus_specs(self) -> list[CorpusSpec]:
        """data.corpora, parsed."""
        return [CorpusSpec.parse(spec, "data.corpora") for spec in self.corpora]

    def tags(self) -> list[str]:
        """The corpora's tags, each once, in the order given: the reserved source pieces."""
        return list(dict.fromkeys(spec.tag for spec in self.corpus_specs() if spec.tag))

    @property
    def source_lang(self) -> str:
        """The language the model reads: src_lang, or tgt_lang with `reverse`."""
        return self.tgt_lang if self.reverse else self.src_lang

    @property
    def target_lang(self) -> str:
        """The language the model writes."""
        return self.src_lang if self.reverse else self.tgt_lang


@dataclass(frozen=True)
class ModelConfig:
    embed_size: int | str = 256  # `auto`: a student's (STUDENT_KEYS)
    hidden_size: int | str = 256
    num_layers: int = 2
    dropout: float | str = 0.0  # between LSTM layers
    attention: str = "additive"
    bidirectional: bool = True  # encoder reads both ways, hidden_size / 2 per direction
    bridge: bool = False  # learned layer from the encoder's final state to the decoder's initial one
    input_feeding: bool = False  # the last attentional output is fed back into the decoder LSTM
    tie_embeddings: bool = True  # the output projection shares the target embedding matrix
    # stepwise: the seed's decoder, one LSTM that reads the context (and the feed) at each position;
    # parallel: the bottom layer reads the embeddings only and attention is computed from its outputs,
    # so training runs each layer once over the whole target (OpenNMT-py's StdRNNDecoder, RNMT+)
    decoder: str = "parallel"
    embed_dropout: float | str = 0.0  # dropout on the source and target embeddings (RNMT+)
    # dropout on the decoder's outputs where they enter the output projection (OpenNMT-py's dropout on the
    # attentional output; LIUM-CVC's 0.5 on Multi30k): the regularizer a small corpus needs most
    output_dropout: float | str = 0.0
    # a separate attention trained toward the aligner's links and queried with the word written, from
    # which --align, --markup and the page read alignments (nmt/model/alignment_head.py); it changes no translation
    alignment_head: bool | str = False

    def __post_init__(self) -> None:
        _auto_or_number("model", self)
        _positive("model", embed_size=self.embed_size, hidden_size=self.hidden_size,
                  num_layers=self.num_layers)
        _within("model", "[0, 1)", dropout=self.dropout, embed_dropout=self.embed_dropout,
                output_dropout=self.output_dropout)
        _one_of("model", DECODERS, decoder=self.decoder)
        if (self.embed_size == AUTO) != (self.hidden_size == AUTO):
            raise ConfigError("model.embed_size and model.hidden_size are auto together (a student's width, which "
                              "nmt distill decides) or both numbers")
        if self.decoder == "parallel" and self.input_feeding:
            raise ConfigError("model.decoder: parallel feeds nothing back from one position to the next: "
                              "set model.input_feeding: false (it always attends from its bottom layer's output)")
        if self.bidirectional and isinstance(self.hidden_size, int) and self.hidden_size % 2:
            raise ConfigError(f"model.bidirectional needs an even model.hidden_size (got {self.hidden_size})")
        if self.tie_embeddings and self.embed_size != self.hidden_size:
            raise ConfigError(f"model.tie_embeddings needs model.embed_size == model.hidden_size "
                              f"({self.embed_size} != {self.hidden_size})")
        _one_of("model", ATTENTION_TYPES, attention=self.attention)


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 64  # sentences a batch (per process under DDP)
    batch_tokens: int = 0  # >0: batches by padded target tokens instead (rows x longest target), as fairseq's max_tokens
    # batches a step: their gradients summed, the loss divided by all their target tokens (fairseq's --update-freq)
    accum_steps: int = 1
    lr: float | str = 0.001
    lr_schedule: str = "linear"  # constant | linear (to min_lr at the budget's end)
    warmup_steps: int = 0  # linear warm-up from 0 to lr over the first N steps
    min_lr: float = 0.0
    epochs: int | str = 10
    max_steps: int = 0  # 0: no step limit
    max_minutes: float = 30.0  # 0: no time limit; otherwise stop cleanly (validate, save) at the budget
    clip_grad: float = 1.0  # max gradient norm; 0 disables clipping
    label_smoothing: float | str = 0.0
    # >0: guided alignment (Marian's --guided-alignment, OpenNMT-py's lambda_align): this weight times the
    # cross-entropy of the attention against eflomal's links of the training pairs (`nmt.data.links`) joins the loss
    guided_alignment: float | str = 0.0
    seed: int = 1
    threads: int = 0  # torch intra-op threads; 0 keeps torch's default
    device: str = "auto"
    precision: str = "fp32"  # bf16: matrix products in bfloat16 (weights, loss stay fp32); auto: bf16 where native
    log_every: int = 100
    eval_every: int = 1000  # validate every N steps as well as at each epoch end; 0: epoch ends only
    save_every: int = 500  # checkpoint every N steps too (validations and epoch ends always save); 0: off
    keep_last: int = 3  # rotating ckpt-<step>.pt files kept (best.pt and last.pt are extra)
    val_bleu_sentences: int = 500  # fixed validation subset for the per-epoch BLEU
    # validation reads about this many valid pairs at most (whole sources, spread over the split): a corpus of
    # millions has tens of thousands, fra-eng 1,753
    val_max_pairs: int = 5000
    # the search of validation during training: greedy keeps it fast (decode.beam_size is what translate, eval
    # and serve use)
    val_beam_size: int = 1
    patience: int = 5  # stop after this many validations with neither a better BLEU nor a lower loss; 0: off
    tensorboard: bool = False  # TensorBoard curves in RUN/tensorboard/ (pip install -e ".[tensorboard]")
    init_from: str | None = None  # set by `nmt train --init-from`: the parent checkpoint this run started from
    init_from_sha256: str | None = None  # ... and its sha256
    teacher: str | None = None  # set by `nmt distill`: the run (or ensemble) whose translations this run learned
    teacher_sha256: str | None = None  # ... and its checkpoints' sha256, joined by '+'

    def __post_init__(self) -> None:
        _auto_or_number("train", self)
        _positive("train", batch_size=self.batch_size, lr=self.lr, epochs=self.epochs, log_every=self.log_every,
                  val_bleu_sentences=self.val_bleu_sentences, keep_last=self.keep_last,
                  val_beam_size=self.val_beam_size, val_max_pairs=self.val_max_pairs,
                  accum_steps=self.accum_steps)
        _at_least("train", 0, max_steps=self.max_steps, max_minutes=self.max_minutes, clip_grad=self.clip_grad,
                      threads=self.threads, eval_every=self.eval_every, save_every=self.save_every,
                      patience=self.patience, warmup_steps=self.warmup_steps, min_lr=self.min_lr,
                      batch_tokens=self.batch_tokens, guided_alignment=self.guided_alignment)
        _within("train", "[0, 1)", label_smoothing=self.label_smoothing)
        _one_of("train", LR_SCHEDULES, lr_schedule=self.lr_schedule)
        _one_of("train", PRECISIONS, precision=self.precision)
        _one_of("train", DEVICES, device=self.device)


@dataclass(frozen=True)
class DecodeConfig:
    beam_size: int = 5  # beam search, as OpenNMT-py and fairseq decode unless told otherwise; 1: greedy search
    length_penalty: float = 1.0  # beam scores are divided by length^length_penalty; 0: raw log-probs
    # the same for a sentence with glossary terms: a term the model would not pick costs every hypothesis
    # that holds it, and dividing by the length lets longer ones spread that cost thin (docs/results.md)
    glossary_length_penalty: float = 0.6
    batch_size: int = 128
    max_input_len: int = 100  # tokens: a longer sentence is cut to it, with a warning naming its line
    # words: a longer sentence is translated in parts, cut after its clauses (, ; : and dashes), or
    # where it has none, at a word (nmt.inference.text.sentences); 0: as long as the run's training pairs
    # (data.max_len x 3/4 words: 20 for fra-eng, measured best on long sentences in docs/results.md)
    max_sentence_words: int = 0
    max_output_ratio: float = 2.0  # output cap: ratio * source length + extra tokens
    max_output_extra: int = 10
    # data.protect: search writes every source number exactly once and no digit of its own (false:
    # placeholders at most once each, digits free, as before; for comparison)
    strict_numbers: bool = True

    def __post_init__(self) -> None:
        _positive("decode", beam_size=self.beam_size, batch_size=self.batch_size,
                  max_input_len=self.max_input_len, max_output_ratio=self.max_output_ratio)
        _at_least("decode", 0, max_sentence_words=self.max_sentence_words)
        _at_least("decode", 0, max_output_extra=self.max_output_extra, length_penalty=self.length_penalty,
                  glossary_length_penalty=self.glossary_length_penalty)


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def auto_keys(self) -> list[str]:
        """The recipe's keys this config leaves to it (`auto`)."""
        return [dotted for dotted in RECIPE_KEYS if self.value(dotted) == AUTO]

    def value(self, dotted: str) -> Any:
        section, key = dotted.split(".")
        return getattr(getattr(self, section), key)


def require_decided(cfg: Config) -> Config:
    """`cfg` as a run trains with it: no `auto` left in a recipe key, a student's width or the
    precision, so that the model and the loop read numbers and booleans, never the string."""
    left = cfg.auto_keys() + [key for key in STUDENT_KEYS if cfg.value(key) == AUTO]
    left += ["train.precision"] if cfg.train.precision == AUTO else []
    if left:
        raise ConfigError(f"{', '.join(left)}: still auto where the run starts (the recipe, a "
                          f"student's sizing and the precision decide them first: nmt.training.run_setup.setup)")
    return cfg


def _check_type(value: Any, annotation: Any, key: str) -> Any:
    """Return `value` if it fits `annotation` (ints are accepted as floats), else raise."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    for option in options:
        if option is type(None) and value is None:
            return None
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if option in (str, bool) and type(value) is option:
            return value
        if typing.get_origin(option) is list and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
    may_be_auto = key in RECIPE_KEYS + STUDENT_KEYS
    names = " or ".join("null" if o is type(None) else "auto" if may_be_auto and o is str else o.__name__
                        for o in options)
    raise ConfigError(f"{key} must be {names} (got {value!r})")


def _build_section(cls: type, raw: Any, section: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"{section} must be a mapping of keys to values (got {raw!r})")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"{section}: unknown key(s) {sorted(unknown)}; allowed: {sorted(known)}")
    missing = [f.name for f in fields(cls)
               if f.name not in raw and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{section}: missing required key(s) {sorted(missing)}")
    values = {k: _check_type(v, hints[k], f"{section}.{k}") for k, v in raw.items()}
    return cls(**values)


SECTIONS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig, "decode": DecodeConfig}
# Keys that were measured to lose and removed: the value every run saved while they existed holds
# unless it asked for them (such a run still loads), and why the key went. A default of None: a key
# that shaped training alone, so a run that set it to anything loads and translates as it was
# trained. docs/results.md keeps each one's measurement and the last nmt that had it.
_LOST = "it lost where it was measured"
_IN_NO_CONFIG = "no shipped config or the recipe used it"
REMOVED = {"model.residual": (False, _LOST), "model.layer_norm": (False, _LOST), "model.attention_heads": (1, _LOST),
           "data.terms": (0.0, _LOST), "data.term_form": ("append", _LOST), "model.init_uniform": (0.0, _LOST),
           "model.source_word_dropout": (0.0, _LOST), "train.ema_decay": (0.0, _LOST),
           "data.subword_sampling": (0.0, _LOST), "data.copy_augment": (0.0, _LOST),
           "model.copy_attention": (False, _LOST), "decode.ensemble": ("log_prob", _LOST),
           "data.insert_placeholders": (None, "links and emoji no longer reach the model"),
           "data.joint_vocab": (False, _IN_NO_CONFIG), "model.share_embeddings": (False, _IN_NO_CONFIG),
           "model.attention_query": ("previous", _IN_NO_CONFIG),
           "train.lr_decay_factor": (0.5, _IN_NO_CONFIG), "train.lr_decay_patience": (2, _IN_NO_CONFIG)}
# Values removed from a key that stays: a run or config holding one is refused as a removed key is.
REMOVED_VALUES = {("train", "lr_schedule", "plateau"): _IN_NO_CONFIG}
_OLDER = "a run trained with it needs the nmt docs/results.md names"


def _without_removed(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` without the removed keys that hold their old default; one that does not is refused."""
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    for dotted, (default, why) in REMOVED.items():
        section, key = dotted.split(".")
        if isinstance(raw.get(section), dict) and key in raw[section]:
            if raw[section].pop(key) != default and default is not None:
                raise ConfigError(f"{dotted} was removed ({why}); {_OLDER}; in a config, delete the key")
    for (section, key, value), why in REMOVED_VALUES.items():
        if isinstance(raw.get(section), dict) and raw[section].get(key) == value:
            raise ConfigError(f"{section}.{key}: {value} was removed ({why}); {_OLDER}; in a config, choose another")
    return raw


# The defaults before they became configs/default.yaml's: a saved run whose config lacks one of
# these keys (it was saved before the key existed) trained with this value.
_SAVED_BEFORE = {"data": {"tokenizer": "word", "subword_type": "unigram", "split_digits": False, "protect": False,
                          "drop_empty": False, "drop_junk": False, "drop_copies": False, "drop_language": 0.0,
                          "drop_ratio": 0.0, "drop_duplicates": False},
                 "model": {"bidirectional": False, "tie_embeddings": False, "decoder": "stepwise"},
                 "train": {"lr_schedule": "constant", "max_minutes": 0.0, "eval_every": 0, "patience": 0}}


def saved_config(raw: Any) -> Config:
    """The config a checkpoint saved: what it lacks is what the nmt that saved it defaulted to."""
    if isinstance(raw, dict):
        raw = {**raw, **{section: {**old, **(raw.get(section) or {})} for section, old in _SAVED_BEFORE.items()}}
    return config_from_dict(raw)


def config_from_dict(raw: Any) -> Config:
    if not isinstance(raw, dict):
        raise ConfigError(f"the config must be a YAML mapping with sections {sorted(SECTIONS)}")
    unknown = set(raw) - set(SECTIONS)
    if unknown:
        raise ConfigError(f"unknown section(s) {sorted(unknown)}; allowed: {sorted(SECTIONS)}")
    for required in ("data", "model"):
        if required not in raw:
            raise ConfigError(f"missing required section `{required}` (a config without model and data, "
                              f"such as configs/finetune.yaml, goes with --init-from RUN, which gives them)")
    raw = _without_removed(raw)
    return Config(**{name: _build_section(cls, raw[name] if raw[name] is not None else {}, name)
                     for name, cls in SECTIONS.items() if name in raw})


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `section.key=value` strings; values are parsed as YAML (`5`, `0.1`, `null`, `dot`)."""
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    for item in overrides:
        key, sep, text = item.partition("=")
        section, dot, name = key.strip().partition(".")
        if not sep or not dot or not name:
            raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. train.lr=0.001")
        if section not in SECTIONS:
            raise ConfigError(f"--set {item!r}: unknown section {section!r}; allowed: {sorted(SECTIONS)}")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        target = raw.setdefault(section, {})
        if not isinstance(target, dict):
            target = raw[section] = {}
        target[name] = value
    return raw


def load_config(path: str | Path, overrides: list[str] | None = None) -> Config:
    """Read a YAML config, apply `--set` overrides, validate; errors name the file."""
    raw = read_raw_config(path)
    try:
        return config_from_dict(apply_overrides(raw, overrides or []))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def read_raw_config(path: str | Path) -> dict[str, Any]:
    """A YAML config file as it is written (its sections as mappings, nothing filled in)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path} (see configs/ for examples)")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"{path}: not valid YAML ({first_line})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a YAML mapping with sections {sorted(SECTIONS)}, "
                          f"not a {type(raw).__name__}")
    return raw
