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
that aligns French word i to the English word at the same relative position. Each table is printed
twice: on the gold set's text as it is (lowercased, "de les", "je ai") and on the same sentences as
a user writes them (`written`), which the model's training text resembles.

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
from nmt.inference.text.glossary import elides_before  # noqa: E402
from nmt.inference.text.words import text_words, words_of  # noqa: E402


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
    for natural in (False, True):
        print("as the gold set writes them (lowercased, \"de les\", \"je ai\")" if not natural else
              "\nin the text a user writes (contractions and elisions made, hyphens and apostrophes joined, "
              "first letters capitalized; each word linked through its longest gold token)")
        score(model, pairs, gold, natural)


NAMES = ("each French word's English word", "each English word's French word (--align, --markup)",
         "  the same without the step past frequent words", "both directions agree",
         "either direction (their union)", "same relative position")


def score(model, pairs: list[tuple[str, str]], gold: list, natural: bool) -> None:
    """Each way of linking's AER on the gold pairs, given to the model as the gold set writes them or
    (`natural`) as a user would; the links are scored on the gold tokens either way."""
    counts = {name: [0, 0, 0, 0] for name in NAMES}  # A&S, A&P, |A|, |S|
    skipped = 0
    for (english, french), (sure, possible) in zip(pairs, gold):
        e_tokens, f_tokens = english.split(), french.split()
        e_text, f_text, f_words = english, french, [[i] for i in range(len(f_tokens))]
        if natural:
            (e_text, _), (f_text, f_words) = written(e_tokens), written(f_tokens, french=True)
        given = model.score(e_text, f_text)[0]
        attention = model.attention(e_text, given.tokens)
        e_spans = token_spans([w for w, _ in words_of(attention.src_tokens)], e_tokens)
        if e_spans is None or given.words != f_text.split():
            skipped += 1
            continue

        def on_gold(links: list[tuple[int, int]]) -> set[tuple[int, int]]:
            # a word the model reads as several gold tokens ("complex,", "du") links through its longest one
            return {(longest(f_words[f], f_tokens), longest(e_spans[s], e_tokens)) for s, f in links}

        by_output = on_gold(attention.alignment(given, each_output_word=True))
        by_source = on_gold(attention.alignment(given, frequent=model.frequent))
        unstepped = on_gold(attention.alignment(given))
        diagonal = {(f, round(f * (len(e_tokens) - 1) / max(len(f_tokens) - 1, 1))) for f in range(len(f_tokens))}
        for name, links in zip(NAMES, (by_output, by_source, unstepped, by_output & by_source, by_output | by_source,
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


def longest(group: list[int], tokens: list[str]) -> int:
    return max(group, key=lambda i: len(tokens[i]))


# The gold French splits what French writes as one word: "du" as "de le", "j'ai" as "je ai".
CONTRACTED = {("de", "le"): "du", ("de", "les"): "des", ("à", "le"): "au", ("à", "les"): "aux"}
ELIDING = {"je", "me", "te", "se", "le", "la", "ne", "de", "que", "ce", "jusque", "lorsque", "puisque"}


def written(tokens: list[str], french: bool = False) -> tuple[str, list[list[int]]]:
    """The gold tokens as a user writes them, so the model reads text like its training's, and
    which tokens each of its words is made of."""
    words: list[str] = []
    groups: list[list[int]] = []
    for i, token in enumerate(tokens):
        before = words[-1] if words else ""
        elided = token == "le" and i + 1 < len(tokens) and elides_before(tokens[i + 1])  # "à l'emploi", not "au"
        if french and (tokens[i - 1] if i else "", token) in CONTRACTED and groups[-1] == [i - 1] and not elided:
            words[-1] = CONTRACTED[tokens[i - 1], token]
        elif french and before.lower() in ELIDING and elides_before(token):
            words[-1] = before[:-1] + "'" + token
        elif french and before.lower() == "si" and token in ("il", "ils"):
            words[-1] = "s'" + token
        elif token == "-" and i + 1 < len(tokens) and before[-1:].isalnum() and tokens[i + 1][:1].isalnum():
            words[-1] += "-"
        elif words and (before.endswith(("-", "'")) or token in (",", ".")):
            words[-1] += token
        else:
            words.append(token)
            groups.append([i])
            continue
        groups[-1].append(i)
    words[0] = words[0][:1].upper() + words[0][1:]
    return " ".join(words), groups


if __name__ == "__main__":
    main()
