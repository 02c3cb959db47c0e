"""The data a training run needs: the corpus split, the tokenizer and vocabularies learned from
its training part (or a resumed run's own), and the encoded pairs for training and validation."""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from nmt import distributed
from nmt.augment import replace_copyable
from nmt.config import Config, DataConfig
from nmt.corpus import Pair, Splits, load_corpus
from nmt.data import Example, encode_pairs, encode_tokens
from nmt.errors import NmtError
from nmt.metrics import References, group_references
from nmt.tokenizer import SubwordTokenizer, Tokenizer, WordTokenizer, load_tokenizer
from nmt.vocab import Vocab

logger = logging.getLogger(__name__)


@dataclass
class TrainingData:
    tokenizer: Tokenizer
    src_vocab: Vocab
    tgt_vocab: Vocab
    train: list[Example]  # within data.max_len, in the tokenizer's best segmentation
    valid: list[Example]  # every valid pair: the validation loss
    references: References  # a fixed subset of the valid sources: the validation BLEU
    train_pairs: list[Pair]  # what `train` was encoded from, for re-segmenting with subword sampling
    cfg: DataConfig

    def epoch_examples(self, epoch: int, seed: int) -> list[Example]:
        """The training examples of an epoch: `train`, or encoded anew with data.copy_augment's
        random names and numbers and data.subword_sampling's sampled segmentation, drawn from
        (seed, epoch), so a resumed run and every process of a torchrun job see the same."""
        alpha, share = self.cfg.subword_sampling, self.cfg.copy_augment
        if not (alpha or share) or not isinstance(self.tokenizer, SubwordTokenizer):
            return self.train
        draw = seed * 10_000 + epoch
        texts = [p.raw for p in self.train_pairs]
        if share:
            texts = replace_copyable(texts, share, random.Random(draw))
        src_texts, tgt_texts = [src for src, _ in texts], [tgt for _, tgt in texts]
        if alpha:
            src, tgt = self.tokenizer.sampled_tokens(src_texts, tgt_texts, alpha, draw)
        else:
            src, tgt = self.tokenizer.source_tokens(src_texts), self.tokenizer.target_tokens(tgt_texts)
        return encode_tokens(src, tgt, self.src_vocab, self.tgt_vocab, self.cfg.max_len)


def load_data(cfg: Config, data_path: str | None, out_dir: Path, resume: dict | None,
              world: distributed.World) -> TrainingData:
    """The corpus, the vocabularies (built and saved in `out_dir`, or the checkpoint's when
    resuming) and the encoded splits."""
    corpus, splits = load_corpus(data_path, cfg.data)
    logger.info("corpus %s (%s -> %s): %s", corpus, cfg.data.source_lang, cfg.data.target_lang, splits.sizes())
    if resume is None:
        tokenizer, src_vocab, tgt_vocab = build_vocabularies(cfg, splits, world)
        if world.is_main:
            tokenizer.save(out_dir)
            src_vocab.save(out_dir / "src_vocab.txt")
            tgt_vocab.save(out_dir / "tgt_vocab.txt")
            (out_dir / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False), encoding="utf-8")
    else:
        src_vocab, tgt_vocab = Vocab(resume["src_vocab"]), Vocab(resume["tgt_vocab"])
        tokenizer = load_tokenizer(cfg.data, out_dir, src_vocab, tgt_vocab)
    train = encode_pairs(splits.train, src_vocab, tgt_vocab, cfg.data.max_len, tokenizer)
    if not train:
        raise NmtError(f"no training pair fits data.max_len={cfg.data.max_len}; raise it")
    logger.info("vocab (%s): %d source, %d target types | %d training pairs within data.max_len=%d",
                cfg.data.tokenizer, len(src_vocab), len(tgt_vocab), len(train), cfg.data.max_len)
    references = group_references(splits.valid)
    # Every k-th source: the corpus is sorted by length, so the first n would be the shortest.
    every = max(1, math.ceil(len(references.sources) / cfg.train.val_bleu_sentences))
    return TrainingData(tokenizer, src_vocab, tgt_vocab, train,
                        encode_pairs(splits.valid, src_vocab, tgt_vocab, tokenizer=tokenizer),
                        references.subset([i % every == 0 for i in range(len(references.sources))]),
                        splits.train, cfg.data)


def build_vocabularies(cfg: Config, splits: Splits, world: distributed.World) -> tuple[Tokenizer, Vocab, Vocab]:
    """From the training split alone. Word vocabularies: every rank counts the same data.
    Subword models: rank 0 learns them and hands the others the bytes."""
    data = cfg.data
    if data.tokenizer == "word":
        return (WordTokenizer(data.source_lang, data.target_lang),
                Vocab.build((p.src for p in splits.train), data.min_freq),
                Vocab.build((p.tgt for p in splits.train), data.min_freq))
    models = None
    if world.is_main:
        start = time.monotonic()
        tokenizer = SubwordTokenizer.train([p.raw[0] for p in splits.train], [p.raw[1] for p in splits.train],
                                           data.vocab_size, data.subword_type, data.joint_vocab, data.source_lang,
                                           split_digits=data.split_digits)
        logger.info("subword model%s (SentencePiece %s, %d pieces%s) learned in %.1f s",
                    "" if data.joint_vocab else "s", data.subword_type, data.vocab_size,
                    ", both languages" if data.joint_vocab else " a side", time.monotonic() - start)
        models = tokenizer.models
    tokenizer = SubwordTokenizer(*distributed.from_main(models, world), data.source_lang, data.target_lang)
    return (tokenizer, *tokenizer.vocabularies())
