"""The glossary measured on a terminology test built as Dinu et al. (2019) built theirs.

1. A dictionary from a word alignment of the training split (eflomal, both directions, links
   kept where they agree): pairs of an English and a French word, lowercased, aligned together at
   least --min-links times and making up at least half of each word's agreed links; the 150 most
   frequent words of each side (function words) and words under 4 letters left out.
2. The test: test-split pairs where an entry's English word is in the source and its French word,
   as listed, in the reference (whole words); one entry a sentence (its rarest English word), up
   to --sentences of them. It is written under data/terminology/ (made from the corpus: never
   committed).
3. The run translates the test with beam 5 without a glossary and with each sentence's own entry
   as its glossary: term use (the term as listed; and ignoring case and inflection: an output word
   sharing the term's first max(4, len - 2) letters), BLEU and chrF with sacreBLEU's paired
   bootstrap; then the speed of beam 5 with 0, 1 and 3 terms a sentence (the sentences whose
   source holds 3 dictionary words; the median of 3 timings each), and the numbers of the test
   split's sources with digits, translated with a glossary term each where one matches.

    pip install eflomal
    python scripts/experiments/terminology.py runs/arms/default-30min/base-s1
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import nmt  # noqa: E402
from nmt.data.corpus import load_splits, resolve_corpus  # noqa: E402
from nmt.data.links import agreed_links  # noqa: E402
from nmt.errors import NmtError  # noqa: E402
from nmt.evaluation.metrics import score  # noqa: E402
from nmt.evaluation.report import numbers_copied, numbers_invented  # noqa: E402
from nmt.hardware import cpu_flags, cpu_name  # noqa: E402
from nmt.inference.terms.glossary import holds  # noqa: E402
from nmt.model.checkpoint import load_model  # noqa: E402
from scripts.benchmarks.race import paired  # noqa: E402

WORD = re.compile(r"\w+")
FUNCTION_WORDS = 150


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def dictionary(pairs: list[tuple[str, str]], min_links: int) -> dict[str, str]:
    """English word -> French word, from eflomal's links in both directions, kept where they agree."""
    sources, targets = [" ".join(words(s)) for s, _ in pairs], [" ".join(words(t)) for _, t in pairs]
    kept = [i for i, (s, t) in enumerate(zip(sources, targets)) if s and t]
    links = Counter()
    try:
        for i, agreed in zip(kept, agreed_links([sources[i] for i in kept], [targets[i] for i in kept])):
            src, tgt = sources[i].split(), targets[i].split()
            for a, b in agreed:
                links[src[a], tgt[b]] += 1
    except NmtError as e:
        sys.exit(f"error: {e}")
    frequent_en = {w for w, _ in Counter(w for s in sources for w in s.split()).most_common(FUNCTION_WORDS)}
    frequent_fr = {w for w, _ in Counter(w for t in targets for w in t.split()).most_common(FUNCTION_WORDS)}
    by_en, by_fr = Counter(), Counter()
    for (en, fr), n in links.items():
        by_en[en] += n
        by_fr[fr] += n
    entries = {}
    for (en, fr), n in sorted(links.items(), key=lambda item: -item[1]):
        if (n >= min_links and 2 * n >= by_en[en] and 2 * n >= by_fr[fr] and len(en) >= 4 and len(fr) >= 4
                and en not in frequent_en and fr not in frequent_fr and en not in entries):
            entries[en] = fr
    return entries


def terminology_test(test: list[tuple[str, str]], entries: dict[str, str], frequency: Counter, count: int,
                     seed: int) -> list[tuple[str, str, str, str]]:
    """(source, reference, English term, French term): the rarest entry each source holds whose French
    word its reference holds as listed."""
    found, seen = [], set()
    for source, reference in test:
        if source in seen:
            continue
        seen.add(source)
        matches = [en for en in set(words(source)) if en in entries and holds(reference, entries[en])]
        if matches:
            en = min(matches, key=lambda w: (frequency[w], w))
            found.append((source, reference, en, entries[en]))
    random.Random(seed).shuffle(found)
    return found[:count]


def inflected(text: str, term: str) -> bool:
    """The term ignoring case and inflection: an output word sharing its first max(4, len - 2) letters."""
    stem = term.lower()[: max(4, len(term) - 2)]
    return any(w.startswith(stem) for w in words(text))


