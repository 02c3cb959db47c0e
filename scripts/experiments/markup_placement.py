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
   placed by the other direction (each output word to a source word: what markup and `--align`
   used first) and by position alone (the span's relative place in the source, in the reference), the
   floor an alignment must beat. eflomal samples: its links, and so the cases, differ a little
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

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.config import load_config  # noqa: E402
from nmt.data.corpus import load_splits, resolve_corpus  # noqa: E402
from nmt.data.links import agreed_links  # noqa: E402
from nmt.errors import NmtError  # noqa: E402
from nmt.hardware import cpu_name, noted_flags  # noqa: E402
from nmt.inference.markup import parse  # noqa: E402
from nmt.inference.translator import Translator, alignments, forced_batches  # noqa: E402
from nmt.inference.words import word_mass, words_of  # noqa: E402

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


def word_masses(translator: Translator, texts: list[str], outputs: list) -> list[torch.Tensor]:
    """Each output's attention between words (`nmt.inference.words.word_mass`), forced through the model."""
    sentences = translator.sentences(texts)
    out_ids = [translator.tgt_vocab.encode(t.tokens) for t in outputs]
    found = forced_batches(translator, [s.ids for s in sentences], out_ids, scored=False)
    return [word_mass(found[i][1], words_of([translator.src_vocab.itos[x] for x in sentences[i].ids]),
                      list(zip(outputs[i].words, outputs[i].word_pieces))) for i in range(len(texts))]


def agreed_span(pairs: list[Link], other: list[Link], first: int, last: int) -> list[Link]:
    """`pairs` (each source word's output word) less the span's links whose output word attends
    most to a source word outside the span (`other`), unless none would be left."""
    source_of = {o: s for s, o in other}
    inside = [(s, o) for s, o in pairs if first <= s < last]
    kept = [(s, o) for s, o in inside if first <= source_of.get(o, -1) < last] or inside
    return [(s, o) for s, o in pairs if not first <= s < last] + kept


def densest_span(mass: torch.Tensor, first: int, last: int, content: list[bool]) -> tuple[int, int] | None:
    """The run of output words whose attention on the span, less a half each, sums highest (the
    words that read the span more than the rest of the source); None when no word does."""
    gain = (mass[:, first:last].sum(1) - 0.5).tolist()
    best, span, total, start = 0.0, None, 0.0, 0
    for t, g in enumerate(gain):
        if total <= 0:
            total, start = 0.0, t
        total += g
        if total > best and content[t]:
            best, span = total, (start, t + 1)
    return span


def placement(run: Path, cases: list[tuple[str, str, tuple[int, int, int, int]]]) -> None:
    """One run's tags on the cases, placed three ways, printed as one line."""
    translator = Translator.load(str(run / "best.pt"), "cpu")
    marked = [parse(tagged(src.split(), first, last)) for src, _, (first, last, _, _) in cases]
    forced = translator.score([m.text for m in marked], [ref for _, ref, _ in cases])
    found = alignments(translator, [m.text for m in marked], forced)
    by_output = alignments(translator, [m.text for m in marked], forced, each_output_word=True)
    masses = word_masses(translator, [m.text for m in marked], forced)
    right = output_side = positional = other_words = agreed = densest = 0
    for (src, ref, (first, last, lo, hi)), markup, output, pairs, other, mass in zip(
            cases, marked, forced, found, by_output, masses):
        if output.words != ref.split():  # the reference as the model writes it back (numbers, spacing)
            other_words += 1
            continue
        placed = parse(markup.restore(output.words, pairs)).root.children[0]
        right += (placed.first, placed.last) == (lo, hi)
        densest += (densest_span(mass, first, last, [any(c.isalnum() for c in w) for w in output.words])
                    or (placed.first, placed.last)) == (lo, hi)
        placed = parse(markup.restore(output.words, agreed_span(pairs, other, first, last))).root.children[0]
        agreed += (placed.first, placed.last) == (lo, hi)
        placed = parse(markup.restore(output.words, other)).root.children[0]
        output_side += (placed.first, placed.last) == (lo, hi)
        positional += by_position(first, last, len(src.split()), len(output.words)) == (lo, hi)
    scored = len(cases) - other_words
    print(f"{run}: {scored:,} scored ({other_words} whose reference the model writes back otherwise); tag placement, "
          f"exact reference words: --markup {right / scored:.1%} ({right:,}); by the other direction (each output "
          f"word's source word) {output_side / scored:.1%} ({output_side:,}); by position alone "
          f"{positional / scored:.1%} ({positional:,}); --markup less links the other direction sends outside the "
          f"span {agreed / scored:.1%}; the densest run of output words {densest / scored:.1%}")


if __name__ == "__main__":
    main()
