"""Tag placement on the test split: does `--markup` put a tag back around the right words?

A synthetic test built from the corpus's own test pairs (nmt's split of the run's corpus), since no
gold markup exists for it:
1. eflomal (pip install eflomal) aligns the training and test pairs' words (whitespace words, as
   markup counts them; lowercased, punctuation stripped for the aligner), both directions; the
   links both agree on are the gold-like alignment.
2. In each test pair, one source span of 1-3 words (drawn with seed 1 among the candidates) whose
   words all link into one run of reference words, every one of which links back into the span
   only: a phrase the aligner is sure of. Not the whole sentence on either side.
3. The span is wrapped in <b>...</b>, and the tagged source's tag is put back by the run's word
   alignment of the reference itself (forced decoding: `Translator.score`, then
   `nmt.inference.translator.alignments`, as `--markup` does for its own output): placement is
   right where the tag wraps exactly the reference words of step 2. Beside it, the same tags
   placed without the step past frequent words (`nmt.inference.text.words.past_frequent`; a run
   trained before runs kept target word counts has no step: copy its prepared corpus's
   target_words.tsv into the run to measure it), by the other direction (each output word to a
   source word: what markup and `--align` used first) and by position alone (the span's relative
   place in the source, in the reference), the floor an alignment must beat. eflomal samples: its links, and so the cases, differ a little
   from one invocation to the next; runs given together are scored on the same cases (runs of one
   corpus and split: the first run's config builds them).

    python scripts/experiments/markup_placement.py RUN [RUN...] [--data CORPUS] [--sentences 1000]
"""

from __future__ import annotations

import argparse
import html
import random
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.config import load_config  # noqa: E402
from nmt.data.corpus import load_splits, resolve_corpus  # noqa: E402
from nmt.data.links import agreed_links  # noqa: E402
from nmt.errors import NmtError  # noqa: E402
from nmt.hardware import cpu_name, noted_flags  # noqa: E402
from nmt.inference.text.markup import parse  # noqa: E402
from nmt.inference.translator import Translator, alignments  # noqa: E402

Link = tuple[int, int]


def aligner_words(text: str) -> str:
    """The aligner's view of a text's whitespace words, one for one: lowercased, letters and digits."""
    return " ".join("".join(c for c in w.lower() if c.isalnum()) or "_" for w in text.split())


def agreed_word_links(pairs: list[tuple[str, str]]) -> list[set[Link]]:
    """Each pair's (source word, target word) links that eflomal's two directions agree on."""
    try:
        return [set(links) for links in agreed_links([aligner_words(s) for s, _ in pairs],
                                                     [aligner_words(t) for _, t in pairs])]
    except NmtError as e:
        sys.exit(f"error: {e}")


def sure_spans(links: set[Link], n_src: int, n_tgt: int) -> list[tuple[int, int, int, int]]:
    """(source first, last, reference first, last), half-open: spans of 1-3 source words all linked,
    into a run of reference words all linked back into the span only; never a whole side."""
    spans = []
    for first in range(n_src):
        for last in range(first + 1, min(first + 3, n_src) + 1):
            inside = [t for s, t in links if first <= s < last]
            if {s for s, _ in links if first <= s < last} != set(range(first, last)):
                continue
            lo, hi = min(inside), max(inside) + 1
            run = [(s, t) for s, t in links if lo <= t < hi]
            if ({t for _, t in run} == set(range(lo, hi)) and all(first <= s < last for s, _ in run)
                    and (last - first, hi - lo) != (n_src, n_tgt) and last - first < n_src and hi - lo < n_tgt):
                spans.append((first, last, lo, hi))
    return spans


def tagged(words: list[str], first: int, last: int) -> str:
    escaped = [html.escape(w, quote=False) for w in words]
    return " ".join(escaped[:first] + ["<b>" + " ".join(escaped[first:last]) + "</b>"] + escaped[last:])


def by_position(first: int, last: int, n_src: int, n_tgt: int) -> tuple[int, int]:
    """The span's relative place in the source, carried over to the reference."""
    lo = min(n_tgt - 1, round(first * n_tgt / n_src))
    return lo, max(lo + 1, min(n_tgt, round(last * n_tgt / n_src)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--data", help="the run's corpus (default: where nmt finds it)")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--split", choices=("test", "valid"), default="test", help="valid: to try a way of placing "
                        "without reading the test split")
    args = parser.parse_args()
    cfg = load_config(args.runs[0] / "config.yaml")
    splits = load_splits(resolve_corpus(args.data, cfg.data), cfg.data.num_pairs, cfg.data)
    seen, test = set(), []
    for pair in getattr(splits, args.split):  # one reference a source (a split may hold several)
        if pair.raw[0] not in seen:
            seen.add(pair.raw[0])
            test.append(pair.raw)
    links = agreed_word_links([p.raw for p in splits.train] + test)[-len(test):]
    rng, cases = random.Random(1), []
    for (src, ref), linked in zip(test, links):
        spans = sure_spans(linked, len(src.split()), len(ref.split()))
        if spans:
            cases.append((src, ref, rng.choice(spans)))
    cases = cases[:args.sentences]

    print(f"CPU: {cpu_name()} ({' '.join(noted_flags()) or 'none'}); {len(test):,} test sources, {len(cases):,} "
          f"with a sure span")
    for run in args.runs:
        placement(run, cases)


def placement(run: Path, cases: list[tuple[str, str, tuple[int, int, int, int]]]) -> None:
    """One run's tags on the cases, placed four ways, printed as one line."""
    translator = Translator.load(str(run / "best.pt"), "cpu")
    marked = [parse(tagged(src.split(), first, last)) for src, _, (first, last, _, _) in cases]
    texts = [m.text for m in marked]
    forced = translator.score(texts, [ref for _, ref, _ in cases])
    found = alignments(translator, texts, forced)
    by_output = alignments(translator, texts, forced, each_output_word=True)
    frequent, translator.frequent = translator.frequent, None
    unstepped = alignments(translator, texts, forced)
    right = output_side = positional = other_words = plain = 0
    for (src, ref, (first, last, lo, hi)), markup, output, pairs, other, without in zip(
            cases, marked, forced, found, by_output, unstepped):
        if output.words != ref.split():  # the reference as the model writes it back (numbers, spacing)
            other_words += 1
            continue

        def around_reference(links: list[Link]) -> bool:
            placed = parse(markup.restore(output.words, links)).root.children[0]
            return (placed.first, placed.last) == (lo, hi)

        right += around_reference(pairs)
        plain += around_reference(without)
        output_side += around_reference(other)
        positional += by_position(first, last, len(src.split()), len(output.words)) == (lo, hi)
    scored = len(cases) - other_words
    stepped = "" if frequent else " (the run keeps no target word counts: no step past frequent words)"
    print(f"{run}: {scored:,} scored ({other_words} whose reference the model writes back otherwise); tag placement, "
          f"exact reference words: --markup {right / scored:.1%} ({right:,}){stepped}; without the step past "
          f"frequent words {plain / scored:.1%} ({plain:,}); by the other direction (each output word's source "
          f"word) {output_side / scored:.1%} ({output_side:,}); by position alone {positional / scored:.1%} "
          f"({positional:,})")


if __name__ == "__main__":
    main()
