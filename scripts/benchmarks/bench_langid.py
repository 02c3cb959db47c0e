"""Language identification for cleaning a corpus: lingua-language-detector against py3langid, on
the question the cleaner asks (is this side in the language it should be in?), on short sentences.

    python scripts/benchmarks/bench_langid.py --data data/fra-eng.zip --other multi30k.de.gz [--speed 1000000]

Each identifier (all the languages it knows) reads fra-eng's test split (English and French sides:
a side it takes for another language is a good pair wrongly dropped) and sentences of a third language
(`--other`, German: one it takes for English or French is noise kept), overall and for sentences of at
most four words. Then sentences a second on `--speed` sentences (the corpus's training sources,
repeated to that many; lingua's high-accuracy mode on 20,000 of them), one process (lingua's own
threads for its batch call).
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import time
from collections.abc import Callable
from pathlib import Path

from nmt.data.corpus import load_splits


def identifiers() -> dict[str, Callable[[list[str]], list[str]]]:
    import py3langid
    from lingua import LanguageDetectorBuilder

    def langid(texts: list[str]) -> list[str]:
        return [py3langid.classify(text)[0] for text in texts]

    lingua_all = LanguageDetectorBuilder.from_all_languages().with_preloaded_language_models().build()
    lingua_low = LanguageDetectorBuilder.from_all_languages().with_low_accuracy_mode() \
        .with_preloaded_language_models().build()

    def lingua_of(detector):
        def detect(texts: list[str]) -> list[str]:
            found = detector.detect_languages_in_parallel_of(texts)
            return [language.iso_code_639_1.name.lower() if language else "??" for language in found]
        return detect

    return {"py3langid": langid, "lingua (high accuracy)": lingua_of(lingua_all),
            "lingua (low accuracy)": lingua_of(lingua_low)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data/fra-eng.zip")
    parser.add_argument("--other", required=True)
    parser.add_argument("--other-lang", default="de")
    parser.add_argument("--speed", type=int, default=100_000)
    args = parser.parse_args()
    splits = load_splits(Path(args.data))
    with gzip.open(args.other, "rt", encoding="utf-8") if args.other.endswith(".gz") else open(args.other) as f:
        other = [line.strip() for line in itertools.islice(f, 3000) if line.strip()]
    sets = {"en": [p.raw[0] for p in splits.test], "fr": [p.raw[1] for p in splits.test], args.other_lang: other}
    training = [p.raw[0] for p in splits.train]
    for name, identify in identifiers().items():
        identify(sets["en"][:10])  # load
        cells = []
        for lang, texts in sets.items():
            found = identify(texts)
            wrong = [f != lang for f in found]
            short = [w for w, t in zip(wrong, texts) if len(t.split()) <= 4]
            cells.append(f"{lang} {100 * sum(wrong) / len(wrong):.1f}% (short {100 * sum(short) / max(1, len(short)):.1f}%)")
        slow = name.startswith("lingua (high")  # (about 1,000 sentences a second: a million would take a quarter hour)
        texts = list(itertools.islice(itertools.cycle(training), min(args.speed, 20_000) if slow else args.speed))
        start = time.perf_counter()
        identify(texts)
        rate = len(texts) / (time.perf_counter() - start)
        print(f"{name:24s} misidentified: {' | '.join(cells)} | {rate:,.0f} sentences/s "
              f"({len(texts):,}: 1M in {1e6 / rate:.0f} s)")


if __name__ == "__main__":
    main()
