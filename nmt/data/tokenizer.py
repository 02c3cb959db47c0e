"""Tokenizers: text <-> the tokens the vocabularies number, in two kinds.

- `word`: d2l's preprocessing (lowercase, punctuation split off) and whitespace splitting; the
  seed's design, kept for `configs/d2l.yaml`. Unseen words become <unk>. Output gets the target
  language's punctuation spacing and a capital first letter.
- `subword`: a SentencePiece model per language, learned from the training split alone, on
  cased, untokenized text. Byte fallback spells any character it has no piece for, so no input
  ever becomes <unk>; the pieces decode back to plain text with the corpus's spacing, in any language.

Both present the same face to the data pipeline, the translator and the evaluation.
"""

from __future__ import annotations

import functools
import io
import re
import string
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import sentencepiece as spm

from nmt.config import DataConfig
from nmt.data.protected_numbers import PLACEHOLDERS, SpanProtector
from nmt.data.vocab import BOS, EOS, PAD, UNK, Vocab
from nmt.errors import CheckpointError, ConfigError

# d2l's `no_space` rule: a space goes before , . ! ? unless the previous character already is one.
_PUNCT_WITHOUT_SPACE = re.compile(r"(?<=[^ ])(?=[,.!?])")  # (an empty match: a plain " " replaces it, no template)
# Languages whose typography sets ! ? ; : apart with a space (French); the others attach them.
SPACED_PUNCTUATION = {"fr"}
# The spaces a typist may put before punctuation that the language attaches ("Go ." is "Go.").
# (Read after the spaces are made single: a space before the mark, removed.)
_SPACE_BEFORE_ATTACHED = {True: re.compile(r" (?=[,.])"), False: re.compile(r" (?=[,.!?;:])")}
# Word-model output: which punctuation attaches to the word before, and "(" to the word after.
_ATTACHED_TOKEN = {True: re.compile(r" ([,.)])"), False: re.compile(r" ([,.)!?;:])")}
_OPENING = re.compile(r"([(]) ")
WORD_START = "\u2581"  # SentencePiece's "▁", which begins a piece that begins a word


def special_piece(piece: str) -> bool:
    """A token in angle brackets or ⦅⦆ (<eos>, a byte <0x41>, a number placeholder ⦅N1⦆): no text."""
    return piece.startswith(("<", "⦅")) and len(piece) > 2


def spells(piece: str) -> bool:
    """The piece writes a letter or digit (not punctuation alone, no special)."""
    return not special_piece(piece) and any(c.isalnum() for c in piece)


def continues_word(piece: str) -> bool:
    """A subword piece glued to the piece before it: it spells, without a word-start mark."""
    return spells(piece) and not piece.startswith(WORD_START)


def spaces_punctuation(lang: str) -> bool:
    """Whether `lang` puts a space before ! ? ; : (fr, fr-CA), as French typography does."""
    return lang.split("-")[0].lower() in SPACED_PUNCTUATION


class WhitespaceTokenizer:
    """d2l's preprocessing, then whitespace splitting: also the legacy (lowercased, tokenized)
    form that the old BLEU figures were computed on."""

    name = "whitespace"

    @staticmethod
    def preprocess(text: str) -> str:
        text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
        return _PUNCT_WITHOUT_SPACE.sub(" ", text)

    def tokenize(self, text: str) -> list[str]:
        return self.preprocess(text).split()

    @staticmethod
    def detokenize(tokens: list[str]) -> str:
        return " ".join(tokens)


TOKENIZER = WhitespaceTokenizer()


def legacy_form(text: str) -> str:
    """Lowercased and tokenized as the word model writes: what the legacy BLEU compares."""
    return TOKENIZER.detokenize(TOKENIZER.tokenize(text))


def source_text(text: str, lang: str) -> str:
    """The input as its language writes it, whatever spacing it came with: in English "Go ." is
    "Go."; in French only the space before , and . goes ("Va !" keeps its own)."""
    return _SPACE_BEFORE_ATTACHED[spaces_punctuation(lang)].sub("", " ".join(text.split()))


def word_text(tokens: Sequence[str], lang: str) -> str:
    """Word-model output as a sentence of `lang`: its punctuation spacing, a capital first letter."""
    text = _OPENING.sub(r"\1", _ATTACHED_TOKEN[spaces_punctuation(lang)].sub(r"\1", " ".join(tokens)))
    return text[:1].upper() + text[1:]


class Tokenizer(Protocol):
    kind: str
    ban_unk: bool  # decoding never emits <unk>: it is no training target, so it is banned outright
    source_lang: str  # the language the model reads (its input is normalized as that language writes)
    target_lang: str  # the language it writes (word output is spaced as that language punctuates)
    protector: SpanProtector | None  # data.protect: numbers as placeholders (subword models only)

    def source_tokens(self, texts: Sequence[str]) -> list[list[str]]: ...
    def target_tokens(self, texts: Sequence[str]) -> list[list[str]]: ...
    def target_text(self, tokens: Sequence[str]) -> str: ...
    def legacy_text(self, tokens: Sequence[str], text: str) -> str: ...  # text: target_text(tokens), already made
    def save(self, run_dir: Path) -> None: ...


