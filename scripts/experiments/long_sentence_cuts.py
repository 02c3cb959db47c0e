"""Long sentences cut differently, measured on one run (docs/results.md, "Text as people write it"):

    python scripts/experiments/long_sentence_cuts.py RUN --src DOC.en --ref DOC.fr [ARM ...]

An ARM is N (decode.max_sentence_words N: sentences over N words cut into parts of at most N) or
conj@N (as N, but where a part holds no clause mark it is cut before a conjunction or relative
pronoun: English sources). BLEU by source length on the test split and the document set, each
arm's whole set and 31-50-word sentences paired against the first arm (text_as_written's report).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "experiments"))

import text_as_written as measured  # noqa: E402

import nmt  # noqa: E402
from nmt.evaluation.report import TestSpec, load_test_set  # noqa: E402
from nmt.inference.sentences import _CLAUSE_END, Segment, Segmenter  # noqa: E402
from nmt.model.checkpoint import load_models  # noqa: E402

CONJUNCTIONS = {"and", "but", "or", "because", "which", "who", "whom", "whose", "when", "where", "while",
                "although", "though", "if", "since", "unless", "until", "whereas", "so"}


class ConjunctionSegmenter(Segmenter):
    """As Segmenter, but a part without a clause mark is cut before a conjunction where it can."""

    def clauses(self, sentence, before, longest=None):
        words, longest = sentence.split(), longest or self.longest
        start = 0
        while len(words) - start > longest:
            left = len(words) - start
            size = -(-left // -(-left // longest))
            places = range(start + max(1, size // 3), start + longest)
            marks = [i for i in places if _CLAUSE_END.search(words[i])] or [
                i for i in places if i + 1 < len(words) and words[i + 1].lower() in CONJUNCTIONS]
            cut = min(marks, key=lambda i: abs(i + 1 - start - size)) if marks else start + size - 1
            yield Segment(" ".join(words[start: cut + 1]), before, clause=True)
            before, start = " ", cut + 1
        yield Segment(" ".join(words[start:]), before)


def segmenter(arm: str, language: str) -> Segmenter:
    kind, _, words = arm.rpartition("@")
    return (ConjunctionSegmenter if kind == "conj" else Segmenter)(language, int(words))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run")
    parser.add_argument("arms", nargs="*", default=["60", "20", "14", "10", "conj@20", "conj@14"])
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--ref", type=Path, required=True)
    args = parser.parse_args()
    model = nmt.load(args.run)
    test, _, _ = load_test_set(TestSpec(), load_models(args.run, model.device))
    given = [line.strip() for line in args.src.read_text(encoding="utf-8").splitlines()]
    refs = [[line.strip()] for line in args.ref.read_text(encoding="utf-8").splitlines()]
    kept = [i for i, (s, r) in enumerate(zip(given, refs)) if s and r[0]]
    print(f"{args.run}: {measured.cpu_name()} ({', '.join(measured.noted_flags())})", flush=True)
    for name, sources, references in (("the test split", test.references.sources, test.references.references),
                                      (args.src.name, [given[i] for i in kept], [refs[i] for i in kept])):
        systems = {}
        for arm in args.arms:
            model.reader.segmenter = segmenter(arm, model.tokenizer.source_lang)
            systems[arm] = model.translate(sources)
        measured.report_lengths(systems, sources, references, name)


if __name__ == "__main__":
    main()
