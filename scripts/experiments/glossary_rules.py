"""The glossary on terms the model does not write: does the sentence still read well?

A user lists terms because the model picks another word: "dog -> Köter" where it writes "Hund".
For each test source holding exactly one listed source word (whole word, any case) whose
reference holds the usual target word, the run translates it with beam 5 four ways: without a
glossary; with the term, searched without the two rules of a glossary term (as before
2026-11-27: the term may be continued into a longer word and may follow the sentence's end); with
them but not placed where the attention reads the term's source words (as before 2026-11-28); and
with all three (`nmt/inference/constraints.py`). Reported for each: term use (the term as a whole
word), the broken outputs (more sentence ends than the output without a glossary, the term only
inside a longer word, or over 1.3x its words), BLEU and chrF against the reference with the usual
word replaced by the term (paired bootstrap against no glossary), and beam 5's sentences a second.

    python scripts/experiments/glossary_rules.py runs/recipe/multi30k-en-de/parallel-s1 \\
        --src data/multi30k/raw/test_2017_flickr.en --ref data/multi30k/raw/test_2017_flickr.de
    python scripts/experiments/glossary_rules.py runs/recipe/fra-eng/base-s1 runs/recipe/fra-eng/terms-s1 \\
        --data data/fra-eng.zip

--data CORPUS takes the sources and references of the corpus's test split (as the first run's config
splits it) instead of --src/--ref. With several runs, each is scored without and with the
glossary on the same sentences, paired against the first run's output without one (broken:
against the same run's). --terms FILE: lines of `source word<TAB>usual target word<TAB>term`
(the defaults: ten English words for German targets, fifteen for French, each term a correct but
uncommon word of the usual word's gender, not starting with a vowel, so the reference stays
grammatical). --elided: eleven French terms that begin with a vowel instead (`EN_FR_ELIDED`; the
references' articles elided to match), with two more arms: the search without a term's elided forms
(neither glued after an apostrophe nor the word before it rewritten), and without the rewrite; a
French output that writes such a term unelided ("la automobile", "l' aéronef") counts as broken.
"""

from __future__ import annotations

import argparse
from contextlib import contextmanager
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import nmt  # noqa: E402
from nmt.data.corpus import load_splits, resolve_corpus  # noqa: E402
from nmt.evaluation.metrics import score  # noqa: E402
from nmt.hardware import cpu_name, noted_flags  # noqa: E402
from nmt.inference.terms import elision, sentences  # noqa: E402
from nmt.inference.constraints import Pieces, Rules  # noqa: E402
from nmt.inference.engines import engine_device  # noqa: E402
from nmt.inference.translator import Translator  # noqa: E402
from nmt.inference.terms.glossary import elides_before, holds  # noqa: E402
from nmt.model.checkpoint import load_models  # noqa: E402
from scripts.benchmarks.race import paired  # noqa: E402

EN_DE = [("dog", "Hund", "Köter"), ("man", "Mann", "Kerl"), ("shirt", "Hemd", "Oberteil"),
         ("street", "Straße", "Gasse"), ("woman", "Frau", "Dame"), ("girl", "Mädchen", "Mädel"),
         ("car", "Auto", "Fahrzeug"), ("water", "Wasser", "Gewässer"), ("boy", "Junge", "Bube"),
         ("hat", "Hut", "Deckel")]
EN_FR = [("car", "voiture", "bagnole"), ("house", "maison", "demeure"), ("boat", "bateau", "navire"),
         ("book", "livre", "bouquin"), ("job", "travail", "boulot"), ("dog", "chien", "clebs"),
         ("room", "chambre", "piaule"), ("doctor", "médecin", "toubib"), ("cat", "chat", "matou"),
         ("food", "nourriture", "bouffe"), ("boy", "garçon", "gamin"), ("girl", "fille", "gamine"),
         ("bed", "lit", "pieu"), ("city", "ville", "cité"), ("horse", "cheval", "canasson")]
DEFAULT_TERMS = {"de": EN_DE, "fr": EN_FR}
# --elided: terms that begin with a vowel, so French elides the word before them ("l'aéronef"),
# each of its usual word's gender; the reference's articles are elided to match (`elided_reference`)
EN_FR_ELIDED = [("plane", "avion", "aéronef"), ("car", "voiture", "automobile"), ("boss", "patron", "employeur"),
                ("computer", "ordinateur", "ordi"), ("apartment", "appartement", "appart"),
                ("man", "homme", "individu"), ("idea", "idée", "intuition"), ("teacher", "professeur", "enseignant"),
                ("meeting", "réunion", "assemblée"), ("letter", "lettre", "épître"),
                ("house", "maison", "habitation")]
SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def test_set(pairs: list[tuple[str, str]], terms, count: int) -> list[tuple[str, str, str, str]]:
    """(source, term-holding reference, source word, term) of the first `count` usable pairs."""
    out = []
    for source, reference in pairs:
        found = [(word, usual, term) for word, usual, term in terms if holds(source, word, ignore_case=True)]
        if len(found) == 1 and holds(reference, found[0][1]):
            word, usual, term = found[0]
            reference = elided_reference(re.sub(rf"\b{re.escape(usual)}\b", term, reference), term)
            out.append((source, reference, word, term))
    return out[:count]


def elided_reference(reference: str, term: str) -> str:
    """`reference` with the articles before a vowel-initial `term` elided as French writes them."""
    if not elides_before(term):
        return reference
    word = re.escape(term)
    for before, after in (("le", "l'"), ("la", "l'"), ("de", "d'"), ("du", "de l'"), ("au", "à l'")):
        reference = re.sub(rf"\b{before}\s+(?={word}\b)", after, reference)
        reference = re.sub(rf"\b{before.capitalize()}\s+(?={word}\b)", after.capitalize(), reference)
    return reference


def elision_missed(output: str, term: str) -> bool:
    """Whether a French `output` writes a vowel-initial `term` after a word that elides before it,
    unelided ("la automobile", "de aéronef") or spaced from its apostrophe ("l' aéronef")."""
    return elides_before(term) and re.search(
        rf"(?:\b(?:le|la|de|je|me|te|se|ne|ce|que)\s+|['’]\s+){re.escape(term)}\b", output, re.IGNORECASE) is not None


def broken(output: str, plain: str, term: str, lang: str) -> dict[str, bool]:
    return {"sentence added": len(SENTENCE_END.findall(output)) > len(SENTENCE_END.findall(plain)),
            "term inside a word": term in output and not holds(output, term),
            "over 1.3x the words": len(output.split()) > 1.3 * max(1, len(plain.split())),
            "elision missed": lang == "fr" and elision_missed(output, term)}


@contextmanager
def placement_off():
    """Search without the rule that writes a term where the attention reads its source words."""
    original = sentences.sentence_rules
    # (its source positions not given)
    sentences.sentence_rules = lambda *given: original(*given[:6], (), *given[7:])
    try:
        yield
    finally:
        sentences.sentence_rules = original


@contextmanager
def covering_off():
    """Search without the rule that stops the attention reading a written term's source words."""
    original = Rules.covered
    Rules.covered = lambda self, progress: frozenset()
    try:
        yield
    finally:
        Rules.covered = original


@contextmanager
def elision_off(parts: tuple[str, ...] = ("glued", "rewrite")):
    """Search without a vowel-initial term's form glued after an apostrophe ("l' aéronef": "glued"),
    and without the word before such a term rewritten after search ("la automobile": "rewrite")."""
    original, rewrite = sentences.elided_form, elision.elided
    if "glued" in parts:
        sentences.elided_form = lambda *given: []
    if "rewrite" in parts:
        elision.elided = lambda model, sources, specials, found, *rest: found
    try:
        yield
    finally:
        sentences.elided_form, elision.elided = original, rewrite


