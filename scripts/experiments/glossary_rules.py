"""The glossary on terms the model does not write: does the sentence still read well?

A user lists terms because the model picks another word: "dog -> Köter" where it writes "Hund".
For each test source holding exactly one listed source word (whole word, any case) whose
reference holds the usual target word, the run translates it with beam 5 three ways: without a
glossary; with the term, searched without the two rules of a glossary term (as before
2026-11-27: the term may be continued into a longer word and may follow the sentence's end); and
with them (`nmt/inference/constraints.py`). Reported for each: term use (the term as a whole
word), the broken outputs (more sentence ends than the output without a glossary, the term only
inside a longer word, or over 1.3x its words), BLEU and chrF against the reference with the usual
word replaced by the term (paired bootstrap against no glossary), and beam 5's sentences a second.

    python scripts/experiments/glossary_rules.py runs/recipe/multi30k-en-de/parallel-s1 \\
        --src data/multi30k/raw/test_2017_flickr.en --ref data/multi30k/raw/test_2017_flickr.de

--terms FILE: lines of `source word<TAB>usual target word<TAB>term` (the default: ten English ->
German caption words, each term of the usual word's gender, so the reference stays grammatical).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import nmt  # noqa: E402
from nmt.evaluation.metrics import score  # noqa: E402
from nmt.hardware import cpu_name, noted_flags  # noqa: E402
from nmt.inference.constraints import Pieces  # noqa: E402
from nmt.inference.glossary import holds  # noqa: E402
from scripts.benchmarks.race import paired  # noqa: E402

EN_DE = [("dog", "Hund", "Köter"), ("man", "Mann", "Kerl"), ("shirt", "Hemd", "Oberteil"),
         ("street", "Straße", "Gasse"), ("woman", "Frau", "Dame"), ("girl", "Mädchen", "Mädel"),
         ("car", "Auto", "Fahrzeug"), ("water", "Wasser", "Gewässer"), ("boy", "Junge", "Bube"),
         ("hat", "Hut", "Deckel")]
SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def test_set(src: Path, ref: Path, terms, count: int) -> list[tuple[str, str, str, str]]:
    """(source, term-holding reference, source word, term) of the first `count` usable pairs."""
    out = []
    for source, reference in zip(src.read_text(encoding="utf-8").splitlines(),
                                 ref.read_text(encoding="utf-8").splitlines()):
        found = [(word, usual, term) for word, usual, term in terms if holds(source, word, ignore_case=True)]
        if len(found) == 1 and holds(reference, found[0][1]):
            word, usual, term = found[0]
            out.append((source, re.sub(rf"\b{re.escape(usual)}\b", term, reference), word, term))
    return out[:count]


def broken(output: str, plain: str, term: str) -> dict[str, bool]:
    return {"sentence added": len(SENTENCE_END.findall(output)) > len(SENTENCE_END.findall(plain)),
            "term inside a word": term in output and not holds(output, term),
            "over 1.3x the words": len(output.split()) > 1.3 * max(1, len(plain.split()))}


def timed(translate) -> tuple[float, list[str]]:
    times, out = [], []
    for _ in range(3):
        start = time.perf_counter()
        out = translate()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run")
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--ref", type=Path, required=True)
    parser.add_argument("--terms", type=Path, help="source word<TAB>usual target word<TAB>term lines")
    parser.add_argument("--sentences", type=int, default=200)
    args = parser.parse_args()
    terms = EN_DE if args.terms is None else [tuple(line.split("\t")) for line in
                                              args.terms.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = test_set(args.src, args.ref, terms, args.sentences)
    model = nmt.load(args.run)
    sources, refs = [r[0] for r in rows], [[r[1]] for r in rows]
    glossaries = [{word: term} for _, _, word, term in rows]
    rules = model.pieces
    arms = {}
    arms["no glossary"] = timed(lambda: model.translate(sources, beam=5))
    model.pieces = Pieces()  # the term's two rules off: nothing glued, no closers
    arms["glossary, without the rules"] = timed(lambda: model.translate(sources, beam=5, glossary=glossaries))
    model.pieces = rules
    arms["glossary"] = timed(lambda: model.translate(sources, beam=5, glossary=glossaries))
    plain = arms["no glossary"][1]
    lang = model.tokenizer.target_lang
    p = paired({name: out for name, (_, out) in arms.items()}, refs, lang)
    print(f"CPU: {cpu_name()} ({', '.join(noted_flags())}) | "
          f"{args.run} | {len(rows)} sentences of {args.src.name}, one term each")
    print("| search | term used (whole word) | broken: any / sentence added / term inside a word / over 1.3x "
          "| BLEU (p) | chrF (p) | beam 5 sent/s |\n|---|---|---|---|---|---|---|")
    for name, (seconds, out) in arms.items():
        used = sum(holds(o, r[3]) for o, r in zip(out, rows))
        kinds = [broken(o, q, r[3]) for o, q, r in zip(out, plain, rows)]
        parts = [sum(k[key] for k in kinds) for key in kinds[0]]
        s = score(out, refs, target_lang=lang)
        pb = p.get(name, {})
        bleu_p = next((f" (p = {v:.3f})" for m, v in pb.items() if m == "BLEU"), "")
        chrf_p = next((f" (p = {v:.3f})" for m, v in pb.items() if m.startswith("chrF")), "")
        print(f"| {name} | {used / len(rows):.1%} | {sum(any(k.values()) for k in kinds) / len(rows):.1%} / "
              + " / ".join(f"{n / len(rows):.1%}" for n in parts)
              + f" | {s.bleu:.2f}{bleu_p} | {s.chrf:.2f}{chrf_p} | {len(rows) / seconds:.1f} |")


if __name__ == "__main__":
    main()
