"""Whether a prepared folder is the one a corpus and a data config need: where it lives (a hash of
both), the corpus's fingerprint, the manifest the prepare writes last, and, in one line, why a
folder cannot be trusted (`stale_reason`): then `nmt.data.prepare` rebuilds it."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

from nmt.config import DataConfig
from nmt.data.corpus import HELD_OUT_MAX, held_out_files, language_files
from nmt.data.vocab import Vocab

FORMAT = 4  # raise when the files or their meaning change: older folders are then rebuilt (4: cleaning)
MANIFEST = "manifest.json"
# The data config keys that shape the prepared files (not max_len: pairs are filtered when read).
SHAPING = ("src_lang", "tgt_lang", "reverse", "num_pairs", "min_freq", "tokenizer", "vocab_size", "subword_type",
           "split_digits", "subword_sample", "drop_empty", "drop_junk", "drop_copies", "drop_language", "drop_ratio",
           "drop_duplicates")
# what makes the tokenizer and vocabularies (so a run started from another's must match it): the
# shaping keys but the pair count and the cleaning rules, with data.protect's reserved placeholders
VOCABULARY_KEYS = tuple(key for key in SHAPING if key != "num_pairs" and not key.startswith("drop_")) + ("protect",)


def shaping_config(cfg: DataConfig) -> dict[str, Any]:
    shaping = {key: getattr(cfg, key) for key in SHAPING}
    shaping["joint_vocab"] = False  # (a removed key: every folder was prepared with it off, and keeps its place)
    held_out = held_out_files(cfg)
    if held_out:  # only then, so that folders prepared before these keys existed stay valid
        shaping.update({split: str(path.resolve()) for split, path in held_out.items()},
                       drop_overlap=cfg.drop_overlap)
    if cfg.protect:  # likewise
        shaping["protect"] = True
    if cfg.tags():  # likewise: the source model reserves them
        shaping["tags"] = cfg.tags()
    return shaping


def corpus_files(corpus: Path, cfg: DataConfig) -> list[Path]:
    return [corpus] if corpus.is_file() else list(language_files(corpus, cfg))


def corpus_name(corpus: Path) -> str:
    return corpus.name[: -len(corpus.suffix)] if corpus.suffix in (".zip", ".txt", ".tsv") else corpus.name


def prepared_path(corpus: Path, cfg: DataConfig, vocab_key: str | None = None) -> Path:
    """The folder of this corpus under this data config (and, for a resumed run whose vocabulary
    the learned one does not match, under that vocabulary): PREPARED_DIR/<corpus>-<key>."""
    key = json.dumps({"corpus": str(corpus.resolve()), "data": shaping_config(cfg), "vocab": vocab_key},
                     sort_keys=True)
    return Path(cfg.prepared_dir) / f"{corpus_name(corpus)}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def vocab_key(src_vocab: Vocab, tgt_vocab: Vocab) -> str:
    return hashlib.sha256("\n".join([*src_vocab.itos, "\t", *tgt_vocab.itos]).encode()).hexdigest()[:16]


# The corpus's fingerprint ------------------------------------------------------------------------

def content_hash(files: list[Path]) -> str:
    """What the corpus says: a zip's member CRC (its central directory already holds a hash of the
    text, so nothing is read), else sha256 of the files' bytes."""
    if len(files) == 1 and zipfile.is_zipfile(files[0]):
        with zipfile.ZipFile(files[0]) as archive:
            infos = [i for i in archive.infolist() if i.filename.endswith(".txt")]
            return "zip-crc32:" + ",".join(f"{i.filename}:{i.CRC:08x}:{i.file_size}" for i in infos)
    return "sha256:" + file_sha256(*files)


def fingerprint(corpus: Path, cfg: DataConfig) -> dict[str, Any]:
    files = corpus_files(corpus, cfg)
    return {"path": str(corpus.resolve()), "files": [file_stat(f) for f in files], "content": content_hash(files)}


