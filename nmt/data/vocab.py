"""Vocabulary: token <-> id, with reserved specials and a deterministic order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)


class Vocab:
    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, tokens: list[str]):
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with {SPECIALS}")
        self.itos = list(tokens)
        self.stoi = {tok: i for i, tok in enumerate(self.itos)}

    @classmethod
    def build(cls, sentences: Iterable[list[str]], min_freq: int) -> Vocab:
        """Tokens seen at least `min_freq` times, most frequent first, ties broken by the token."""
        return cls.from_counts(Counter(tok for sentence in sentences for tok in sentence), min_freq)

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], min_freq: int) -> Vocab:
        """As `build`, from counts already made (one streaming pass over a large corpus)."""
        kept = sorted((t for t, c in counts.items() if c >= min_freq and t not in SPECIALS),
                      key=lambda t: (-counts[t], t))
        return cls(list(SPECIALS) + kept)

    def __len__(self) -> int:
        return len(self.itos)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def encode(self, tokens: list[str]) -> list[int]:
        return [self.stoi.get(tok, self.unk_id) for tok in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Ids to tokens, stopping at <eos> and skipping <pad>/<bos>."""
        out = []
        for i in ids:
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                out.append(self.itos[i])
        return out

    def save(self, path: Path) -> None:
        path.write_text("\n".join(self.itos) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Vocab:
        return cls(path.read_text(encoding="utf-8").splitlines())
