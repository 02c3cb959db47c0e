"""Teaching the model to copy (data.copy_augment): in a share of the training pairs, each name
and number that both sides write the same way is replaced, on both sides alike, by one drawn at
random, anew each epoch.

The corpus says "Tom" in thousands of pairs, so a model learns to translate "Tom" as it learns
"chat", and garbles a name or number it has never seen. Pairs where "Tom" became "Vazoruk"
and "3" became "482" can only be learnt by copying, piece by piece.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

# A run of digits, or a capitalized word of two letters or more: the names and numbers a
# translation keeps as they are. Only those both sides write identically are replaced.
COPYABLE = re.compile(r"\b(?:\d+|[^\W\d_][^\W\d_A-Z]+)\b")
CONSONANTS, VOWELS = "bcdfghjklmnprstvwz", "aeiouy"


def random_like(word: str, rng: random.Random) -> str:
    """A number of 1 to 4 digits for a number, else a capitalized made-up name of 2 to 4 syllables."""
    if word.isdigit():
        return str(rng.randrange(10)) if rng.random() < 0.3 else str(rng.randrange(10, 10 ** rng.randint(2, 4)))
    syllables = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.randint(2, 4)))
    return syllables.capitalize() + (rng.choice(CONSONANTS) if rng.random() < 0.5 else "")


def shared_copyable(src: str, tgt: str) -> list[str]:
    """The names and numbers written the same in both sentences, in the source's order."""
    target = set(COPYABLE.findall(tgt))
    found = [w for w in COPYABLE.findall(src) if w in target and (w.isdigit() or w[0].isupper())]
    return list(dict.fromkeys(found))


def replace_shared(pair: tuple[str, str], shared: Sequence[str], rng: random.Random) -> tuple[str, str]:
    """`pair` with each of its `shared` names and numbers replaced by a random one, alike on both sides."""
    new = {word: random_like(word, rng) for word in shared}
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, shared)) + r")\b")
    src, tgt = (pattern.sub(lambda m: new[m.group(0)], text) for text in pair)
    return src, tgt


def replace_copyable(pairs: Sequence[tuple[str, str]], share: float, rng: random.Random
                     ) -> list[tuple[str, str]]:
    """`pairs` with, in each pair that has shared names or numbers, with probability `share`,
    every one of them replaced by a random one (the same on both sides)."""
    out = []
    for pair in pairs:
        shared = shared_copyable(*pair)
        out.append(replace_shared(pair, shared, rng) if shared and rng.random() < share else pair)
    return out
