"""Sequences on disk: one flat `.bin` of values and an `.idx` of sizes and offsets (fairseq's
MMapIndexedDataset's layout, without its wrappers), so a corpus of millions of sentences costs
the page cache, not the heap. Token ids take uint16 where the vocabulary fits; the raw text of a
split is the same structure over UTF-8 bytes.

Sequences are read with pread, not through a memory map: a mapped page counts in the process's
resident memory, and the kernel maps 64 KB around each random read (fault-around), so a run
over 36 million pairs would show GBs of the stores as its own within minutes. Read, the pages
stay in the page cache, shared and reclaimable, and the process holds only what it asked for.

`.idx`: the magic bytes, the format version, a dtype code and the count, each 8 bytes, then
int32 sizes (count) and int64 offsets (count + 1) into `.bin`, in values.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

MAGIC = b"NMTIDX\x00\x00"
VERSION = 1
DTYPES = {1: np.uint8, 2: np.uint16, 3: np.uint32}
HEADER_BYTES = 32
INDEX_SLICE = 1 << 20  # sequences a slice of the index is written in


def _file(base: Path, suffix: str) -> Path:
    return base.with_name(base.name + suffix)


def ids_dtype(vocab_size: int) -> type:
    """The smallest dtype that holds every id of a vocabulary."""
    return np.uint16 if vocab_size <= 1 << 16 else np.uint32


class IndexedWriter:
    """Appends sequences to PREFIX.bin and, on close, writes PREFIX.idx; hashes both as it writes
    (`digests`: file name -> sha256), so checking them later needs no second read."""

    def __init__(self, base: Path, dtype: type):
        self.base, self.dtype = base, np.dtype(dtype)
        self.code = next(code for code, d in DTYPES.items() if np.dtype(d) == self.dtype)
        self.bin = open(_file(base, ".bin"), "wb")
        self.bin_hash = hashlib.sha256()
        self.sizes = array("i")
        self.digests: dict[str, str] = {}

    def add_array(self, values: np.ndarray, sizes: Sequence[int]) -> None:
        """Many sequences at once: their values concatenated, and their sizes."""
        data = np.ascontiguousarray(values, dtype=self.dtype).tobytes()
        self.bin.write(data)
        self.bin_hash.update(data)
        self.sizes.extend(sizes)

    def add(self, values: Sequence[int] | bytes) -> None:
        if isinstance(values, bytes) and self.dtype == np.uint8:  # a text store: a line at a time, kept cheap
            self.bin.write(values)
            self.bin_hash.update(values)
            self.sizes.append(len(values))
            return
        self.add_array(np.frombuffer(values, np.uint8) if isinstance(values, bytes) else np.asarray(values),
                       [len(values)])

    def close(self) -> None:
        self.bin.close()
        sizes = np.frombuffer(self.sizes, dtype=np.int32) if len(self.sizes) else np.zeros(0, np.int32)
        idx_hash = hashlib.sha256()
        with open(_file(self.base, ".idx"), "wb") as f:
            def put(data: bytes) -> None:
                f.write(data)
                idx_hash.update(data)

            # Written a slice at a time: 36M sequences' offsets whole would be 288 MB, and each copy as much again.
            put(MAGIC + np.array([VERSION, self.code, len(sizes)], dtype="<u8").tobytes())
            for start in range(0, len(sizes), INDEX_SLICE):
                put(sizes[start:start + INDEX_SLICE].astype("<i4").tobytes())
            put(np.zeros(1, "<i8").tobytes())
            total = 0
            for start in range(0, len(sizes), INDEX_SLICE):
                offsets = np.cumsum(sizes[start:start + INDEX_SLICE], dtype=np.int64) + total
                put(offsets.astype("<i8").tobytes())
                total = int(offsets[-1])
        self.digests = {_file(self.base, ".bin").name: self.bin_hash.hexdigest(),
                        _file(self.base, ".idx").name: idx_hash.hexdigest()}


class IndexedArray:
    """PREFIX.bin and PREFIX.idx, read on demand: `array[i]` is sequence i, `array.run(a, b)`
    sequences a to b - 1 in two reads."""

    def __init__(self, base: Path):
        idx = _file(base, ".idx")
        with open(idx, "rb") as f:  # the header alone: the sizes and offsets after it can be GBs
            head = f.read(HEADER_BYTES)
        if len(head) < HEADER_BYTES or head[:8] != MAGIC:
            raise ValueError(f"{idx} is not an nmt index file")
        version, code, count = np.frombuffer(head[8:], dtype="<u8").tolist()
        if version != VERSION or code not in DTYPES:
            raise ValueError(f"{idx}: index format {version}, dtype {code} is not this version's")
        self.idx, self.count, self.dtype = idx, count, np.dtype(DTYPES[code])
        self.offsets_at = HEADER_BYTES + 4 * count  # where the offsets start in the .idx
        # Unbuffered files, read at positions: shared safely by forked processes (pread has no seek).
        self.idx_file, self.bin_file = open(idx, "rb", buffering=0), open(_file(base, ".bin"), "rb", buffering=0)

    def __len__(self) -> int:
        return self.count

    def sizes(self, start: int = 0, count: int | None = None) -> np.ndarray:
        """The sizes of `count` sequences from `start` (all by default)."""
        count = self.count - start if count is None else max(0, min(count, self.count - start))
        return np.frombuffer(os.pread(self.idx_file.fileno(), 4 * count, HEADER_BYTES + 4 * start), "<i4")

    def run(self, start: int, stop: int) -> list[np.ndarray]:
        """Sequences start to stop - 1: their offsets in one read, their values in another."""
        if not 0 <= start <= stop <= self.count:
            raise IndexError(f"sequences {start}:{stop} of {self.count} in {self.idx}")
        if stop == start:
            return []
        offsets = np.frombuffer(os.pread(self.idx_file.fileno(), 8 * (stop - start + 1), self.offsets_at + 8 * start),
                                "<i8").tolist()
        first, size = offsets[0], self.dtype.itemsize
        values = np.frombuffer(os.pread(self.bin_file.fileno(), (offsets[-1] - first) * size, first * size), self.dtype)
        return [values[a - first: b - first] for a, b in zip(offsets[:-1], offsets[1:])]

    def __getitem__(self, i: int) -> np.ndarray:
        i = i + self.count if i < 0 else i
        return self.run(i, i + 1)[0]

    def __del__(self) -> None:
        for file in (getattr(self, "idx_file", None), getattr(self, "bin_file", None)):
            if file is not None:
                file.close()

    def text(self, i: int) -> str:
        """Sequence i of a text store, decoded."""
        return self[i].tobytes().decode("utf-8")

    def texts(self, indices: Iterable[int]) -> list[str]:
        if isinstance(indices, range) and indices.step == 1:  # a chunk of the store: two reads in all
            return [x.tobytes().decode("utf-8") for x in self.run(indices.start, indices.stop)]
        return [self.text(int(i)) for i in indices]


def closed(writers: Iterable[IndexedWriter]) -> dict[str, str]:
    """Close the stores' writers; the sha256 of every file they wrote, by file name."""
    digests: dict[str, str] = {}
    for writer in writers:
        writer.close()
        digests.update(writer.digests)
    return digests
