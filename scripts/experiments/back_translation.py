"""Monolingual French into better English->French translations: back-translation, measured on fra-eng.

The usual situation (more target-language text than translated pairs) is simulated by a fixed rule
on the training split's pairs (nmt's md5 split), by the md5 bucket of their English: a quarter keep
both sides (the parallel data), a quarter keep only their French (the monolingual text), and the
other half are set aside, so that rows of a few minutes on 2 cores see the parallel data several
times over (the regime back-translation is for). The dev and test splits are untouched: every row
is scored on the same test split. Rows, each trained for the same MINUTES with CONFIG:

    (a) the parallel quarter alone;
    (b) + the French-only quarter back-translated by beam search (beam 5) with a reverse model;
    (c) + back-translated by sampling (unrestricted, temperature 1: Edunov et al. 2018);
    (d) + sampled and tagged (<bt> before each synthetic source: Caswell et al. 2019);
    (e) + the French-only quarter with its real English (the upper bound of (b)-(d)).

The reverse model (French->English) trains on the parallel quarter's training pairs for the same
MINUTES (scored on its own split of them, which nmt cuts by the French). Every row is scored with
`nmt eval --bleu -c a -c b ...` (beam 5, paired bootstrap against row a); the reverse model's own
BLEU and the back-translations' time go in the table. The vocabularies of every row are learned
from the parallel quarter (the first --data).

    python scripts/experiments/back_translation.py --minutes 5

Data goes to data/back-translation/ (ignored by git), runs to runs/back-translation/; finished
runs and back-translations are kept and skipped. The corpus is found as nmt finds it (--corpus,
$NMT_CORPUS, data/fra-eng.zip).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.data.corpus import source_hash, split_of  # noqa: E402
from nmt.data.tokenizer import TOKENIZER  # noqa: E402
from scripts.experiments.domain_adaptation import corpus_lines, last_validation, nmt, scores, train  # noqa: E402


def carve(corpus: Path, out: Path) -> dict[str, Path]:
    """parallel.tsv (the parallel quarter with the dev and test splits), reverse.tsv (its training
    pairs alone: the reverse model, which splits by the French, never sees a test pair), mono.fr
    (the French-only quarter) and mono-real.tsv (the same pairs with their real English)."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, list[str]] = {"parallel": [], "reverse": [], "mono": [], "mono-real": []}
    for line in corpus_lines(corpus):
        fields = line.split("\t")
        if len(fields) < 2 or not fields[0].strip() or not fields[1].strip():
            continue
        key, pair = TOKENIZER.preprocess(fields[0]), f"{fields[0]}\t{fields[1]}"
        train, quarter = split_of(key) == "train", source_hash(key) // 100 % 4
        if not train or quarter == 0:
            files["parallel"].append(pair)
            if train:
                files["reverse"].append(pair)
        elif quarter == 1:
            files["mono"].append(fields[1])
            files["mono-real"].append(pair)
    paths = {"parallel": out / "parallel.tsv", "reverse": out / "reverse.tsv", "mono": out / "mono.fr",
             "mono-real": out / "mono-real.tsv"}
    for name, lines in files.items():
        if not paths[name].is_file():
            paths[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{name}: {len(lines):,} lines -> {paths[name]}", flush=True)
    return paths


def back_translate(reverse: Path, mono: Path, out: Path, options: list[str]) -> float:
    """mono's French into English with the reverse model, written as 'English<TAB>French' pairs;
    returns the seconds it took (0 if done before)."""
    if out.is_file():
        print(f"{out}: back-translated already", flush=True)
        return 0.0
    print(f"$ nmt translate -c {reverse} --input {mono} {' '.join(options)}", flush=True)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nmt", "translate", "-c", str(reverse), "--input", str(mono),
                           *options], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"back-translation failed: {proc.stderr[-2000:]}")
    seconds = time.monotonic() - start
    english = proc.stdout.split("\n")[:-1]
    french = mono.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(english) == len(french), (len(english), len(french))
    out.write_text("".join(f"{e}\t{f}\n" for e, f in zip(english, french) if e.strip()), encoding="utf-8")
    print(proc.stderr.strip().splitlines()[-1], flush=True)  # translated N sentences in S s (X sentences/s)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=os.environ.get("NMT_CORPUS", "data/fra-eng.zip"))
    parser.add_argument("--config", default="configs/quickstart.yaml", help="every model's config")
    parser.add_argument("--minutes", type=float, default=5.0, help="every model's training minutes")
    parser.add_argument("--out", default="runs/back-translation")
    args = parser.parse_args()
    os.chdir(REPO)
    files = carve(Path(args.corpus), Path("data/back-translation"))
    out, common = Path(args.out), [args.config, "--max-minutes", str(args.minutes)]
    parallel, reverse = out / "a-parallel", out / "reverse"
    train(parallel, *common, "--data", str(files["parallel"]))
    train(reverse, *common, "--data", str(files["reverse"]), "--set", "data.reverse=true")
    data = Path("data/back-translation")
    seconds = {"beam": back_translate(reverse, files["mono"], data / "bt-beam.tsv", ["--beam", "5"]),
               "sample": back_translate(reverse, files["mono"], data / "bt-sample.tsv", ["--sample", "--seed", "1"])}
    rows = {parallel: "the parallel quarter alone"}
    for name, extra, what in (
            ("b-beam", str(data / "bt-beam.tsv"), "+ back-translation by beam"),
            ("c-sample", str(data / "bt-sample.tsv"), "+ back-translation by sampling"),
            ("d-sample-tagged", str(data / "bt-sample.tsv") + ":1:<bt>", "+ sampled and tagged"),
            ("e-real", str(files["mono-real"]), "+ the real English (upper bound)")):
        run = out / name
        train(run, *common, "--data", str(files["parallel"]), "--data", extra)
        rows[run] = what
    report = nmt("eval", "--bleu", *[a for run in rows for a in ("-c", str(run))], "--data", args.corpus)
    reverse_report = nmt("eval", "--bleu", "-c", str(reverse), "--data", str(files["reverse"]))
    print(report, reverse_report, sep="\n")
    found = scores(report)
    reverse_bleu = re.search(r"beam 5: BLEU ([\d.]+)", reverse_report).group(1)
    steps = {run: last_validation(run)["step"] for run in rows}
    print(f"\nreverse model (fr->en, {args.config}, {args.minutes:g} min): test BLEU {reverse_bleu} beam 5 on its "
          f"split; back-translating {files['mono']}: beam 5 {seconds['beam']:.0f} s, "
          f"sampling {seconds['sample']:.0f} s (0: made before)\n")
    print("| row | training data | steps | test BLEU / chrF, beam 5 | vs (a): ΔBLEU, p |")
    print("|---|---|---|---|---|")
    for run, what in rows.items():
        s = found[str(run / "best.pt")]
        print(f"| {run.name} | {what} | {steps[run]:,} | {s['bleu']} / {s['chrf']} | "
              f"{s.get('d_bleu', '')} {s.get('p_bleu', '')} |")


if __name__ == "__main__":
    main()
