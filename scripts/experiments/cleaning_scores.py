"""Each cleaning rule's precision and recall on a corpus of known noise (`noisy_corpus.py`):
what it caught of each kind of noise, and the good pairs it dropped.

    python scripts/experiments/cleaning_scores.py PREPARED_FOLDER /tmp/noisy/fra-eng-30.tsv.labels

PREPARED_FOLDER is what `nmt prepare --data /tmp/noisy/fra-eng-30.tsv` made (its dropped.tsv names
each dropped pair's corpus line and rule). A line that the labels do not name is a pair of the
original corpus. (A repeated pair's original line may come after its first copy: the copy is kept
and the original dropped, counted here as a good pair dropped; at most the 40 pairs repeated.)
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

from nmt.data.cleaning.rules import RULES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prepared")
    parser.add_argument("labels")
    args = parser.parse_args()
    kinds = {int(line): kind for line, kind in (row.split("\t") for row in Path(args.labels).read_text().split("\n") if row)}
    manifest = json.loads((Path(args.prepared) / "manifest.json").read_text())
    by_rule: dict[str, Counter] = defaultdict(Counter)
    caught: Counter = Counter()
    for row in (Path(args.prepared) / "dropped.tsv").read_text(encoding="utf-8").split("\n"):
        if not row:
            continue
        rule, line = row.split("\t")[:2]
        kind = kinds.get(int(line), "good") if line else "good"
        by_rule[rule][kind] += 1
        caught[kind] += 1
    total = Counter(kinds.values())
    noise = sum(total.values())
    good = manifest["counts"]["train"] + sum(manifest["counts"]["dropped"].values()) - noise
    total["good"] = good
    print(f"training pairs judged: {noise:,} noise, {good:,} good (from the corpus)")
    print(f"{'rule':10s} {'dropped':>8s} {'precision':>9s}  " + "  ".join(f"{k[:12]:>12s}" for k in total))
    for rule in RULES:
        row = by_rule[rule]
        dropped = sum(row.values())
        precision = 1 - row["good"] / dropped if dropped else float("nan")
        print(f"{rule:10s} {dropped:8,} {100 * precision:8.1f}%  "
              + "  ".join(f"{row[k]:12,}" for k in total))
    print(f"{'recall':10s} {sum(caught.values()):8,} {'':9s}  "
          + "  ".join(f"{100 * caught[k] / total[k]:11.1f}%" for k in total))


if __name__ == "__main__":
    main()
