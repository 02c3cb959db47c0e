"""Do word scores flag real errors? On the test split, an output word that occurs in none of its
source's references is counted as an error (a crude label: a right synonym counts too); the
question is how well a low word score finds them. For each way of joining a word's pieces
(the lowest piece score, nmt's rule, and the mean), prints the ROC AUC (the chance that an error
word scores lower than a right one; 0.5 is a coin) and the share of errors among the lowest-scored
10% of words, against the share among all.

    python scripts/experiments/word_score_errors.py -c runs/default
    python scripts/experiments/word_score_errors.py -c runs/default --beam 1 --max-sentences 500
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from nmt.evaluation.report import TestSpec, load_test_set  # noqa: E402
from nmt.inference.translator import Translator  # noqa: E402
from nmt.inference.words import lowest, mean, words_of  # noqa: E402
from nmt.model.checkpoint import load_model  # noqa: E402

_WORD = re.compile(r"\w+", re.UNICODE)


def roc_auc(error_scores: list[float], right_scores: list[float]) -> float:
    """P(an error word scores lower than a right word), ties counted half (Mann-Whitney U)."""
    ranked = sorted([(s, 1) for s in error_scores] + [(s, 0) for s in right_scores])
    below = lower_than = 0.0
    i = 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        errors_here = sum(label for _, label in ranked[i:j])
        rights_here = (j - i) - errors_here
        lower_than += errors_here * (below + rights_here / 2)  # rights ranked below them, ties half
        below += rights_here
        i = j
    return 1 - lower_than / (len(error_scores) * len(right_scores))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", "--checkpoint", required=True)
    parser.add_argument("--beam", type=int, default=None)
    parser.add_argument("--max-sentences", type=int, default=0, help="0: the whole test split")
    args = parser.parse_args()
    loaded = load_model(args.checkpoint, torch.device("cpu"))
    model = Translator.from_loaded(loaded, torch.device("cpu"))
    test, where, _ = load_test_set(TestSpec(), loaded)
    sources, references = test.references.sources, test.references.references
    if args.max_sentences:
        sources, references = sources[: args.max_sentences], references[: args.max_sentences]
    labelled: list[tuple[list[float], bool]] = []  # per word: its pieces' scores, and whether it is an error
    for translation, refs in zip(model.translations(sources, beam=args.beam), references):
        known = {w.lower() for ref in refs for w in _WORD.findall(ref)}
        for (word, group) in words_of(translation.tokens):
            letters = _WORD.findall(word)
            if not letters or "⦅" in word:  # punctuation alone, or a protected number: nothing to judge
                continue
            pieces = [translation.token_scores[i] for i in group]
            labelled.append((pieces, any(w.lower() not in known for w in letters)))
    errors = sum(e for _, e in labelled)
    print(f"{where}: {len(sources):,} sentences, {len(labelled):,} output words, {errors:,} in no reference "
          f"({100 * errors / len(labelled):.1f}%)")
    for name, join in (("lowest piece", lowest), ("mean of pieces", mean)):
        scored = [(join(pieces), error) for pieces, error in labelled]
        auc = roc_auc([s for s, e in scored if e], [s for s, e in scored if not e])
        worst = sorted(scored)[: max(1, len(scored) // 10)]
        share = sum(e for _, e in worst) / len(worst)
        print(f"{name}: ROC AUC {auc:.3f}; errors among the lowest-scored 10% of words {100 * share:.1f}%")


if __name__ == "__main__":
    main()
