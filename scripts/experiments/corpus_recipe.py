"""Arms of a config trained for the same minutes, one after the other on this machine, and scored as
the papers score them: on fra-eng (whole, or a random subset) with `nmt eval --bleu`, on Multi30k
(en->de, de->en) both as the multimodal papers and as sacreBLEU score it.

    python scripts/experiments/corpus_recipe.py multi30k-en-de --seeds 1 2
    python scripts/experiments/corpus_recipe.py fra-eng --minutes 30 --seeds 1 2 --arm base= --arm ls=train.label_smoothing=0.1
    python scripts/experiments/corpus_recipe.py fra-eng-29k --config configs/quickstart.yaml --minutes 5 --arm base= --arm b32=train.batch_size=32
    python scripts/experiments/corpus_recipe.py score RACE/onmt-test.hyp RACE/nmt-test.hyp --test test_2016_flickr
    python scripts/experiments/corpus_recipe.py score RUN/val.de.hyp --tokenized RUN-tok/val.de.hyp --test val

Corpora:
- multi30k-en-de, multi30k-de-en: --multi30k DIR holds raw/{train,val,test_2016_flickr,
  test_2017_flickr}.{en,de}[.gz] and tok/<set>.lc.norm.tok.{en,de} (github multi30k/dataset,
  data/task1). Trained on train with val as the dev set; each test set is translated (beam 5)
  and scored twice: as WMT16-18's multimodal papers score it (the output lowercased, punctuation
  normalised and tokenized by Moses' rules (sacremoses), BLEU against the official lowercased
  tokenised references, no further tokenization) and by sacreBLEU's standard (cased, detokenized,
  13a) against the raw references. With --tokenized the arms train on tok/ instead, the
  lowercased, normalised, tokenised text the papers' systems trained on (runs/recipe/<corpus>-tok):
  their output is scored as it is against the same references (already in the papers' form).
- fra-eng-29k: 29,000 pairs drawn (seed 1) from fra-eng's training split, written with fra-eng's
  whole held-out splits to data/fra-eng-29k.tsv, so its test split is fra-eng's (`nmt eval --bleu`);
  fra-eng-80k (or any fra-eng-<N>k) likewise, N thousand pairs: a corpus between the sizes above.
- fra-eng: the whole corpus, `nmt eval --bleu` on its test split (beam 5): steps, last validation,
  test BLEU / chrF and the rare-word subset's BLEU of each arm.

An arm is NAME=KEY=VALUE[,KEY=VALUE...] (`--set` overrides; NAME= alone is the config as it is).
Paired bootstrap (sacreBLEU, 1,000 samples) against the first arm. Runs go to
runs/recipe/<corpus>/<arm>-s<seed>; a finished run is kept and skipped, so an interrupted comparison
resumes (name arms of other configs or budgets apart). Never run two of these at once: they would share the cores.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.data.corpus import read_lines  # noqa: E402
from nmt.hardware import cpu_name, noted_flags  # noqa: E402

TEST_SETS = ("test_2016_flickr", "test_2017_flickr")


def nmt(*args: str) -> str:
    """`nmt ARGS` in this checkout, its output; a failure ends the experiment with its stderr."""
    command = [sys.executable, "-m", "nmt", *args]
    print("$ nmt " + " ".join(args), flush=True)
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(command)}\n{proc.stderr[-3000:]}")
    return proc.stdout


def train(out: Path, *args: str) -> None:
    if (out / "best.pt").is_file():
        print(f"{out}: trained already", flush=True)
        return
    nmt("train", *args, "--out", str(out), "--quiet")


def last_validation(run: Path) -> dict:
    """The last line of a run's metrics.jsonl: its final step, validation and clock."""
    return json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])


def scores(report: str) -> dict[str, dict[str, str]]:
    """Per checkpoint of `nmt eval --bleu -c A -c B ...`: BLEU and chrF, and against the first one
    the differences and p-values."""
    found: dict[str, dict[str, str]] = {}
    current = None
    for line in report.splitlines():
        if line.startswith("checkpoint "):
            current = line.split()[1]
        elif line.startswith("beam 5: BLEU") and current:
            bleu, chrf = re.findall(r"(?:BLEU|chrF) ([\d.]+)", line)[:2]
            found[current] = {"bleu": bleu, "chrf": chrf}
        elif "difference" in line and line.strip().split(":")[0] in found:
            name = line.strip().split(":")[0]
            found[name]["p_bleu"] = re.search(r"BLEU [^|]*?p = ([\d.]+)", line).group(1)
            found[name]["d_bleu"] = re.search(r"BLEU [^|]*?difference ([+-][\d.]+)", line).group(1)
    return found


def parse_arm(text: str) -> tuple[str, list[str]]:
    name, _, changes = text.partition("=")
    if not name:
        sys.exit(f"--arm {text!r}: expected NAME=KEY=VALUE[,KEY=VALUE...]")
    return name, [c for c in changes.split(",") if c]


