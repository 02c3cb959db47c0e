"""Which of nmt's functions one translation enters: the text path's shape, as a newcomer walks it.

    python scripts/tools/text_path.py RUN                       # "Some text. Another one."
    python scripts/tools/text_path.py RUN --text "Go." --list   # and each function, by file

The run is loaded and the text translated once (loading, caches and lazy imports are not the text
path); the second, warm call is traced with `sys.setprofile`, and every distinct function of the
`nmt` package it enters is counted: all of them, and those outside `nmt/model/` (the network's own
layers, which any text reaches whatever its road). Functions are told apart by file and first line,
so a nested function counts once however often it runs; comprehensions and lambdas are not counted
(they are expressions of the function they stand in).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import nmt

PACKAGE = Path(nmt.__file__).resolve().parent


def entered(run: str, text: str, beam: int | None = None) -> dict[str, set[tuple[int, str]]]:
    """{a module's path inside nmt/: {(first line, name) of each of its functions}} that a warm
    `nmt.load(run).translate(text)` enters."""
    model = nmt.load(run, device="cpu")
    model.translate(text, beam=beam)  # the cold call: loading and first-use work
    found: dict[str, set[tuple[int, str]]] = defaultdict(set)
    root = str(PACKAGE)

    def hook(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_filename.startswith(root) and not code.co_name.startswith("<"):
            found[str(Path(code.co_filename).relative_to(PACKAGE))].add((code.co_firstlineno, code.co_name))

    sys.setprofile(hook)
    try:
        model.translate(text, beam=beam)
    finally:
        sys.setprofile(None)
    return dict(found)


def outside_model(found: dict[str, set[tuple[int, str]]]) -> dict[str, set[tuple[int, str]]]:
    return {path: functions for path, functions in found.items() if not path.startswith("model/")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run directory or checkpoint")
    parser.add_argument("--text", default="Some text. Another one.")
    parser.add_argument("--beam", type=int, default=None, help="default: the run's decode.beam_size")
    parser.add_argument("--list", action="store_true", help="print each function entered, by file")
    args = parser.parse_args()
    found = entered(args.run, args.text, args.beam)
    outside = outside_model(found)
    count = sum(map(len, found.values()))
    print(f"{args.text!r}: {count} distinct functions in {len(found)} files of nmt/; outside nmt/model/: "
          f"{sum(map(len, outside.values()))} in {len(outside)} files")
    if args.list:
        for path in sorted(found):
            print(f"  {path}: " + ", ".join(name for _, name in sorted(found[path])))


if __name__ == "__main__":
    main()
