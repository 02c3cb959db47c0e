"""The data a training run needs: the prepared corpus, its tokenizer and vocabularies (or a resumed
run's own), the training pairs on disk and their batches, and the validation pairs in memory."""

from __future__ import annotations

import dataclasses
import logging
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from nmt.config import Config, DataConfig
from nmt.data.batches import Batch, Example, TrainingSet, collate, encode_pairs
from nmt.data.corpus import require_corpus, resolve_corpus
from nmt.data.corpus_mix import CorpusMix, MixPart
from nmt.data.epoch_order import EpochBatches
from nmt.data.indexed import IndexedArray
from nmt.data.links import training_links
from nmt.data.prepare import ensure_prepared
from nmt.data.prepared_corpus import CASED_WORDS, TARGET_WORDS, TRAINING_WORDS, PreparedCorpus
from nmt.data.tokenizer import Tokenizer, load_tokenizer
from nmt.data.vocab import Vocab
from nmt.errors import NmtError
from nmt.evaluation.metrics import References, group_references
from nmt.training import distributed

logger = logging.getLogger(__name__)


@dataclass
class TrainingData:
    tokenizer: Tokenizer
    src_vocab: Vocab
    tgt_vocab: Vocab
    train: TrainingSet | CorpusMix  # every training pair (those within data.max_len are batched), on disk
    valid: list[Example]  # every valid pair: the validation loss
    references: References  # a fixed subset of the valid sources: the validation BLEU
    cfg: DataConfig
    corpus: dict | None = None  # the corpus's fingerprint (nmt.data.manifest.fingerprint), kept in checkpoints
    folder: Path | None = None  # the prepared corpus
    guided: bool = False  # guided alignment or the alignment head: batches carry the aligner's links as gold attention

    def batch(self, rows: np.ndarray) -> Batch:
        """The examples at `rows` of the training set as a batch."""
        examples = self.train.examples(rows)
        if not self.guided:
            examples = [dataclasses.replace(ex, links=None) if ex.links is not None else ex for ex in examples]
        return collate(examples, self.tgt_vocab.pad_id, self.tgt_vocab.bos_id)


def load_data(cfg: Config, data_path: str | None, out_dir: Path, resume: dict | None, quiet: bool = False,
              inherited: tuple[Tokenizer, Vocab, Vocab] | None = None) -> TrainingData:
    """The prepared corpus (prepared now if missing or stale: one process a machine prepares, the
    others wait for it), the vocabularies (learned, the checkpoint's when resuming, read from its
    run directory `out_dir`, or the `inherited` ones of an --init-from parent) and the splits:
    training ids mapped from disk, validation in memory. `write_run_files` saves what a new run keeps."""
    corpus = resolve_corpus(data_path, cfg.data)
    fixed = inherited
    if resume is not None:
        src_vocab, tgt_vocab = Vocab(resume["src_vocab"]), Vocab(resume["tgt_vocab"])
        fixed = (load_tokenizer(cfg.data, out_dir, src_vocab, tgt_vocab), src_vocab, tgt_vocab)
    folder = prepared_once(corpus, cfg.data, fixed, quiet)
    prepared = PreparedCorpus(folder, cfg.data)
    tokenizer, src_vocab, tgt_vocab = fixed or prepared.vocabularies()
    counts = prepared.counts
    corpus_print = prepared.manifest["corpus"]  # checked against the corpus as the folder was accepted
    logger.info("corpus %s (%s -> %s): train %s | valid %s | test %s pairs", corpus, cfg.data.source_lang,
                cfg.data.target_lang, f"{counts['train']:,}", f"{counts['valid']:,}", f"{counts['test']:,}")
    links = links_of(folder, cfg)
    train = TrainingSet.from_stores(prepared.ids("train", "src"), prepared.ids("train", "tgt"), cfg.data.max_len,
                                    src_vocab.eos_id, links, folder)
    if not train.fitting():
        raise NmtError(f"no training pair fits data.max_len={cfg.data.max_len}; raise it")
    logger.info("vocab (%s): %d source, %d target types | %s training pairs within data.max_len=%d",
                cfg.data.tokenizer, len(src_vocab), len(tgt_vocab), f"{train.fitting():,}", cfg.data.max_len)
    if cfg.data.corpora or cfg.data.weight != 1:
        train = corpus_mix(cfg.data, corpus, train, (tokenizer, src_vocab, tgt_vocab), quiet)
    if cfg.data.valid:
        logger.info("validating on data.valid %s: %s pairs (overlap with training: %s pair(s)%s)", cfg.data.valid,
                    f"{counts['valid']:,}", f"{counts.get('overlap', 0):,}",
                    ", dropped" if cfg.data.drop_overlap else ", kept")
    valid_pairs = prepared.pairs("valid", cfg.train.val_max_pairs)
    if len(valid_pairs) < counts["valid"]:
        logger.info("validation: %s of the %s valid pairs (train.val_max_pairs=%d)", f"{len(valid_pairs):,}",
                    f"{counts['valid']:,}", cfg.train.val_max_pairs)
    references = group_references(valid_pairs)
    # Every k-th source: the corpus is sorted by length, so the first n would be the shortest.
    every = max(1, math.ceil(len(references.sources) / cfg.train.val_bleu_sentences))
    return TrainingData(tokenizer, src_vocab, tgt_vocab, train,
                        encode_pairs(valid_pairs, src_vocab, tgt_vocab, tokenizer=tokenizer),
                        references.subset([i % every == 0 for i in range(len(references.sources))]),
                        cfg.data, corpus_print, folder,
                        trains_on_links(cfg))



