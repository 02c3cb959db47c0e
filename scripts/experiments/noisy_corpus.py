"""A noisy copy of a parallel corpus: the kinds of noise the literature names, added to its
training split only, so that cleaning can be measured against known answers.

    python scripts/experiments/noisy_corpus.py --data data/fra-eng.zip --other multi30k.de \
        --share 0.3 --out /tmp/noisy/fra-eng-30.tsv

Every line of the corpus is kept as it is (its dev and test pairs stay the same: `nmt`'s md5 split
is the source's), and noise pairs amounting to `--share` of the training pairs are inserted at
random places, in equal shares of six kinds (after Khayrallah and Koehn, 2018, "On the Impact of
Various Types of Noise on Neural Machine Translation", and what web crawls and exported memories hold):

- `untranslated`: the source copied as the target;
- `misaligned`: a source beside the target of a pair a few lines away (a shifted alignment);
- `wrong_language`: one side replaced by a sentence of another corpus (`--other`, e.g. Multi30k's German);
- `short`: both sides cut to their first one or two words;
- `junk`: raw crawl debris: navigation menus, markup and entities around a pair, mojibake (UTF-8 read as
  cp1252), bare addresses;
- `duplicate`: a few training pairs repeated hundreds of times.

A noise pair whose source would fall in the dev or test split is drawn again. Beside the corpus,
`OUT.labels` lists each noise line's number and kind (what `nmt prepare`'s dropped pairs are scored
against). The corpus is written under the path given (keep it out of git: /tmp or data/).
"""

from __future__ import annotations

import argparse
import gzip
import random
from collections import Counter
from pathlib import Path

from nmt.config import DataConfig
from nmt.data.corpus import PairReader, split_of
from nmt.data.tokenizer import TOKENIZER

KINDS = ("untranslated", "misaligned", "wrong_language", "short", "junk", "duplicate")
REPEATED = 40  # distinct pairs the `duplicate` kind repeats
MENUS = [("Home | About us | Contact | Login", "Accueil | Qui sommes-nous | Contact | Connexion"),
         ("Previous page Next page", "Page précédente Page suivante"),
         ("All rights reserved.", "Tous droits réservés."),
         ("Click here", "Cliquez ici"),
         ("Share on Facebook Tweet", "Partager sur Facebook Tweeter")]


def read_other(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def junk(rng: random.Random, src: str, tgt: str) -> tuple[str, str]:
    kind = rng.randrange(5)
    if kind == 0:
        return rng.choice(MENUS)
    if kind == 1 and (broken := tgt.encode("utf-8").decode("cp1252", errors="replace")) != tgt:
        return src, broken
    if kind in (1, 2):
        return (f'<div class="content"><p>{src}&nbsp;</p></div>',
                f'<div class="content"><p>{tgt}&nbsp;&raquo;</p></div>')
    if kind == 3:
        page = rng.randrange(1, 10_000)
        return f"http://www.example-shop.com/index.php?page={page}", f"http://www.example-shop.com/fr/index.php?page={page}"
    return f"{src} {rng.choice(MENUS)[0]}", f"{tgt} © 2013 {rng.choice(MENUS)[1]}"


def short(rng: random.Random, src: str, tgt: str) -> tuple[str, str]:
    return " ".join(src.split()[:rng.randint(1, 2)]), " ".join(tgt.split()[:rng.randint(1, 2)])


def noise_pair(kind: str, rng: random.Random, train: list[tuple[str, str]], i: int, other: list[str],
               repeated: list[tuple[str, str]]) -> tuple[str, str]:
    src, tgt = train[i]
    if kind == "untranslated":
        return src, src
    if kind == "misaligned":
        for offset in range(rng.randint(2, 40), len(train)):
            neighbour = train[(i + offset) % len(train)]
            if neighbour[0] != src:
                return src, neighbour[1]
    if kind == "wrong_language":
        return (src, rng.choice(other)) if rng.random() < 0.5 else (rng.choice(other), tgt)
    if kind == "short":
        return short(rng, src, tgt)
    if kind == "junk":
        return junk(rng, src, tgt)
    return rng.choice(repeated)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data/fra-eng.zip")
    parser.add_argument("--other", required=True, help="a text file (or .gz) of sentences in a third language")
    parser.add_argument("--share", type=float, default=0.3, help="noise pairs per training pair")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rng, cfg = random.Random(args.seed), DataConfig()
    lines: list[tuple[str, str]] = []
    train: list[tuple[str, str]] = []
    for _, first, second in PairReader(Path(args.data), cfg):
        if first is None or second is None:
            continue
        lines.append((first.strip(), second.strip()))
        if split_of(TOKENIZER.preprocess(first)) == "train":
            train.append(lines[-1])
    other, repeated = read_other(Path(args.other)), rng.sample(train, REPEATED)
    total = round(args.share * len(train))
    noise: list[tuple[str, str, str]] = []
    for n in range(total):
        kind = KINDS[n % len(KINDS)]
        while True:
            src, tgt = noise_pair(kind, rng, train, rng.randrange(len(train)), other, repeated)
            if src.strip() and tgt.strip() and split_of(TOKENIZER.preprocess(src)) == "train":
                break
        noise.append((kind, src.replace("\t", " "), tgt.replace("\t", " ")))
    places = sorted(rng.choices(range(len(lines) + 1), k=len(noise)))
    rng.shuffle(noise)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    number, at = 0, 0
    with open(out, "w", encoding="utf-8") as corpus, open(f"{out}.labels", "w", encoding="utf-8") as labels:
        for index, pair in enumerate(lines + [None]):
            while at < len(noise) and places[at] == index:
                kind, src, tgt = noise[at]
                number += 1
                corpus.write(f"{src}\t{tgt}\n")
                labels.write(f"{number}\t{kind}\n")
                at += 1
            if pair is not None:
                number += 1
                corpus.write(f"{pair[0]}\t{pair[1]}\n")
    counts = Counter(kind for kind, _, _ in noise)
    print(f"{out}: {number:,} lines, {len(train):,} clean training pairs, {len(noise):,} noise pairs "
          f"({', '.join(f'{k} {counts[k]:,}' for k in KINDS)})")


if __name__ == "__main__":
    main()