class WordTokenizer:
    kind, ban_unk, protector = "word", False, None

    def __init__(self, source_lang: str = "en", target_lang: str = "fr"):
        self.source_lang, self.target_lang = source_lang, target_lang

    def source_tokens(self, texts: Sequence[str]) -> list[list[str]]:
        return [TOKENIZER.tokenize(t) for t in texts]

    target_tokens = source_tokens

    def target_text(self, tokens: Sequence[str]) -> str:
        return word_text(tokens, self.target_lang)

    def legacy_text(self, tokens: Sequence[str], text: str) -> str:
        return TOKENIZER.detokenize(list(tokens))

    def save(self, run_dir: Path) -> None:
        """The word vocabularies travel in the checkpoint; nothing else to keep."""


_SPACES = re.compile(r" {2,}")  # the runs of spaces a decoded output may hold

SUBWORD_FILES = ("src.spm.model", "tgt.spm.model")


SAMPLE_SEED = 1  # the seed of SentencePiece's sample of a large training split: part of the prepared data


def train_sentencepiece(texts: Iterable[str], vocab_size: int, model_type: str, split_digits: bool = False,
                        sample_size: int = 0, protect: bool = False, reserved: Sequence[str] = ()) -> bytes:
    """A SentencePiece model (serialized) whose ids 0-3 are nmt's <pad> <bos> <eos> <unk>, so its
    piece list is the vocabulary as it stands. With `sample_size`, SentencePiece learns from a
    seeded reservoir sample of that many of `texts` (all of them, in order, when fewer). With
    `protect`, ids 4-12 are the number placeholders, each always one piece; `reserved` (corpus
    tags) follow them, likewise one piece each."""
    model = io.BytesIO()
    sampling = dict(input_sentence_size=sample_size, shuffle_input_sentence=True) if sample_size else {}
    spm.set_random_generator_seed(SAMPLE_SEED)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size, model_type=model_type,
            character_coverage=1.0, byte_fallback=True, split_digits=split_digits, num_threads=2, **sampling,
            pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece=PAD, bos_piece=BOS, eos_piece=EOS, unk_piece=UNK,
            hard_vocab_limit=False, minloglevel=2,
            user_defined_symbols=(list(PLACEHOLDERS) if protect else []) + list(reserved))
    except RuntimeError as e:  # e.g. fewer pieces than the corpus has characters (+ 256 bytes)
        detail = str(e).strip().splitlines()[-1].split("] ", 1)[-1]
        raise ConfigError(f"data.vocab_size={vocab_size}: SentencePiece cannot learn this vocabulary "
                          f"({detail[:200]})") from None
    return model.getvalue()


