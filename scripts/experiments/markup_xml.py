"""Markup through translation, measured on real markup: salesforce/localization-xml-mt's software
help text (MIT; github salesforce/localization-xml-mt, data/enfr/enfr_{en,fr}_dev.json: 2,000
segments, 575 of them with inline XML tags).

Each source is translated with `--markup` (nmt.inference.markup) and scored as that repository's
scripts/evaluate.py scores it: XML structure accuracy (the share of outputs that parse as XML) and
XML matching accuracy (the share whose tag tree is the reference's: the same tags, children in
the same order); BLEU of the outputs with the tags taken out against the references with theirs
taken out; and the XML-aware BLEU (its `struct` files: the text between tags segment by segment
for outputs whose tree matches the reference's, empty segments for the rest). Beside them the
same model's BLEU on the plain sources (the tags taken out before translating): what the
markup costs the text.

    python scripts/experiments/markup_xml.py RUN --source data/localization-xml-mt/enfr_en_dev.json \\
        --reference data/localization-xml-mt/enfr_fr_dev.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import nmt  # noqa: E402
from nmt.evaluation.metrics import score  # noqa: E402
from nmt.hardware import cpu_name, noted_flags  # noqa: E402
from nmt.inference.markup import parse, translate_marked  # noqa: E402

TAG = re.compile(r"</?[A-Za-z][^<>]*>")


def tree(text: str) -> ET.Element | None:
    try:
        return ET.fromstring(f"<ROOT>{text}</ROOT>")
    except ET.ParseError:
        return None


def same_tree(a: ET.Element, b: ET.Element) -> bool:
    return a.tag == b.tag and len(a) == len(b) and all(same_tree(x, y) for x, y in zip(a, b))


def segments(text: str) -> list[str]:
    """The text between tags, entities read (evaluate.py's de_escape)."""
    return [s.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") for s in TAG.split(text)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--beam", type=int, default=5)
    args = parser.parse_args()
    sources = json.loads(args.source.read_text(encoding="utf-8"))["text"]
    references = json.loads(args.reference.read_text(encoding="utf-8"))["text"]
    ids = list(sources)
    src, ref = [sources[i].strip() for i in ids], [references[i].strip() for i in ids]
    model = nmt.load(args.run)
    start = time.perf_counter()
    marked = translate_marked(model, src, markup=True, beam=args.beam)
    seconds = time.perf_counter() - start
    plain = model.translate([parse(s).text for s in src], beam=args.beam)
    lang = model.tokenizer.target_lang
    with_tags = [i for i, s in enumerate(src) if TAG.search(s)]
    parsed = [tree(o) for o in marked]
    matched = [p is not None and same_tree(p, tree(r)) for p, r in zip(parsed, ref)]
    struct_hyp, struct_ref = [], []
    for out, reference, match in zip(marked, ref, matched):
        gold = segments(reference)
        struct_ref += gold
        struct_hyp += segments(out) if match else [""] * len(gold)
    stripped = score(["".join(segments(o)) for o in marked], [["".join(segments(r))] for r in ref], target_lang=lang)
    plain_score = score(plain, [["".join(segments(r))] for r in ref], target_lang=lang)
    struct = score(struct_hyp, [[r] for r in struct_ref], target_lang=lang)
    print(f"CPU: {cpu_name()} ({', '.join(noted_flags())}) | "
          f"{args.run} | {args.source.name}: {len(src):,} segments, {len(with_tags)} with tags | beam {args.beam}")
    print(f"XML structure accuracy (well formed): {sum(p is not None for p in parsed) / len(src):.2%} "
          f"(segments with tags: {sum(parsed[i] is not None for i in with_tags) / len(with_tags):.2%})")
    print(f"XML matching accuracy: {sum(matched) / len(src):.2%} "
          f"(segments with tags: {sum(matched[i] for i in with_tags) / len(with_tags):.2%})")
    print(f"BLEU, tags taken out: {stripped.bleu:.2f} (chrF {stripped.chrf:.2f}); the plain sources translated: "
          f"{plain_score.bleu:.2f} (chrF {plain_score.chrf:.2f}); XML-aware BLEU: {struct.bleu:.2f}")
    print(f"--markup translated {len(src) / seconds:.1f} segments/s (alignment included)")


if __name__ == "__main__":
    main()
