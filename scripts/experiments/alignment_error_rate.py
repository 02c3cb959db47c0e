"""How good are the attention's word alignments? AER against a gold English-French alignment.

The gold set is one a user fetches (none is committed): for example the Canadian Hansards fragment
of the JHU machine-translation class (hansards.e, hansards.f: tokenized English and French, one
sentence a line; hansards.a: Ulrich Germann's alignment of the first 37 sentences, "i-j" French
word i to English word j sure, "i?j" possible, from 0). For each gold sentence pair the model
scores the given French (forced decoding) and its attention aligns each French word to one
English word (what `--align` printed first), each English word to one French word (what `--align`
and `--markup` read since),
the links both directions agree on and their union. Prints the alignment error rate (Och and Ney:
1 - (|A&S| + |A&P|) / (|A| + |S|), lower is better) with precision and recall, beside a baseline
that aligns French word i to the English word at the same relative position.

    python scripts/experiments/alignment_error_rate.py -c runs/default --e hansards.e --f hansards.f --a hansards.a
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import nmt  # noqa: E402
from nmt.inference.words import text_words, words_of  # noqa: E402


def read_gold(line: str) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """Sure and possible (French, English) links of one line; possible includes sure."""
    sure, possible = set(), set()
    for link in line.split():
        mark = "-" if "-" in link else "?"
        f, e = (int(x) for x in link.split(mark))
        possible.add((f, e))
        if mark == "-":
            sure.add((f, e))
    return sure, possible


def token_spans(words: list[str], tokens: list[str]) -> list[list[int]] | None:
    """Which of the gold `tokens` each of the model's `words` spells (the model joins "complex ,"
    into "complex,"); None where the characters do not add up."""
    spans = [group for _, group in text_words(" ".join(words), tokens)]
    spelled = [sum(len(tokens[i]) for i in group) for group in spans]
    if spelled != [len(w) for w in words] or sum(len(g) for g in spans) != len(tokens):
        return None
    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", "--checkpoint", required=True)
    parser.add_argument("--e", required=True, help="English sentences, tokenized, one a line")
    parser.add_argument("--f", required=True, help="French sentences, line-aligned")
    parser.add_argument("--a", required=True, help="gold alignments of the first lines: i-j sure, i?j possible")
    args = parser.parse_args()
    model = nmt.load(args.checkpoint)
    gold = [read_gold(line) for line in Path(args.a).read_text(encoding="utf-8").splitlines()]
    with open(args.e, encoding="utf-8") as e_file, open(args.f, encoding="utf-8") as f_file:
        pairs = [(e.strip(), f.strip()) for e, f in itertools.islice(zip(e_file, f_file), len(gold))]
    names = ("each French word's English word", "each English word's French word (--align, --markup)",
             "  the same without the step past frequent words", "both directions agree",
             "either direction (their union)", "same relative position")
    counts = {name: [0, 0, 0, 0] for name in names}  # A&S, A&P, |A|, |S|
    skipped = 0
    for (english, french), (sure, possible) in zip(pairs, gold):
        given = model.score(english, french)[0]
        attention = model.attention(english, given.tokens)
        spans = token_spans([w for w, _ in words_of(attention.src_tokens)], english.split())
        e_tokens, f_tokens = english.split(), french.split()
        if spans is None or given.words != f_tokens:
            skipped += 1
            continue
        def on_gold(links: list[tuple[int, int]]) -> set[tuple[int, int]]:
            # a word the model reads as several gold tokens ("complex,") links through its longest one
            return {(f, max(spans[s], key=lambda i: len(e_tokens[i]))) for s, f in links}

        by_output = on_gold(attention.alignment(given, each_output_word=True))
        by_source = on_gold(attention.alignment(given, frequent=model.frequent))
        unstepped = on_gold(attention.alignment(given))
        diagonal = {(f, round(f * (len(e_tokens) - 1) / max(len(f_tokens) - 1, 1))) for f in range(len(f_tokens))}
        for name, links in zip(names, (by_output, by_source, unstepped, by_output & by_source, by_output | by_source,
                                       diagonal)):
            c = counts[name]
            c[0] += len(links & sure)
            c[1] += len(links & possible)
            c[2] += len(links)
            c[3] += len(sure)
    print(f"{len(pairs) - skipped} of {len(pairs)} gold sentence pairs scored ({skipped} skipped: their words "
          f"did not map onto the gold tokens)")
    for name, (a_s, a_p, a, s) in counts.items():
        aer = 1 - (a_s + a_p) / (a + s)
        print(f"{name}: AER {100 * aer:.1f}% | precision {100 * a_p / a:.1f}% | recall {100 * a_s / s:.1f}% "
              f"({a:,} links, {s:,} sure gold links)")


if __name__ == "__main__":
    main()