def file_stat(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def corpus_change(stored: dict[str, Any], corpus: Path, cfg: DataConfig) -> str | None:
    """Why the corpus is not the one prepared, or None. Sizes first, then the mtimes; a file
    touched but unchanged (copied, restored) is recognised by its content hash."""
    files = corpus_files(corpus, cfg)
    now = [file_stat(f) for f in files]
    if len(now) != len(stored["files"]) or any(a["size"] != b["size"] for a, b in zip(now, stored["files"])):
        return "the corpus changed since it was prepared (its size differs)"
    if now != stored["files"] and content_hash(files) != stored["content"]:
        return "the corpus changed since it was prepared (its content differs)"
    return None


# Is a prepared folder right? ---------------------------------------------------------------------

def read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def stale_reason(folder: Path, corpus: Path, cfg: DataConfig, vocab: str | None) -> str | None:
    """Why `folder` cannot be used as it is, or None. Files are checked by size (truncation) and,
    where their mtime moved since the prepare, by their sha256 (corruption)."""
    manifest = read_manifest(folder)
    if manifest is None:
        return f"no prepared data in {folder}{_other_config(folder, corpus, cfg)}"
    if manifest.get("format") != FORMAT:
        return f"{folder} holds format {manifest.get('format')}; this nmt reads format {FORMAT}"
    if manifest.get("data") != shaping_config(cfg) or manifest.get("vocab") != vocab:
        return f"{folder} was prepared for another data config{_config_diff(manifest.get('data') or {}, cfg)}"
    if reason := corpus_change(manifest["corpus"], corpus, cfg):
        return reason
    unbounded = [split for split in ("valid", "test") if split not in held_out_files(cfg)
                 and manifest["counts"][split] > HELD_OUT_MAX and manifest.get("held_out_max") != HELD_OUT_MAX]
    if unbounded:
        return (f"{folder}'s {unbounded[0]} split holds {manifest['counts'][unbounded[0]]:,} pairs, prepared before "
                f"held-out splits were bounded to about {HELD_OUT_MAX:,}")
    for split, path in held_out_files(cfg).items():
        stored = (manifest.get("held_out") or {}).get(split)
        if stored is None or corpus_change(stored, path, cfg):
            return f"data.{split} {path} changed since it was prepared"
    for name, stored in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing from {folder}"
        now = file_stat(path)
        if now["size"] != stored["size"]:
            return f"{name} is truncated or grown ({now['size']:,} bytes, the manifest says {stored['size']:,})"
        if now["mtime_ns"] != stored["mtime_ns"] and file_sha256(path) != stored["sha256"]:
            return f"{name} is corrupt (its sha256 differs from the manifest's)"
    return None


def file_sha256(*paths: Path) -> str:
    """The sha256 of the files' bytes end to end, read in blocks (corpora and checkpoints can be GBs)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            while block := f.read(1 << 22):
                digest.update(block)
    return digest.hexdigest()


def _config_diff(stored: dict[str, Any], cfg: DataConfig) -> str:
    changed = [f"data.{k} {stored.get(k)!r} -> {v!r}" for k, v in shaping_config(cfg).items() if stored.get(k) != v]
    return f" ({', '.join(changed)})" if changed else ""


def _other_config(folder: Path, corpus: Path, cfg: DataConfig) -> str:
    """When the same corpus was prepared under another data config: which keys changed."""
    others = []
    for sibling in folder.parent.glob(f"{corpus_name(corpus)}-*"):
        manifest = read_manifest(sibling)
        if sibling != folder and manifest and manifest["corpus"]["path"] == str(corpus.resolve()):
            others.append((sibling.stat().st_mtime, sibling, manifest))
    if not others:
        return ""
    _, sibling, manifest = max(others, key=lambda o: o[0])
    return f"; the data config changed since {sibling.name} was prepared{_config_diff(manifest['data'], cfg)}"
