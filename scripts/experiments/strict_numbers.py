"""Every number exactly once (decode.strict_numbers) against the loose rule it replaced, on one
trained data.protect model: the test split and the number probe, beam 5 and greedy, each pair of
decodings compared by sacreBLEU's paired bootstrap (as `nmt eval -c A -c B` compares models).

    python scripts/tools/number_probe.py                       # data/number-probe.tsv, if not there
    python scripts/experiments/strict_numbers.py runs/default  # prints every eval line, then a table

Loose is the rule before: placeholders at most once each, digits free, <eos> whenever.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.evaluation.report import Decoding, TestSpec, compare, evaluate_one, load_test_set  # noqa: E402
from nmt.evaluation.validation import search_name  # noqa: E402
from nmt.hardware import cpu_flags, cpu_name, resolve_device  # noqa: E402
from nmt.model.checkpoint import load_model  # noqa: E402


def figure(lines: list[str], start: str, pattern: str) -> str:
    """The first match of `pattern` on the first line beginning with `start` ('' when none)."""
    line = next((line for line in lines if line.startswith(start)), "")
    found = re.search(pattern, line)
    return " ".join(found.groups()) if found else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run directory or checkpoint of a data.protect model")
    parser.add_argument("--probe", default=str(REPO / "data" / "number-probe.tsv"))
    parser.add_argument("--beams", default="5,1")
    args = parser.parse_args()
    if not Path(args.probe).is_file():
        subprocess.run([sys.executable, str(REPO / "scripts" / "tools" / "number_probe.py"), "--out", args.probe],
                       check=True)
    device = resolve_device("cpu")
    loaded = load_model(args.run, device)
    flags = " ".join(sorted(f for f in cpu_flags() if f in {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}))
    print(f"CPU: {cpu_name()} ({flags})")
    rows = []
    for name, spec in (("test split", TestSpec()), ("number probe", TestSpec(test=args.probe))):
        test, where, words = load_test_set(spec, loaded)
        for beam in (int(b) for b in args.beams.split(",")):
            results = []
            for strict in (False, True):
                out = Path(loaded.path).parent / f"hyps.strict-numbers.{name.replace(' ', '-')}.beam{beam}.{strict}.txt"
                decoding = Decoding(beam, strict_numbers=strict)
                result = evaluate_one(loaded, device, test, where, words, True, decoding, str(out))
                result.name = "strict" if strict else "loose"
                print("\n".join(result.lines), flush=True)
                results.append(result)
            comparison = compare(results, test, loaded.tokenizer.target_lang)
            print("\n".join(comparison), flush=True)
            for result in results:
                rows.append((name, search_name(beam), result.name,
                             figure(result.lines, f"{search_name(beam)}: ", r"BLEU ([\d.]+) \| chrF ([\d.]+)"),
                             figure(result.lines, "numbers copied:", r"([\d,]+ of [\d,]+)"),
                             figure(result.lines, "numbers invented:", r"([\d,]+ of [\d,]+)"),
                             figure(result.lines, "decoded ", r"\(([\d,.]+) sent/s\)")))
            differences = re.findall(r"difference ([-+][\d.]+), p = ([\d.]+)", comparison[-2])
            rows.append((name, search_name(beam), "strict - loose", " / ".join(f"{d} (p = {p})" for d, p in differences),
                         "", "", ""))
    print("\n| test set | search | rule | BLEU chrF | numbers copied | numbers invented | sent/s |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


if __name__ == "__main__":
    main()