def timed(translate) -> tuple[float, list[str]]:
    times, out = [], []
    for _ in range(3):
        start = time.perf_counter()
        out = translate()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--src", type=Path)
    parser.add_argument("--ref", type=Path)
    parser.add_argument("--data", help="a corpus: its test split instead of --src/--ref")
    parser.add_argument("--split", choices=("test", "valid"), default="test", help="with --data: valid, to choose "
                        "a setting without reading the test split")
    parser.add_argument("--terms", type=Path, help="source word<TAB>usual target word<TAB>term lines")
    parser.add_argument("--elided", action="store_true", help="French terms that begin with a vowel (EN_FR_ELIDED), "
                        "and two more arms: the search without its elided forms, and without the rewrite")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--against", help="the arm the paired bootstrap compares with (default: the first)")
    parser.add_argument("--show", action="store_true", help="print each glossary arm's broken outputs beside "
                        "the same run's output without a glossary")
    args = parser.parse_args()
    device = engine_device("torch", "auto")  # (as nmt.load picks it)
    loaded = load_models(args.runs[0], device)  # read once: its config splits --data, it translates
    first = Translator.from_loaded(loaded, device)
    lang = first.tokenizer.target_lang
    terms = (EN_FR_ELIDED if args.elided else DEFAULT_TERMS[lang]) if args.terms is None else [
        tuple(line.split("\t")) for line in args.terms.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.data:
        data = loaded.cfg.data
        pairs = [pair.raw for pair in getattr(load_splits(resolve_corpus(args.data, data), cfg=data), args.split)]
        where = f"the {args.split} split of {args.data}"
    else:
        pairs = list(zip(args.src.read_text(encoding="utf-8").splitlines(),
                         args.ref.read_text(encoding="utf-8").splitlines()))
        where = args.src.name
    rows = test_set(pairs, terms, args.sentences)
    sources, refs = [r[0] for r in rows], [[r[1]] for r in rows]
    glossaries = [{word: term} for _, _, word, term in rows]
    arms, plain = {}, {}  # plain: each arm's run's output without a glossary, what "broken" compares with
    for number, run in enumerate(args.runs):
        model = first if number == 0 else nmt.load(run)
        name = "" if len(args.runs) == 1 else f"{Path(run).name}: "
        rules = model.pieces
        arms[f"{name}no glossary"] = timed(lambda: model.translate(sources, beam=5))
        if number == 0:
            model.pieces = Pieces()  # the term's two rules off: nothing glued, no closers
            arms[f"{name}glossary, without the rules"] = timed(
                lambda: model.translate(sources, beam=5, glossary=glossaries))
            model.pieces = rules
            with placement_off():
                arms[f"{name}glossary, not placed by attention"] = timed(
                    lambda: model.translate(sources, beam=5, glossary=glossaries))
            with covering_off():
                arms[f"{name}glossary, its source read after it"] = timed(
                    lambda: model.translate(sources, beam=5, glossary=glossaries))
            if args.elided:
                with elision_off():
                    arms[f"{name}glossary, not elided"] = timed(
                        lambda: model.translate(sources, beam=5, glossary=glossaries))
                with elision_off(("rewrite",)):
                    arms[f"{name}glossary, the word before it not rewritten"] = timed(
                        lambda: model.translate(sources, beam=5, glossary=glossaries))
        arms[f"{name}glossary"] = timed(lambda: model.translate(sources, beam=5, glossary=glossaries))
        plain.update({arm: arms[f"{name}no glossary"][1] for arm in arms if arm.startswith(name)})
    order = sorted(arms, key=lambda arm: arm != args.against)  # (the reference first)
    p = paired({name: arms[name][1] for name in order}, refs, lang)
    print(f"CPU: {cpu_name()} ({', '.join(noted_flags())}) | "
          f"{' '.join(args.runs)} | {len(rows)} sentences of {where}, one term each")
    print(f"(p: paired bootstrap against {order[0]})")
    print("| search | term used (whole word) | broken: any / sentence added / term inside a word / over 1.3x "
          "/ elision missed | BLEU (p) | chrF (p) | beam 5 sent/s |\n|---|---|---|---|---|---|---|")
    for name, (seconds, out) in arms.items():
        used = sum(holds(o, r[3]) for o, r in zip(out, rows))
        kinds = [broken(o, q, r[3], lang) for o, q, r in zip(out, plain[name], rows)]
        parts = [sum(k[key] for k in kinds) for key in kinds[0]]
        s = score(out, refs, target_lang=lang)
        pb = p.get(name, {})
        bleu_p = next((f" (p = {v:.3f})" for m, v in pb.items() if m == "BLEU"), "")
        chrf_p = next((f" (p = {v:.3f})" for m, v in pb.items() if m.startswith("chrF")), "")
        print(f"| {name} | {used / len(rows):.1%} | {sum(any(k.values()) for k in kinds) / len(rows):.1%} / "
              + " / ".join(f"{n / len(rows):.1%}" for n in parts)
              + f" | {s.bleu:.2f}{bleu_p} | {s.chrf:.2f}{chrf_p} | {len(rows) / seconds:.1f} |")
    if args.show:
        for name, (_, out) in arms.items():
            shown = [(r, q, o, [k for k, bad in broken(o, q, r[3], lang).items() if bad])
                     for o, q, r in zip(out, plain[name], rows) if not name.endswith("no glossary")]
            for row, without, output, kinds in [item for item in shown if item[3]]:
                print(f"\n[{name}: {', '.join(kinds)}] {row[2]} -> {row[3]}\n  source:      {row[0]}\n"
                      f"  no glossary: {without}\n  glossary:    {output}")


if __name__ == "__main__":
    main()
