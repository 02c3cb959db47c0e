"""The data a training run needs: the corpus split, the tokenizer and vocabularies learned from
its training part (or a resumed run's own), and the encoded pairs for training and validation."""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import yaml

from nmt import distributed
from nmt.augment import replace_shared, shared_copyable
from nmt.config import Config, DataConfig
from nmt.corpus import Pair, Splits, load_corpus
from nmt.data import Example, encode_pairs, encode_tokens, fits
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
    train_pairs: list[Pair]  # what `train` was encoded from, one for one: augmentation and sampling start there
    cfg: DataConfig

    def epoch_examples(self, epoch: int, seed: int) -> list[Example]:
        """The training examples of an epoch: `train`, or encoded anew with data.copy_augment's
        random names and numbers and data.subword_sampling's sampled segmentation, drawn from
        (seed, epoch), so a resumed run and every process of a torchrun job see the same."""
        alpha, share = self.cfg.subword_sampling, self.cfg.copy_augment
        if not (alpha or share) or not isinstance(self.tokenizer, SubwordTokenizer):
            return self.train
        draw = seed * 10_000 + epoch
        rng = random.Random(draw)
        changed = {i: replace_shared(self.train_pairs[i].raw, shared, rng)
                   for i, shared in (self.copy_candidates if share else ()) if rng.random() < share}
        if alpha:
            texts = [changed.get(i, pair.raw) for i, pair in enumerate(self.train_pairs)]
            src, tgt = self.tokenizer.sampled_tokens([s for s, _ in texts], [t for _, t in texts], alpha, draw)
            return encode_tokens(src, tgt, self.src_vocab, self.tgt_vocab, self.cfg.max_len)
        # Augmentation alone: only the changed pairs need encoding; one grown past max_len stays as it was.
        src = self.tokenizer.source_tokens([s for s, _ in changed.values()])
        tgt = self.tokenizer.target_tokens([t for _, t in changed.values()])
        examples = list(self.train)
        for i, example in zip(changed, encode_tokens(src, tgt, self.src_vocab, self.tgt_vocab)):
            if fits(example, self.cfg.max_len):
                examples[i] = example
        return examples

    @cached_property
    def copy_candidates(self) -> list[tuple[int, list[str]]]:
        """The training pairs whose two sides share names or numbers (their index, and those), found once."""
        return [(i, shared) for i, pair in enumerate(self.train_pairs) if (shared := shared_copyable(*pair.raw))]


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
    encoded = encode_pairs(splits.train, src_vocab, tgt_vocab, tokenizer=tokenizer)
    kept = [i for i, example in enumerate(encoded) if fits(example, cfg.data.max_len)]
    train, train_pairs = [encoded[i] for i in kept], [splits.train[i] for i in kept]
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
                        train_pairs, cfg.data)


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