def multi30k_files(folder: Path) -> Path:
    """The raw files, unzipped beside their .gz where needed."""
    raw = folder / "raw"
    for packed in raw.glob("*.gz"):
        if not packed.with_suffix("").exists():
            with gzip.open(packed, "rb") as f, open(packed.with_suffix(""), "wb") as out:
                shutil.copyfileobj(f, out)
    missing = [f"{s}.{lang}" for s in ("train", "val", *TEST_SETS) for lang in ("en", "de")
               if not (raw / f"{s}.{lang}").exists()]
    if missing:
        sys.exit(f"--multi30k {folder}: raw/{missing[0]} is missing (multi30k/dataset's data/task1)")
    return raw


def fra_eng_subset(corpus: Path, size: int, out: Path) -> Path:
    """`size` pairs drawn from fra-eng's training split, then every held-out pair, as one file."""
    if out.exists():
        return out
    from nmt.config import DataConfig
    from nmt.data.corpus import split_pair
    train, held_out = [], []
    for line in read_lines(corpus):
        fields = line.split("\t")
        found = split_pair(fields[0], fields[1], DataConfig()) if len(fields) >= 2 else None
        if found:
            (train if found[0] == "train" else held_out).append(f"{fields[0]}\t{fields[1]}\n")
    if size > len(train):
        sys.exit(f"{corpus} has {len(train):,} training pairs: fewer than the {size:,} asked for")
    out.write_text("".join(random.Random(1).sample(train, size) + held_out), encoding="utf-8")
    return out


def corpus_name(name: str) -> str:
    """A corpus argument as given, or argparse's error naming the choices."""
    if name in ("multi30k-en-de", "multi30k-de-en", "fra-eng") or re.fullmatch(r"fra-eng-[1-9][0-9]*k", name):
        return name
    raise argparse.ArgumentTypeError(f"{name}: not a corpus here "
                                     f"(multi30k-en-de, multi30k-de-en, fra-eng, fra-eng-<N>k)")


def papers_form(hyps: list[str], lang: str) -> list[str]:
    """Outputs as the Multi30k papers score them: lowercased, normalised, Moses-tokenized, the form
    of the official tokenised references (a run trained on tok/ writes it already: tokenizing again
    would escape "&apos;" twice)."""
    try:
        from sacremoses import MosesPunctNormalizer, MosesTokenizer
    except ImportError:
        sys.exit("scoring as the Multi30k papers do needs Moses' tokenizer: pip install sacremoses")
    normalizer, tokenizer = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    return [tokenizer.tokenize(normalizer.normalize(h.lower()), return_str=True) for h in hyps]


def papers_bleu():
    """BLEU against the tokenised references, with no tokenization of sacreBLEU's own."""
    from sacrebleu.metrics import BLEU
    return BLEU(tokenize="none", force=True)


def paired(systems: dict[str, list[str]], refs: list[str], metric) -> dict[str, str]:
    """Each system's score, and its difference and p against the first (paired bootstrap)."""
    from sacrebleu.significance import PairedTest
    names = list(systems)
    if len(names) == 1:
        return {names[0]: f"{metric.corpus_score(systems[names[0]], [refs]).score:.2f}"}
    results = PairedTest(list(systems.items()), {"BLEU": metric}, [refs], test_type="bs", n_samples=1000)()[1]
    out = {}
    for i, name in enumerate(names):
        score = results["BLEU"][i]
        delta = "" if i == 0 else f" ({score.score - results['BLEU'][0].score:+.2f}, p = {score.p_value:.3f})"
        out[name] = f"{score.score:.2f}{delta}"
    return out


def multi30k(src: str, tgt: str, runs: list[tuple[str, Path]], raw: Path, tok: Path, tokenized_form: bool) -> None:
    from sacrebleu.metrics import BLEU
    for test in TEST_SETS:
        sources = tok / f"{test}.lc.norm.tok.{src}" if tokenized_form else raw / f"{test}.{src}"
        hyps = {}
        for name, run in runs:
            out = run / f"{test}.{tgt}.hyp"
            if not out.exists():
                out.write_text(nmt("translate", "-c", str(run / "best.pt"), "--input", str(sources)), encoding="utf-8")
            hyps[name] = out.read_text(encoding="utf-8").splitlines()
        tok_refs = (tok / f"{test}.lc.norm.tok.{tgt}").read_text(encoding="utf-8").splitlines()
        papers = paired({name: h if tokenized_form else papers_form(h, tgt) for name, h in hyps.items()},
                        tok_refs, papers_bleu())
        if tokenized_form:  # no raw references for outputs in the papers' form
            standard = dict.fromkeys(hyps, "-")
        else:
            raw_refs = (raw / f"{test}.{tgt}").read_text(encoding="utf-8").splitlines()
            standard = paired(hyps, raw_refs, BLEU())
        print(f"\n{test} ({src}->{tgt}), beam 5: lowercased Moses-tokenized BLEU | sacreBLEU standard")
        for name, run in runs:
            last = last_validation(run)
            print(f"| {name} | {run.name} | {last['step']:,} steps | {papers[name]} | {standard[name]} |", flush=True)


