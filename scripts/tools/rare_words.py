"""What the rare-word subset's rare words are, and how many of them copying could fix.

For each word of a rare-word test source that is outside the word vocabulary (the words `nmt eval`
calls rare): whether it holds a digit, whether the French side of the training split ever uses
it, and whether one of the source's own references writes it unchanged. Only the last kind can
be got right by copying it over; the others take knowing the French word.

    python scripts/tools/rare_words.py [--data PATH] [--config configs/default.yaml]
"""

from __future__ import annotations

import argparse
from collections import Counter

from nmt.config import load_config
from nmt.training.recipe import fit_to_corpus
from nmt.data.corpus import load_corpus
from nmt.data.vocab import Vocab
from nmt.evaluation.metrics import group_references
from nmt.evaluation.report import rare_word_sources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None)
    parser.add_argument("--config", default="configs/default.yaml")
    args = parser.parse_args()
    cfg = fit_to_corpus(load_config(args.config), args.data)
    _, splits = load_corpus(args.data, cfg.data)
    refs = group_references(splits.test)
    known = Vocab.build((p.src for p in splits.train), cfg.data.min_freq)  # as nmt eval's training words
    subset = refs.subset(rare_word_sources(refs, known))
    french = Counter(w for p in splits.train for w in p.tgt)

    kinds: Counter[str] = Counter()
    in_reference = 0
    for words, references in zip(subset.source_words, subset.legacy_references):
        for word in (w for w in words if w not in known.stoi):
            if any(c.isdigit() for c in word):
                kinds["hold a digit"] += 1
            elif french[word]:
                kinds["occur in the French training text"] += 1
            else:
                kinds["never occur in the French training text"] += 1
            in_reference += any(word in r.split() for r in references)
    total = sum(kinds.values())
    print(f"{len(subset.sources):,} rare-word test sources ({len(known):,}-word vocabulary), "
          f"{total:,} rare words in them:")
    for kind, count in kinds.most_common():
        print(f"  {count:4,} ({count / total:.0%}) {kind}")
    print(f"  {in_reference:4,} ({in_reference / total:.0%}) are written unchanged in one of their source's "
          "references: the most that copying can get right")


if __name__ == "__main__":
    main()
