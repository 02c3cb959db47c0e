"""Links and domains without a scheme through translation: fra-eng's test sources, each with one
inserted in the middle (www.example.net, example.com/path, docs.python.org, in lower, upper and
mixed case), translated beside the same sources without it.

    python scripts/experiments/link_probe.py RUN [--data data/fra-eng.zip] [--sources 200]

Prints the share of outputs that hold their link exactly once, and the BLEU against the test
references of the outputs with the link (the link taken out of the output) and without it: what
the link costs the rest of its sentence. It reads nmt only through `nmt.load`, so the code of an
earlier commit runs it too (PYTHONPATH=that checkout).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nmt
from nmt.data.corpus import load_splits
from nmt.evaluation.metrics import score

LINKS = ["www.example.net", "example.com/path/to", "docs.python.org", "WWW.EXAMPLE.NET", "Example.COM",
         "bbc.co.uk/news", "github.com/user/repo", "DOCS.PYTHON.ORG/3/"]


def with_link(source: str, link: str) -> str:
    words = source.split()
    middle = max(1, len(words) // 2)
    return " ".join(words[:middle] + [link] + words[middle:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--data", default="data/fra-eng.zip")
    parser.add_argument("--sources", type=int, default=200)
    args = parser.parse_args()
    references: dict[str, list[str]] = {}
    for pair in load_splits(Path(args.data)).test:
        references.setdefault(pair.raw[0], []).append(pair.raw[1])
    sources = sorted(references)[:args.sources]
    links = [LINKS[i % len(LINKS)] for i in range(len(sources))]
    model = nmt.load(args.run, device="cpu")
    plain = model.translate(sources)
    linked = model.translate([with_link(s, link) for s, link in zip(sources, links)])
    kept = sum(out.count(link) == 1 for out, link in zip(linked, links))
    rest = [" ".join(out.replace(link, " ").split()) for out, link in zip(linked, links)]
    refs = [references[s] for s in sources]
    with_bleu = score(rest, refs, target_lang=model.tokenizer.target_lang).bleu
    without_bleu = score(plain, refs, target_lang=model.tokenizer.target_lang).bleu
    print(f"{len(sources)} test sources: link kept exactly once in {kept} ({100 * kept / len(sources):.1f}%); "
          f"BLEU of the rest {with_bleu:.2f} against {without_bleu:.2f} without the link "
          f"({with_bleu - without_bleu:+.2f})")
    for source, link, out in list(zip(sources, links, linked))[:5]:
        print(f"  {with_link(source, link)}  ->  {out}")


if __name__ == "__main__":
    main()