def score_outputs(outputs: list[Path], test: str, tgt: str, tok: Path, as_is: list[Path] = ()) -> None:
    """Outputs written elsewhere (race.py's onmt-test.hyp and nmt-test.hyp) scored as the papers
    score, paired bootstrap against the first; `as_is`: outputs of runs trained on tok/ (--tokenized),
    already in the references' form, scored after `outputs` as they are."""
    refs = (tok / f"{test}.lc.norm.tok.{tgt}").read_text(encoding="utf-8").splitlines()
    systems = {}
    for path, in_papers_form in [(p, False) for p in outputs] + [(p, True) for p in as_is]:
        lines = path.read_text(encoding="utf-8").splitlines()
        systems[str(path)] = lines if in_papers_form else papers_form(lines, tgt)
    for name, found in paired(systems, refs, papers_bleu()).items():
        print(f"| {name} | {test} ({tgt}) | {found} |")


def main() -> None:
    if sys.argv[1:2] == ["score"]:  # score OUTPUT... [--tokenized OUTPUT]... --test SET --tgt LANG
        parser = argparse.ArgumentParser(description=score_outputs.__doc__)
        parser.add_argument("score")
        parser.add_argument("outputs", type=Path, nargs="*")
        parser.add_argument("--test", choices=("val",) + TEST_SETS, default=TEST_SETS[0])  # val: choosing without the tests
        parser.add_argument("--tgt", choices=["en", "de"], default="de")
        parser.add_argument("--multi30k", type=Path, default=Path("data/multi30k"))
        parser.add_argument("--tokenized", type=Path, action="append", default=[],
                            help="an output of a run trained on tok/ (--tokenized), scored as it is")
        args = parser.parse_args()
        if not args.outputs and not args.tokenized:
            parser.error("give outputs to score")
        return score_outputs(args.outputs, args.test, args.tgt, args.multi30k / "tok", args.tokenized)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", type=corpus_name,
                        help="multi30k-en-de, multi30k-de-en, fra-eng, fra-eng-<N>k (N thousand pairs of fra-eng)")
    parser.add_argument("--arm", action="append", help="NAME=KEY=VALUE[,...]; default: recipe= (the config as it is)")
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--multi30k", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--tokenized", action="store_true", help="Multi30k: train on tok/ (the papers' form)")
    parser.add_argument("--fra-eng", type=Path, default=Path(os.environ.get("NMT_CORPUS", "data/fra-eng.zip")))
    args = parser.parse_args()
    os.chdir(REPO)
    arms = [parse_arm(a) for a in (args.arm or ["recipe="])]
    flags = " ".join(noted_flags())
    print(f"CPU: {cpu_name()} ({flags}; ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', 'all')})",
          flush=True)
    for corpus in args.corpora:
        if corpus.startswith("multi30k"):
            src, tgt = corpus.split("-")[1:]
            raw, tok = multi30k_files(args.multi30k), args.multi30k / "tok"
            files = {s: tok / f"{s}.lc.norm.tok" if args.tokenized else raw / s for s in ("train", "val", TEST_SETS[0])}
            data = ["--data", str(files["train"]), "--valid", str(files["val"]), "--test", str(files[TEST_SETS[0]]),
                    "--set", "data.src_lang=en", "--set", "data.tgt_lang=de"]
            data += ["--set", "data.reverse=true"] if src == "de" else []
        else:
            path = args.fra_eng if corpus == "fra-eng" else fra_eng_subset(
                args.fra_eng, int(corpus.split("-")[2][:-1]) * 1000, Path(f"data/{corpus}.tsv"))
            data = ["--data", str(path)]
        for seed in args.seeds:
            runs = []
            for name, changes in arms:
                form = "-tok" if args.tokenized and corpus.startswith("multi30k") else ""
                run = Path("runs/recipe") / f"{corpus}{form}" / f"{name}-s{seed}"
                sets = [a for c in [*changes, f"train.seed={seed}"] for a in ("--set", c)]
                train(run, args.config, *data, "--max-minutes", str(args.minutes), *sets)
                runs.append((name, run))
            print(f"\n## {corpus}, seed {seed}, {args.minutes:g} minutes (p: paired bootstrap against {arms[0][0]})")
            if corpus.startswith("multi30k"):
                multi30k(src, tgt, runs, raw, tok, args.tokenized)
                continue
            report = nmt("eval", "--bleu", *[a for _, run in runs for a in ("-c", str(run))], *data[:2])
            print(report, flush=True)
            found = scores(report)
            rare = dict(re.findall(r"checkpoint (\S+).*?rare-word subset[^:]*: BLEU ([\d.]+)", report, re.S))
            print("| arm | steps | last val BLEU (greedy) | test BLEU / chrF | ΔBLEU, p | rare-word BLEU |\n|---|---|---|---|---|---|")
            for name, run in runs:
                key, last = str(run / "best.pt"), last_validation(run)
                s = found[key]
                print(f"| {name} | {last['step']:,} | {last['val_bleu']:.2f} | {s['bleu']} / {s['chrf']} | "
                      f"{s.get('d_bleu', '')} {s.get('p_bleu', '')} | {rare.get(key, '')} |", flush=True)


if __name__ == "__main__":
    main()