def timed(model, sources: list[str], glossaries) -> tuple[float, list[str]]:
    """Sentences per second of beam 5 (the median of 3 runs) and the translations."""
    rates = []
    for _ in range(3):
        start = time.perf_counter()
        out = model.translate(sources, beam=5, glossary=glossaries)
        rates.append(len(sources) / (time.perf_counter() - start))
    return statistics.median(rates), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run directory or checkpoint")
    parser.add_argument("--data", default=None, help="the corpus (default: as nmt finds it)")
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--min-links", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    flags = " ".join(sorted(f for f in cpu_flags() if f in {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}))
    print(f"CPU: {cpu_name()} ({flags})", flush=True)
    loaded = load_model(args.run, "cpu")
    splits = load_splits(resolve_corpus(args.data, loaded.cfg.data), cfg=loaded.cfg.data)
    train = [p.raw for p in splits.train]
    entries = dictionary(train, args.min_links)
    frequency = Counter(w for s, _ in train for w in words(s))
    test = terminology_test([p.raw for p in splits.test], entries, frequency, args.sentences, args.seed)
    out = REPO / "data" / "terminology"
    out.mkdir(parents=True, exist_ok=True)
    (out / "dictionary.tsv").write_text("".join(f"{en}\t{fr}\n" for en, fr in entries.items()), encoding="utf-8")
    (out / "test.tsv").write_text("".join("\t".join(row) + "\n" for row in test), encoding="utf-8")
    print(f"dictionary: {len(entries):,} entries from {len(train):,} training pairs; terminology test: "
          f"{len(test)} sentences (written to {out})", flush=True)

    model = nmt.load(args.run, device="cpu")
    sources, references = [s for s, *_ in test], [[r] for _, r, *_ in test]
    glossaries = [{en: fr} for _, _, en, fr in test]
    systems = {"without": model.translate(sources, beam=5),
               "with the glossary": model.translate(sources, beam=5, glossary=glossaries)}
    lang = loaded.tokenizer.target_lang
    print("\n| beam 5 | term use, as listed | ignoring case and inflection | BLEU | chrF |")
    print("|---|---|---|---|---|")
    for name, hyps in systems.items():
        exact = sum(holds(h, fr) for h, (*_, fr) in zip(hyps, test))
        loose = sum(inflected(h, fr) for h, (*_, fr) in zip(hyps, test))
        result = score(hyps, references, target_lang=lang)
        print(f"| {name} | {exact}/{len(test)} ({100 * exact / len(test):.1f}%) | {loose}/{len(test)} "
              f"({100 * loose / len(test):.1f}%) | {result.bleu:.2f} | {result.chrf:.2f} |")
    p = paired(systems, references, lang)["with the glossary"]
    print("paired bootstrap, with against without: " + ", ".join(f"{m} p = {v:.4f}" for m, v in p.items()))

    sources = sorted({p.raw[0] for p in splits.test})
    held = [(s, [en for en in dict.fromkeys(words(s)) if en in entries]) for s in sources]
    three = [(s, {en: entries[en] for en in ens[:3]}) for s, ens in held if len(ens) >= 3][: args.sentences]
    speed_sources = [s for s, _ in three]
    print(f"\nspeed, beam 5, {len(speed_sources)} test sources holding 3 dictionary words (median of 3):")
    rates = {}
    for terms in (0, 1, 3):
        chosen = [dict(list(g.items())[:terms]) for _, g in three] if terms else None
        rates[terms], _ = timed(model, speed_sources, chosen)
        print(f"  {terms} term{'s' if terms != 1 else ''} a sentence: {rates[terms]:.1f} sentences/s "
              f"({rates[terms] / rates[0]:.2f}x)", flush=True)

    with_digits = sorted({p.raw[0] for p in splits.test if re.search(r"\d", p.raw[0])})
    glossed = [{en: entries[en] for en in words(s) if en in entries} or None for s in with_digits]
    hyps = model.translate(with_digits, beam=5, glossary=glossed)
    asked = [(h, g) for h, g in zip(hyps, glossed) if g]
    print(f"\nnumbers with the glossary on ({len(with_digits)} test sources with digits, {len(asked)} with a term): "
          f"copied {sum(numbers_copied(s, h) for s, h in zip(with_digits, hyps))}, invented "
          f"{sum(numbers_invented(s, h) for s, h in zip(with_digits, hyps))}, terms used "
          f"{sum(all(holds(h, fr) for fr in g.values()) for h, g in asked)} of {len(asked)}")


if __name__ == "__main__":
    main()
