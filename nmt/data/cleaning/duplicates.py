"""The `duplicates` rule over millions of pairs in little memory: a Bloom filter of the pairs' keys
(`rules.pair_key`), sized from the corpus's bytes (32 bits a pair of about 40 bytes, 4 probes: one
pair in about 5,000 taken for a duplicate it is not), tested and filled a chunk at a time with numpy.
A set of 36 million keys would hold about 2.5 GB; the filter of a 36M-pair corpus, 0.3 GB."""

from __future__ import annotations

import numpy as np

PROBES = 4
BITS_A_BYTE = 0.8  # of corpus: 32 bits a pair of 40 bytes
SMALLEST = 1 << 20


class SeenPairs:
    def __init__(self, corpus_bytes: int):
        bits = max(SMALLEST, int(corpus_bytes * BITS_A_BYTE))
        self.bits = np.zeros((bits + 7) // 8, np.uint8)
        self.size = np.uint64(len(self.bits) * 8)

    def repeated(self, keys: np.ndarray) -> np.ndarray:
        """For each key (int64) in order, whether an earlier key (of this chunk or one before) equals it."""
        if not len(keys):
            return np.zeros(0, bool)
        keys = keys.astype(np.int64).view(np.uint64)
        first = np.zeros(len(keys), bool)
        first[np.unique(keys, return_index=True)[1]] = True
        low, high = keys & np.uint64(0xFFFFFFFF), (keys >> np.uint64(32)) | np.uint64(1)
        places = [(low + np.uint64(i) * high) % self.size for i in range(PROBES)]
        seen = np.ones(len(keys), bool)
        for place in places:
            seen &= (self.bits[place >> np.uint64(3)] >> (place & np.uint64(7)).astype(np.uint8)) & 1 == 1
        for place in places:
            np.bitwise_or.at(self.bits, place >> np.uint64(3), np.left_shift(np.uint8(1), (place & np.uint64(7)).astype(np.uint8)))
        return seen | ~first
