"""How a corpus's target side writes times, thousands and decimals: the counts behind the
conventions nmt/data/protected_numbers.py restores numbers in (for fra-eng's French: 7h45, 30 000, 3,5).

    python scripts/tools/number_forms.py                      # data/fra-eng.zip, or $NMT_CORPUS
    python scripts/tools/number_forms.py --corpus my.tsv

Prints counts of sentences only, no corpus text.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.config import DataConfig  # noqa: E402
from nmt.data.corpus import PairReader  # noqa: E402

FORMS = {
    "time 7h45": r"\b\d{1,2}h\d{2}\b",
    "time 7 h 45": r"\b\d{1,2} h \d{2}\b",
    "time 7:45": r"\b\d{1,2}:\d{2}\b",
    "thousands 30 000 (space)": r"\d \d{3}\b",
    "thousands 30\u00a0000 (no-break space)": r"\d[\u00a0\u202f]\d{3}\b",
    "thousands 30.000": r"\d\.\d{3}\b",
    "thousands 30,000": r"\d,\d{3}\b",
    "decimal 3,5": r"\d,(?!\d{3}\b)\d+",
    "decimal 3.5": r"\d\.(?!\d{3}\b)\d+",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=os.environ.get("NMT_CORPUS", str(REPO / "data" / "fra-eng.zip")))
    args = parser.parse_args()
    counts: Counter = Counter()
    patterns = {name: re.compile(p) for name, p in FORMS.items()}
    for _, _, target in PairReader(Path(args.corpus), DataConfig()):
        if target is None:
            continue
        counts.update(name for name, pattern in patterns.items() if pattern.search(target))
    for name in FORMS:
        print(f"{counts[name]:6,}  {name}")


if __name__ == "__main__":
    main()
