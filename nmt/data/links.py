"""Word links of the training pairs, for guided alignment (`train.guided_alignment`) and the
alignment head (`model.alignment_head`).

eflomal (Östling and Tiedemann, 2016; the aligner Bergamot's students are guided by) aligns the
prepared training ids once, piece to piece (the units the attention reads), in both directions;
the links the two directions agree on are kept, precise one-to-one links (a piece left unlinked
is simply not guided). They are stored beside the prepared corpus as one more indexed store,
`train.links` (per pair: source position, target position, source position, ...), with a record
of the id stores they were computed from, so every run of the folder reads them from disk as it
reads the ids and no run aligns twice. Written to temporary files and renamed, record last, so
a prepare stopped while it aligns leaves the prepared ids as they were and the next start aligns
again, and only that.

eflomal holds every pair it aligns in one process, and its time grows with them: a corpus of
more than `MOST_ALIGNED` training pairs has an even sample aligned (every k-th pair of the
length-sorted store, so every length is in it), the others stored without links (not guided, as
a piece with no link is not). fra-eng's 162k pairs and any corpus up to a million are aligned whole.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from nmt.data.indexed import IndexedArray, IndexedWriter
from nmt.data.manifest import read_manifest
from nmt.data.prepare import locked
from nmt.errors import NmtError

logger = logging.getLogger(__name__)

LINKS, RECORD = "train.links", "train.links.json"
READ_CHUNK = 100_000  # pairs read from the id stores at once
# the most training pairs aligned: 1M pairs prepare in 85 s with their alignment, 617 MB (docs/data.md)
MOST_ALIGNED = 1_000_000


def training_links(folder: Path) -> IndexedArray:
    """The links of the prepared folder's training pairs, aligned now if missing or made from other
    ids (one process aligns; others wait under the folder's lock and then read them)."""
    with locked(folder):
        src, tgt = IndexedArray(folder / "train.src"), IndexedArray(folder / "train.tgt")
        every = -(-len(src) // MOST_ALIGNED)  # align every k-th pair: at most MOST_ALIGNED of them
        expected = {**_record(folder), **({"every": every} if every > 1 else {})}
        record = folder / RECORD
        if record.is_file() and json.loads(record.read_text(encoding="utf-8")) == expected:
            return IndexedArray(folder / LINKS)
        start = time.monotonic()
        chosen = -(-len(src) // every)
        logger.info("guided alignment: aligning %s training pairs with eflomal (once for this prepared corpus)%s",
                    f"{chosen:,}", "" if every == 1 else f": one in {every} of {len(src):,}, since eflomal holds "
                    f"them all in memory (at most {MOST_ALIGNED:,}); the others train without links")
        tmp = folder / f"{LINKS}.tmp-{os.getpid()}"
        writer = IndexedWriter(tmp, np.uint16)
        linked, none = 0, np.zeros(0, dtype=np.int64)
        aligned = agreed_links(id_lines(src, every), id_lines(tgt, every))
        for i in range(len(src)):
            links = next(aligned) if i % every == 0 else []  # (the pairs between two aligned ones: none)
            writer.add(np.array(links, dtype=np.int64).ravel() if links else none)
            linked += len(links)
        writer.close()
        record.unlink(missing_ok=True)  # no record while the pair of files is half replaced
        for suffix in (".bin", ".idx"):
            os.replace(f"{tmp}{suffix}", folder / f"{LINKS}{suffix}")
        Path(f"{tmp}.json").write_text(json.dumps(expected), encoding="utf-8")
        os.replace(f"{tmp}.json", record)
        logger.info("guided alignment: %s links (%.2f a target piece) in %.1f s", f"{linked:,}",
                    linked / max(1, int(tgt.sizes().sum())), time.monotonic() - start)
        return IndexedArray(folder / LINKS)


def _record(folder: Path) -> dict:
    """What the stored links were computed from: the training id stores, by their sha256."""
    manifest = read_manifest(folder) or {}
    files = manifest.get("files", {})
    return {"aligner": "eflomal, agreed links of both directions",
            "ids": {name: files.get(name, {}).get("sha256") for name in ("train.src.bin", "train.tgt.bin")}}


def id_lines(store: IndexedArray, every: int = 1) -> Iterator[str]:
    """An id store's sequences (every `every`-th) as the aligner reads them: ids as words, a chunk
    of the store at a time."""
    for start in range(0, len(store), READ_CHUNK * every):
        for ids in store.run(start, min(start + READ_CHUNK * every, len(store)))[::every]:
            yield " ".join(map(str, ids.tolist()))


def aligner_installed() -> bool:
    """Whether eflomal, which `agreed_links` imports, is there to import (the `align` extra)."""
    return importlib.util.find_spec("eflomal") is not None


def agreed_links(src_lines: Iterable[str], tgt_lines: Iterable[str]) -> Iterator[list[tuple[int, int]]]:
    """Per pair of lines (whitespace-separated tokens), the (source position, target position)
    links both of eflomal's directions give, in order. The experiments' aligners call this too."""
    try:
        import eflomal
    except ImportError:
        raise NmtError("eflomal is not installed (guided alignment, the alignment head and the alignment "
                       "experiments need it): pip install eflomal, or pip install -e '.[align]'; or train with "
                       "train.guided_alignment: 0 and model.alignment_head: false") from None
    with tempfile.TemporaryDirectory() as tmp:
        forward, reverse = Path(tmp) / "fwd", Path(tmp) / "rev"
        # (an empty side: one token that links nowhere in the sentence's real tokens)
        eflomal.Aligner().align((line or "_" for line in src_lines), (line or "_" for line in tgt_lines),
                                links_filename_fwd=str(forward), links_filename_rev=str(reverse), quiet=True)
        with forward.open() as f, reverse.open() as r:
            for a, b in zip(f, r):
                yield sorted(tuple(map(int, link.split("-"))) for link in set(a.split()) & set(b.split()))