def links_of(folder: Path, cfg: Config) -> IndexedArray | None:
    """eflomal's links of a prepared corpus's training pairs where `cfg` trains with them (guided
    alignment, the alignment head): aligned by the first prepare or run that needs them, then read."""
    return training_links(folder) if trains_on_links(cfg) else None


def trains_on_links(cfg: Config) -> bool:
    """Whether batches carry the aligner's links as gold attention: for guided alignment, or the
    alignment head (`model.alignment_head`)."""
    return cfg.train.guided_alignment > 0 or cfg.model.alignment_head is True


def write_run_files(data: TrainingData, cfg: Config, out_dir: Path) -> None:
    """What a new run directory holds beside its checkpoints: the tokenizer and vocabularies, the
    training words of both sides (the rare-word subset of `nmt eval` on any test set is cut by the
    run's own source words; markup's alignment reads which words are frequent), the words its
    sources write with capitals (how a source in capitals is read) and config.yaml."""
    data.tokenizer.save(out_dir)
    data.src_vocab.save(out_dir / "src_vocab.txt")
    data.tgt_vocab.save(out_dir / "tgt_vocab.txt")
    for words in (TRAINING_WORDS, TARGET_WORDS, CASED_WORDS):
        shutil.copyfile(data.folder / words, out_dir / words)
    (out_dir / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False), encoding="utf-8")


def prepared_once(corpus: Path, cfg: DataConfig, fixed: tuple[Tokenizer, Vocab, Vocab] | None,
                  quiet: bool) -> Path:
    """`ensure_prepared` once a machine: local rank 0 prepares (or checks) while the others wait;
    then they find it done, under its lock."""
    folder = ensure_prepared(corpus, cfg, fixed, quiet=quiet) if distributed.world().local_rank == 0 else None
    distributed.barrier()
    return folder or ensure_prepared(corpus, cfg, fixed, quiet=True)


def corpus_mix(cfg: DataConfig, corpus: Path, main: TrainingSet, vocabularies: tuple[Tokenizer, Vocab, Vocab],
               quiet: bool) -> CorpusMix:
    """The main corpus's training pairs and those of data.corpora, each prepared once in the main
    corpus's vocabularies (only their training split trains: the md5 rule keeps any copy of a
    held-out sentence out), drawn by weight."""
    src_vocab = vocabularies[1]
    parts = [MixPart(corpus.name, main, cfg.weight)]
    for spec in cfg.corpus_specs():
        extra = dataclasses.replace(cfg, path=spec.path, num_pairs=None, valid=None, test=None, corpora=[], weight=1.0)
        path = Path(spec.path).expanduser()
        require_corpus(path, extra, "data.corpora: corpus")
        prepared = PreparedCorpus(prepared_once(path, extra, vocabularies, quiet), extra)
        pairs = TrainingSet.from_stores(prepared.ids("train", "src"), prepared.ids("train", "tgt"), cfg.max_len,
                                        src_vocab.eos_id)
        if not pairs.fitting():
            raise NmtError(f"data.corpora: {path} has no training pair within data.max_len={cfg.max_len}")
        tag_id = None
        if spec.tag:
            tag_id = src_vocab.stoi.get(spec.tag)
            if tag_id is None:  # a resumed or inherited vocabulary learned without this tag
                raise NmtError(f"the tag {spec.tag} of {spec.path} is not a piece of this run's source "
                               f"vocabulary (learned without it); a run learns its tags' pieces when it starts, "
                               f"so start a new run with the tag in data.corpora")
        parts.append(MixPart(path.name, pairs, spec.weight, spec.tag, tag_id))
    mix = CorpusMix(parts)
    logger.info("corpora: %s", mix.describe())
    return mix


def epoch_batches(data: TrainingData, cfg: Config, epoch: int) -> EpochBatches:
    """This rank's batches of `epoch`: drawn from (train.seed, epoch) alone, so a resumed run and
    every process of a torchrun job rebuild the same without keeping a random state."""
    rng = np.random.default_rng([cfg.train.seed, epoch])
    rows = data.train.epoch_rows(rng) if isinstance(data.train, CorpusMix) else None  # several corpora, weighted
    return distributed.epoch_shard(data.train.lengths, cfg.train.batch_size, rng, cfg.train.batch_tokens,
                                   rows)  # positions among `rows` back to rows of the mix
