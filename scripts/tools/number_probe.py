"""A probe set for numbers, made from real sentences: every valid- and test-split pair whose
source holds a number, and each again with its numbers replaced by random ones of other lengths
and forms (1 to 6 digits, 3.5, 12,500, 7:45), seeded. Where the pair's numbers match one to one
(as data.protect matches them), the reference gets the same new numbers in French form; else it
keeps its own (the probe measures numbers, not BLEU). Score it like any test set:

    python scripts/tools/number_probe.py                 # -> data/number-probe.tsv (never committed)
    nmt eval --bleu -c runs/default --test data/number-probe.tsv

and read `numbers copied` (sources whose every number comes out unchanged) and `numbers
invented` (outputs printing a number their source does not hold).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.config import load_config  # noqa: E402
from nmt.training.recipe import fit_to_corpus  # noqa: E402
from nmt.data.corpus import load_splits, resolve_corpus  # noqa: E402
from nmt.data.protected_numbers import VERBATIM, SpanProtector, read_number  # noqa: E402


def random_number(rng: random.Random, avoid: str) -> str:
    """A number in English form, of another length or form than `avoid`."""
    while True:
        form = rng.choice(["int", "int", "int", "decimal", "thousands", "time"])
        if form == "int":
            digits = rng.randint(1, 6)
            text = str(rng.randrange(10 ** (digits - 1) if digits > 1 else 0, 10 ** digits))
        elif form == "decimal":
            text = f"{rng.randrange(100)}.{rng.randrange(1, 10)}"
        elif form == "thousands":
            text = f"{rng.randrange(1, 1000)},{rng.randrange(1000):03d}"
        else:
            text = f"{rng.randrange(1, 13)}:{rng.randrange(60):02d}"
        if len(text) != len(avoid):
            return text


def variant(src: str, ref: str, protector: SpanProtector, rng: random.Random) -> tuple[str, str]:
    """The pair with each source number replaced by a random one, and the reference alike where it matches."""
    protected_src, numbers = protector.protect_source(src)
    new = [read_number(random_number(rng, n.text), protector.source or VERBATIM) for n in numbers]
    protected_ref = protector.protect_pair(src, ref)[1]
    return protector.source_piece(protected_src, new), protector.target_piece(protected_ref, new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "configs" / "default.yaml"))
    parser.add_argument("--corpus", default=os.environ.get("NMT_CORPUS"))
    parser.add_argument("--variants", type=int, default=12, help="random-number copies of each sentence")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=str(REPO / "data" / "number-probe.tsv"))
    args = parser.parse_args()
    data = fit_to_corpus(load_config(args.config), None).data
    splits = load_splits(resolve_corpus(args.corpus, data), data.num_pairs, data)
    protector, rng = SpanProtector(data.source_lang, data.target_lang), random.Random(args.seed)
    real = [pair.raw for pair in splits.valid + splits.test if protector.numbers(pair.raw[0])]
    lines = [f"{src}\t{ref}" for src, ref in real]
    for _ in range(args.variants):
        lines += ["\t".join(variant(src, ref, protector, rng)) for src, ref in real]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(real)} valid/test pairs with numbers, {len(lines) - len(real)} variants: {len(lines)} pairs "
          f"-> {args.out}")


if __name__ == "__main__":
    main()
