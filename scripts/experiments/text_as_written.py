"""Text as people write it, measured on a run's test split (docs/results.md, "Text as people write it"):

    python scripts/experiments/text_as_written.py RUN [RUN ...] [--only case spans paragraphs long]
        [--words 60 30 20] [--src DOC.en --ref DOC.fr]

- case: the test sources upper-cased and title-cased, case-insensitive BLEU against the
  sentence-case sources' (and the output's case style), with the case rule and without it;
- spans: 210 test sources, each with one made-up link, address, emoji, path, handle, tag or code
  span put at its end (before its closing marks) or inside it (after a random word): spans kept
  exactly once, spans invented, and the BLEU of the rest against the same sources without the span;
- paragraphs: runs of 2-5 consecutive sentences joined into one line, single-reference BLEU
  of the joined output against the joined references: split into sentences (nmt translate),
  each sentence given alone, and the whole line as one sequence (no splitting);
- long: BLEU by source length (1-10, 11-20, 21-30, 31-50 words), for each run and each
  decode.max_sentence_words in --words (the parts a longer sentence is cut into at its clauses),
  the whole set and its 31-50-word sentences paired against the first run's first --words.
Paragraphs and long sentences are measured on the test split and, with --src/--ref, on a
document-ordered test set of line-aligned files (e.g. the first 3,000 lines of Europarl v7 fr-en:
parliament speeches, not a corpus the default trains on). Beam 5 (the run's); sacreBLEU's
standard BLEU. No sentence of either set is quoted.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import sacrebleu  # noqa: E402

import nmt  # noqa: E402
from nmt.evaluation.metrics import reference_streams  # noqa: E402
from nmt.evaluation.report import TestSpec, load_test_set  # noqa: E402
from nmt.hardware import cpu_name, noted_flags  # noqa: E402
from nmt.inference import sentences as sentences_module  # noqa: E402
from nmt.inference.text.case import TITLE, UPPER, case_style  # noqa: E402
from nmt.inference.text.records import SENTENCE  # noqa: E402
from nmt.inference.text.sentences import Segmenter, whole  # noqa: E402
from nmt.model.checkpoint import load_models  # noqa: E402

BUCKETS = ((1, 10), (11, 20), (21, 30), (31, 50))
EMOJI = ["❤️", "👍", "😂", "🎉", "🇫🇷", "☕"]
SPAN_KINDS = {
    "link": lambda i: f"https://example.com/p/{i}?q={i % 7}",
    "address": lambda i: f"user{i}@example.org",
    "emoji": lambda i: EMOJI[i % len(EMOJI)],
    "path": lambda i: f"~/docs/notes-{i}.txt",
    "handle": lambda i: f"@user_{i}",
    "tag": lambda i: f"#topic{i}",
    "code": lambda i: f"`run({i})`",
}


def bleu(outputs: list[str], references: list[list[str]], lowercase: bool = False) -> float:
    return sacrebleu.corpus_bleu(outputs, reference_streams(references), lowercase=lowercase).score


def title_case(text: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in text.split(" "))


@contextmanager
def case_rule_off():
    """The translator as before the case rule: every source read as it is written."""
    saved = sentences_module.case_style
    sentences_module.case_style = lambda text, spans=None: SENTENCE
    try:
        yield
    finally:
        sentences_module.case_style = saved


@contextmanager
def no_splitting(model):
    """Each line translated as one sequence, as before paragraphs were split."""
    saved = model.road.segmenter

    class Whole(Segmenter):
        def split(self, text):
            return whole(text)

    model.road.segmenter = Whole(saved.language, saved.longest)
    try:
        yield
    finally:
        model.road.segmenter = saved


def case(model, sources, refs) -> None:
    plain = model.translate(sources)
    print(f"case: sentence case as written: BLEU {bleu(plain, refs):.2f}, case-insensitive "
          f"{bleu(plain, refs, True):.2f}")
    for name, form, style in (("UPPER", str.upper, UPPER), ("Title Case", title_case, TITLE)):
        given = [form(s) for s in sources]
        styled = [s for s in given if case_style(s) == style]
        for rule, context in (("with the case rule", None), ("without it", case_rule_off)):
            if context:
                with context():
                    out = model.translate(given)
            else:
                out = model.translate(given)
            matched = sum(case_style(o) == style for o, g in zip(out, given) if case_style(g) == style)
            print(f"case: {name} ({len(styled)} of {len(given)} sources read as {style}), {rule}: case-insensitive "
                  f"BLEU {bleu(out, refs, True):.2f}; output in the source's style {matched}/{len(styled)}")


def spans(model, sources, refs) -> None:
    """Each made-up span put in at the end of a test source (before its closing marks) or inside it
    (after a random word): kept exactly once, invented, and the BLEU of the rest."""
    chosen = [i for i in range(len(sources)) if len(sources[i].split()) >= 3][:: max(1, len(sources) // 240)][:210]
    plain_refs = [refs[i] for i in chosen]
    plain = model.translate([sources[i] for i in chosen])
    for place in ("at the end", "inside"):
        rng, given, kinds, inserted = random.Random(1), [], [], []
        for n, i in enumerate(chosen):
            kind = list(SPAN_KINDS)[n % len(SPAN_KINDS)]
            span = SPAN_KINDS[kind](n)
            if place == "inside":
                words = sources[i].split(" ")
                at = rng.randrange(1, len(words))
                given.append(" ".join(words[:at] + [span] + words[at:]))
            else:
                body, closing = re.match(r"(.*?)([.!?…]*)$", sources[i].strip()).groups()
                given.append(f"{body} {span}{closing}")
            kinds.append(kind)
            inserted.append(span)
        out = model.translate(given)
        kept = [o.count(s) == 1 for o, s in zip(out, inserted)]
        invented = sum(any(x in o for x in inserted if x != s and x not in s) for o, s in zip(out, inserted))
        rest = [re.sub(r" {2,}", " ", o.replace(s, " ")).strip() for o, s in zip(out, inserted)]
        rest = [re.sub(r" ([.!?,])", r"\1", r) if model.tokenizer.target_lang != "fr" else r for r in rest]
        by_kind = {k: f"{sum(kp for kp, kk in zip(kept, kinds) if kk == k)}/{kinds.count(k)}" for k in SPAN_KINDS}
        print(f"spans {place}: {sum(kept)}/{len(kept)} kept exactly once "
              f"({', '.join(f'{k} {v}' for k, v in by_kind.items())}); {invented} outputs with another span's text; "
              f"BLEU of the rest {bleu(rest, plain_refs):.2f} against {bleu(plain, plain_refs):.2f} for the sources "
              f"without the span")


def runs_of(sources, refs, seed: int = 1) -> list[tuple[list[int], int]]:
    """Consecutive runs of 2-5 test sources (by index), covering the split in order."""
    rng, out, i = random.Random(seed), [], 0
    while i + 2 <= len(sources):
        size = min(rng.randint(2, 5), len(sources) - i)
        out.append(list(range(i, i + size)))
        i += size
    return out


def paragraphs(model, sources, refs, name: str) -> None:
    runs = runs_of(sources, refs)
    lines = [" ".join(sources[i] for i in run) for run in runs]
    joined_refs = [[" ".join(refs[i][0] for i in run)] for run in runs]
    split = model.translate(lines)
    alone = model.translate(sources)
    one_by_one = [" ".join(alone[i] for i in run) for run in runs]
    with no_splitting(model):
        whole_line = model.translate(lines)
    lost = sum(len(s.split()) < 0.6 * len(a.split()) for s, a in zip(whole_line, one_by_one))
    print(f"paragraphs, {name}: {len(runs)} runs of 2-5 sentences: split {bleu(split, joined_refs):.2f}, one by one "
          f"{bleu(one_by_one, joined_refs):.2f}, as one sequence {bleu(whole_line, joined_refs):.2f} "
          f"({lost} of those outputs under 60% of the words of one by one)")


def by_length(model, sources, refs, words: list[int]) -> dict[int, list[str]]:
    """The outputs for each decode.max_sentence_words in `words`."""
    out = {}
    for limit in words:
        model.road.segmenter = Segmenter(model.tokenizer.source_lang, limit)
        out[limit] = model.translate(sources)
    return out


def report_lengths(systems: dict[str, list[str]], sources, refs, name: str) -> None:
    """BLEU of each system by source length, and its whole set and longest bucket against the
    first system's (paired bootstrap, 1,000 samples)."""
    from sacrebleu.significance import PairedTest

    buckets = {(low, high): [i for i, s in enumerate(sources) if low <= len(s.split()) <= high]
               for low, high in BUCKETS}
    paired = {}
    for part, keep in (("all", range(len(sources))), ("longest", buckets[BUCKETS[-1]])):
        if len(systems) > 1 and keep:
            named = [(system, [out[i] for i in keep]) for system, out in systems.items()]
            streams = reference_streams([refs[i] for i in keep])
            paired[part] = PairedTest(named, {"BLEU": sacrebleu.BLEU()}, streams, test_type="bs", n_samples=1000)()[1]
    for n, (system, out) in enumerate(systems.items()):
        cells = [f"{low}-{high}: {bleu([out[i] for i in keep], [refs[i] for i in keep]):.2f} ({len(keep)})"
                 for (low, high), keep in buckets.items() if keep]
        against = "".join(f"; {part} {paired[part]['BLEU'][n].score - paired[part]['BLEU'][0].score:+.2f} "
                          f"(p = {paired[part]['BLEU'][n].p_value:.3f})" for part in paired if n)
        print(f"long: {name}, {system}: BLEU {bleu(out, refs):.2f}; by words " + ", ".join(cells) + against)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--only", nargs="+", default=["case", "spans", "paragraphs", "long"])
    parser.add_argument("--words", nargs="+", type=int, default=[60, 30, 20])
    parser.add_argument("--src", type=Path, help="a document-ordered test set's sources, a sentence a line")
    parser.add_argument("--ref", type=Path, help="its references, line-aligned with --src")
    args = parser.parse_args()
    documents = []
    if args.src and args.ref:
        given = [line.strip() for line in args.src.read_text(encoding="utf-8").splitlines()]
        translations = [[line.strip()] for line in args.ref.read_text(encoding="utf-8").splitlines()]
        kept = [i for i, (s, r) in enumerate(zip(given, translations)) if s and r[0]]
        documents = [(args.src.name, [given[i] for i in kept], [translations[i] for i in kept])]
    lengths: dict[str, dict[str, list[str]]] = {}
    for run in args.runs:
        model = nmt.load(run)
        test, where, _ = load_test_set(TestSpec(), load_models(run, model.device))
        sources, refs = test.references.sources, test.references.references
        print(f"{run}: {where}, {len(sources)} sources; {cpu_name()} ({', '.join(noted_flags())})", flush=True)
        if "case" in args.only:
            case(model, sources, refs)
        if "spans" in args.only:
            spans(model, sources, refs)
        sets = [("the test split", sources, refs), *documents]
        for name, set_sources, set_refs in sets:
            if "paragraphs" in args.only:
                paragraphs(model, set_sources, set_refs, name)
            if "long" in args.only:
                for limit, out in by_length(model, set_sources, set_refs, args.words).items():
                    lengths.setdefault(name, {})[f"{run} max_sentence_words={limit}"] = out
    for name, set_sources, set_refs in sets:
        if name in lengths:
            report_lengths(lengths[name], set_sources, set_refs, name)


if __name__ == "__main__":
    main()
