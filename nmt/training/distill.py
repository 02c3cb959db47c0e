"""Sequence-level knowledge distillation (Kim and Rush 2016, `nmt distill`): a teacher (a run, or
an ensemble `a+b`) translates the sources of its own training split with its beam, and a smaller
student trains on (source, teacher's translation) pairs in the teacher's tokenizer and vocabularies.

The translations are kept beside the prepared corpora, in data/prepared/distilled-<corpus>-<key>/
(the key names the teacher's checkpoints and the search), with a record of the teacher and the
sources they came from: a second call reuses them, and an interrupted one resumes at the first
source not yet written. The student's corpus holds the teacher's translation of every training
pair and the held-out pairs as the corpus has them, so the md5 split gives the student the
teacher's valid and test splits."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from nmt.config import DataConfig
from nmt.data.corpus import Overlap, PairReader, SplitCounter, corpus_exists, held_out_files, split_pairs
from nmt.data.manifest import corpus_change, corpus_name, file_sha256
from nmt.errors import NmtError
from nmt.files import write_text_atomically
from nmt.inference.engines import engine_device
from nmt.inference.onnx_engine import read_manifest
from nmt.inference.onnx_export import require_onnx
from nmt.inference.translator import Translator
from nmt.model.checkpoint import LoadedModel, load_models
from nmt.progress_bar import Meter

logger = logging.getLogger(__name__)

TRANSLATIONS, RECORD = "translations.txt", "record.json"
# What makes translations already written the ones wanted (the teacher may be named by another path).
SAME_WORK = ("teacher", "weights", "beam", "engine", "sources", "sources_sha256")
CHUNK = 2048  # sources translated, then written and synced, at a time: what an interruption can cost


@dataclass(frozen=True)
class Teacher:
    spec: str  # as given: a run, a checkpoint, or members joined by '+'
    loaded: LoadedModel
    sha256: str  # of each member's checkpoint, joined by '+'
    corpus: Path  # the corpus it trained on

    @property
    def data(self) -> DataConfig:
        return self.loaded.cfg.data

    @property
    def vocabulary_checkpoint(self) -> Path:
        """The checkpoint whose tokenizer and vocabularies the student takes (an ensemble's members share them)."""
        return self.loaded.path


def load_teacher(spec: str, data_path: str | None = None) -> Teacher:
    """The teacher's models and the corpus it trained on (or `data_path`, which must be that corpus)."""
    loaded = load_models(spec)
    recorded = loaded.state.get("corpus")
    if not recorded:
        raise NmtError(f"{loaded.path} does not record the corpus it trained on; give it with --data")
    corpus = Path(data_path or recorded["path"])
    if not corpus_exists(corpus, loaded.cfg.data):
        raise NmtError(f"the teacher trained on {recorded['path']}, which is not there; give its corpus with --data")
    if change := corpus_change(recorded, corpus, loaded.cfg.data):
        raise NmtError(f"the teacher's vocabularies were learned from {recorded['path']}, but {corpus}: {change}; "
                       f"distill from the corpus the teacher trained on")
    shas = "+".join(file_sha256(member.path) for member in loaded.members or [loaded])
    return Teacher(spec, loaded, shas, corpus)


def distilled_corpus(teacher: Teacher, beam: int, engine: str = "auto", device: str = "auto",
                     quiet: bool = False) -> Path:
    """The student's corpus, a tab-separated file in the teacher's corpus's column order: made
    once for this teacher and search, reused after."""
    if engine == "auto":
        engine = teacher_engine(teacher, beam, device)
    search, folder = translation_work(teacher, beam, engine)
    corpus = folder / f"{corpus_name(teacher.corpus)}-distilled.tsv"
    if corpus.is_file():
        logger.info("distillation: the teacher's translations are in %s (made before; reused)", corpus)
        return corpus
    sources = training_sources(teacher.corpus, teacher.data)
    record = {**search, "teacher_spec": teacher.spec, "corpus": str(teacher.corpus.resolve()),
              "sources": len(sources), "sources_sha256": hashlib.sha256("\n".join(sources).encode()).hexdigest()}
    translations = kept_translations(folder, record)
    if len(translations) < len(sources):
        translator = Translator.from_loaded(teacher.loaded, engine_device(engine, device), engine=engine)
        translations += translate_into(folder / TRANSLATIONS, translator, sources[len(translations):], beam,
                                       len(sources), quiet)
    write_student_corpus(corpus, teacher.corpus, teacher.data, dict(zip(sources, translations)))
    logger.info("distillation: %s training sources translated by %s (beam %d, %s) into %s", f"{len(sources):,}",
                teacher.spec, beam, engine, corpus)
    return corpus


def translation_work(teacher: Teacher, beam: int, engine: str) -> tuple[dict, Path]:
    """The search that makes the translations, and the folder that keeps them."""
    search = {"teacher": teacher.sha256, "weights": teacher.loaded.weights, "beam": beam, "engine": engine}
    key = hashlib.sha256(json.dumps(search, sort_keys=True).encode()).hexdigest()[:12]
    return search, Path(teacher.data.prepared_dir) / f"distilled-{corpus_name(teacher.corpus)}-{key}"


def teacher_engine(teacher: Teacher, beam: int, device: str = "auto") -> str:
    """`--engine auto`: int8 ONNX Runtime where the teacher decodes on the CPU and each of its
    checkpoints has a current export (its beam-5 BLEU level with torch's at 2.17x the sentences/s:
    docs/results.md), torch elsewhere or where torch's translations were begun; nothing is exported
    here (`nmt export` does that)."""
    begun = (translation_work(teacher, beam, "torch")[1] / TRANSLATIONS).is_file()
    if begun or engine_device("torch", device).type != "cpu":
        return "torch"
    try:
        require_onnx()
        for member in teacher.loaded.members or [teacher.loaded]:
            read_manifest(member.path)
    except NmtError:
        return "torch"
    return "onnx"


def training_sources(corpus: Path, cfg: DataConfig) -> list[str]:
    """Each source of the training split once, in corpus order, as the corpus writes it."""
    sources: dict[str, None] = {}
    for split, pair in _pairs(corpus, cfg):
        if split == "train":
            sources.setdefault(pair.src_text)
    return list(sources)


def _pairs(corpus: Path, cfg: DataConfig):
    """The corpus's pairs with their split, as training splits them; a dev or test set given as a
    file is read by the student itself, so its pairs are left out."""
    given = held_out_files(cfg)
    for split, pair in split_pairs(PairReader(corpus, cfg), cfg, SplitCounter(corpus), Overlap(), cfg.num_pairs):
        if split not in given:
            yield split, pair


def kept_translations(folder: Path, record: dict) -> list[str]:
    """The translations an earlier call wrote for these sources and this teacher (a line cut off
    by an interruption dropped); none, and a fresh record, where there are none or they were
    made for other sources."""
    path = folder / TRANSLATIONS
    try:
        kept = json.loads((folder / RECORD).read_text(encoding="utf-8"))
        same = all(kept.get(key) == record[key] for key in SAME_WORK)
    except (OSError, ValueError, AttributeError):
        same = False
    if not same or not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        write_text_atomically(folder / RECORD, json.dumps(record, indent=1) + "\n")
        return []
    data = path.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    if len(whole) < len(data):
        with open(path, "r+b") as f:
            f.truncate(len(whole))
    lines = whole.decode("utf-8").splitlines()
    logger.info("distillation: resuming after the %s translations %s holds", f"{len(lines):,}", path)
    return lines


def translate_into(path: Path, translator: Translator, sources: list[str], beam: int, total: int,
                   quiet: bool) -> list[str]:
    """Translate `sources`, appending each chunk's translations to `path` (synced) as it is done."""
    done: list[str] = []
    with open(path, "a", encoding="utf-8") as out, Meter(total, "distill", "sentences", quiet=quiet) as meter:
        meter.update(total - len(sources))
        try:
            for start in range(0, len(sources), CHUNK):
                chunk = [" ".join(t.split()) for t in translator.translate(sources[start:start + CHUNK], beam)]
                out.write("".join(line + "\n" for line in chunk))
                out.flush()
                os.fsync(out.fileno())
                done += chunk
                meter.update(len(chunk))
        except KeyboardInterrupt:
            raise NmtError(f"interrupted: {total - len(sources) + len(done):,} of {total:,} translations are kept "
                           f"in {path}; the same command resumes there") from None
    seconds = time.monotonic() - meter.start
    logger.info("distillation: %s sentences translated in %.0f s (%.1f sentences/s)", f"{len(done):,}", seconds,
                len(done) / max(seconds, 1e-9))
    return done


def write_student_corpus(path: Path, corpus: Path, cfg: DataConfig, translations: dict[str, str]) -> None:
    """Every pair of the teacher's corpus in its column order: a training pair with the teacher's
    translation for its target (one line per pair, as the corpus weighs its sources), a held-out
    pair as it is."""
    lines = []
    for split, pair in _pairs(corpus, cfg):
        target = translations[pair.src_text] if split == "train" else pair.tgt_text
        if not target:
            continue  # the teacher wrote nothing: no pair to learn from
        lines.append(f"{target}\t{pair.src_text}\n" if cfg.reverse else f"{pair.src_text}\t{target}\n")
    write_text_atomically(path, "".join(lines))