class SubwordTokenizer:
    kind, ban_unk = "subword", True

    def __init__(self, src_model: bytes, tgt_model: bytes, source_lang: str = "en", target_lang: str = "fr",
                 protect: bool = False):
        self.models, self.source_lang, self.target_lang = (src_model, tgt_model), source_lang, target_lang
        self.src = spm.SentencePieceProcessor(model_proto=src_model)
        self.tgt = spm.SentencePieceProcessor(model_proto=tgt_model)
        self.protector = SpanProtector(source_lang, target_lang, self._placeholder_ids(), self._digit_ids(),
                                       self._known_characters()) if protect else None

    def _placeholder_ids(self) -> dict[int, int]:
        return {self.tgt.piece_to_id(p): i for i, p in enumerate(PLACEHOLDERS)}

    def _known_characters(self) -> frozenset[str]:
        """The characters the source model holds in a piece (ASCII always): a source word with
        another, which the model never read (another script, an emoji), is copied, not translated."""
        model = self.src
        return frozenset({c for i in range(model.get_piece_size()) if not (model.is_byte(i) or model.is_control(i))
                          for c in model.id_to_piece(i)} | set(string.printable))

    def _digit_ids(self) -> frozenset[int]:
        """The target pieces whose text holds a digit (placeholders aside): what strict search never
        writes. A byte-fallback piece is its byte (<0x31> is "1"), not its name; a byte past ASCII is
        part of a longer character, never a digit alone."""
        placeholders, ids = set(PLACEHOLDERS), set()
        for i in range(self.tgt.get_piece_size()):
            piece = self.tgt.id_to_piece(i)
            if piece in placeholders or self.tgt.is_control(i) or self.tgt.is_unknown(i):
                continue
            byte = int(piece[3:-1], 16) if self.tgt.is_byte(i) else None
            text = piece if byte is None else chr(byte) if byte < 0x80 else ""
            if any(c.isdigit() for c in text):
                ids.add(i)
        return frozenset(ids)

    @classmethod
    def train(cls, src_texts: Iterable[str], tgt_texts: Iterable[str], cfg: DataConfig) -> SubwordTokenizer:
        """A model per language of cfg.vocab_size pieces (cfg.subword_type). cfg.split_digits makes
        every digit a piece of its own on both sides. The texts are read once, as they come; with
        cfg.subword_sample, each side contributes a seeded sample of that many. cfg.protect
        reserves the number placeholders (nmt/data/protected_numbers.py) in both models; the
        corpora's tags (e.g. <bt>) are reserved source pieces, which no target model holds."""
        sources = (source_text(t, cfg.source_lang) for t in src_texts)
        learn = functools.partial(train_sentencepiece, vocab_size=cfg.vocab_size, model_type=cfg.subword_type,
                                  split_digits=cfg.split_digits, protect=cfg.protect)
        return cls(learn(sources, sample_size=cfg.subword_sample, reserved=cfg.tags()),
                   learn(tgt_texts, sample_size=cfg.subword_sample), cfg.source_lang, cfg.target_lang, cfg.protect)

    def vocabularies(self) -> tuple[Vocab, Vocab]:
        return tuple(Vocab([p.id_to_piece(i) for i in range(p.get_piece_size())])  # type: ignore[return-value]
                     for p in (self.src, self.tgt))

    def source_tokens(self, texts: Sequence[str], **encode_options: Any) -> list[list[str]]:
        return self.src.encode([source_text(t, self.source_lang) for t in texts], out_type=str, **encode_options)

    def target_tokens(self, texts: Sequence[str], **encode_options: Any) -> list[list[str]]:
        return self.tgt.encode(list(texts), out_type=str, **encode_options)

    def source_ids(self, texts: Sequence[str], **encode_options: Any) -> list[list[int]]:
        """The ids of `source_tokens` (a subword model's piece ids are its vocabulary's)."""
        return self.src.encode([source_text(t, self.source_lang) for t in texts], **encode_options)

    def target_ids(self, texts: Sequence[str], **encode_options: Any) -> list[list[int]]:
        return self.tgt.encode(list(texts), **encode_options)

    def pair_ids(self, src_texts: Sequence[str], tgt_texts: Sequence[str]) -> tuple[list[list[int]], list[list[int]]]:
        """Both sides' ids as the model trains on them: protected spans as placeholders (data.protect,
        which reads both sides of a pair), then the best segmentation."""
        if self.protector:
            src_texts, tgt_texts = self.protector.protect_pairs(src_texts, tgt_texts)
        return self.source_ids(src_texts), self.target_ids(tgt_texts)

    def target_text(self, tokens: Sequence[str]) -> str:
        # A model may write a word boundary twice ("▁", "▁1"); SentencePiece collapses such runs
        # in all it reads, so the output gets them collapsed too.
        return _SPACES.sub(" ", self.tgt.decode_pieces(list(tokens))).strip(" ")

    def legacy_text(self, tokens: Sequence[str], text: str) -> str:
        return legacy_form(text)  # (the pieces decoded once: `text` is their target_text)

    def save(self, run_dir: Path) -> None:
        for name, model in zip(SUBWORD_FILES, self.models):
            (run_dir / name).write_bytes(model)

    @classmethod
    def load(cls, run_dir: Path, source_lang: str = "en", target_lang: str = "fr",
             protect: bool = False) -> SubwordTokenizer:
        paths = [run_dir / name for name in SUBWORD_FILES]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise CheckpointError(f"{missing[0]}: the subword model is missing from the run directory; "
                                  f"copy the run directory whole (the checkpoint needs its *.spm.model files)")
        try:
            return cls(*(p.read_bytes() for p in paths), source_lang, target_lang, protect)
        except (RuntimeError, OSError) as e:
            raise CheckpointError(f"{run_dir}: cannot read its subword models ({str(e).strip()[:200]})") from None


def load_tokenizer(data: DataConfig, run_dir: Path, src_vocab: Vocab, tgt_vocab: Vocab) -> Tokenizer:
    """The tokenizer a checkpoint was trained with, checked against its vocabularies."""
    if data.tokenizer == "word":
        return WordTokenizer(data.source_lang, data.target_lang)
    tokenizer = SubwordTokenizer.load(run_dir, data.source_lang, data.target_lang, data.protect)
    for side, built, stored in zip(("source", "target"), tokenizer.vocabularies(), (src_vocab, tgt_vocab)):
        if built != stored:
            raise CheckpointError(f"{run_dir}: the {side} subword model does not match the checkpoint's "
                                  f"vocabulary ({len(built)} vs {len(stored)} entries); the run directory "
                                  f"mixes files of different runs")
    return tokenizer
