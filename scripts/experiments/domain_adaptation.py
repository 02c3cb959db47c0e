"""Adapting a general model to a domain, measured on real sentences of fra-eng.

The domain is carved out by a fixed rule: every pair whose English holds a word of FOOD (eating,
cooking, dishes). Its pairs are split by the md5 of their source, as nmt splits: 10% test, 5%
dev, 85% train. The general model trains on every other pair (configs/default.yaml, MINUTES);
then, on the domain's train part, a fine-tuned model (configs/finetune.yaml --init-from the
general one, FT_MINUTES) and a model from scratch for the same minutes (the default model with a
vocabulary the small corpus can fill), and with --mix a fine-tuned model on the domain plus as
many general pairs; with --ablate, fine-tuned models with one of configs/finetune.yaml's choices
changed (the parent's learning rate, no warm-up, 2 minutes). All are scored with `nmt eval --bleu
-c ... -c ...` (beam 5, paired bootstrap against the general model) on the domain test part and on
the general test split.

    python scripts/experiments/domain_adaptation.py                    # 30 + 5 minutes, about 45 in all
    python scripts/experiments/domain_adaptation.py --minutes 10 --ft-minutes 3 --mix --ablate

Data goes to data/domain/ (ignored by git), runs to runs/domain/; finished runs are kept and
skipped. The corpus is found as nmt finds it (--corpus, $NMT_CORPUS, data/fra-eng.zip).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.data.tokenizer import TOKENIZER  # noqa: E402

FOOD = set("""eat eats ate eaten eating food foods cook cooks cooked cooking dinner dinners lunch breakfast
meal meals bread cheese meat fish apple apples coffee tea wine beer soup cake cakes kitchen restaurant
restaurants hungry delicious vegetable vegetables fruit fruits sugar salt egg eggs rice milk pizza chicken
potato potatoes sandwich sandwiches dessert menu recipe taste tastes tasted chocolate""".split())


def corpus_lines(path: Path) -> list[str]:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            name = next(n for n in z.namelist() if n.endswith(".txt") and not Path(n).name.startswith(("_", ".")))
            return z.read(name).decode("utf-8").splitlines()
    return path.read_text(encoding="utf-8").splitlines()


def bucket(english: str) -> int:
    return int(hashlib.md5(TOKENIZER.preprocess(english).encode()).hexdigest(), 16) % 100


def carve(corpus: Path, out: Path, mix_seed: int = 1) -> dict[str, Path]:
    """The domain's train/dev/test files, the general corpus, and the domain-plus-general mix."""
    out.mkdir(parents=True, exist_ok=True)
    parts: dict[str, list[str]] = {"general": [], "food-train": [], "food-dev": [], "food-test": []}
    for line in corpus_lines(corpus):
        fields = line.split("\t")
        if len(fields) < 2:
            continue
        pair = f"{fields[0]}\t{fields[1]}"
        if set(re.findall(r"[a-z]+", fields[0].lower())) & FOOD:
            b = bucket(fields[0])
            parts["food-test" if b < 10 else "food-dev" if b < 15 else "food-train"].append(pair)
        else:
            parts["general"].append(pair)
    general_sample = random.Random(mix_seed).sample(parts["general"], len(parts["food-train"]))
    parts["food-mix"] = parts["food-train"] + general_sample
    paths = {}
    for name, lines in parts.items():
        paths[name] = out / f"{name}.tsv"
        if not paths[name].is_file():
            paths[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{name}: {len(lines):,} pairs -> {paths[name]}", flush=True)
    return paths


def nmt(*args: str) -> str:
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
    """Per checkpoint: BLEU and chrF, and against the first one the differences and p-values."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=os.environ.get("NMT_CORPUS", "data/fra-eng.zip"))
    parser.add_argument("--minutes", type=float, default=30.0, help="the general model's training")
    parser.add_argument("--ft-minutes", type=float, default=5.0, help="fine-tuning, and training from scratch")
    parser.add_argument("--threads", type=int, default=0, help="train.threads of every run (0: torch's default)")
    parser.add_argument("--mix", action="store_true", help="also fine-tune on the domain plus as many general pairs")
    parser.add_argument("--ablate", action="store_true",
                        help="also fine-tune with the parent's learning rate, without warm-up, and for 2 minutes")
    parser.add_argument("--out", default="runs/domain")
    args = parser.parse_args()
    os.chdir(REPO)
    files = carve(Path(args.corpus), Path("data/domain"))
    out, threads = Path(args.out), ["--set", f"train.threads={args.threads}"]
    base, tuned, scratch = out / "general", out / "finetuned", out / "scratch"
    train(base, "configs/default.yaml", "--data", str(files["general"]), "--max-minutes", str(args.minutes), *threads)
    domain = ["--valid", str(files["food-dev"]), "--max-minutes", str(args.ft_minutes), *threads]
    train(tuned, "configs/finetune.yaml", "--init-from", str(base), "--data", str(files["food-train"]), *domain)
    # From scratch: the default model and budget schedule; 8,000 BPE pieces cannot be learned from a
    # few thousand sentences, so 2,000 a side.
    train(scratch, "configs/default.yaml", "--data", str(files["food-train"]), "--set", "data.vocab_size=2000",
          "--set", "train.eval_every=200", *domain)
    models = [base, tuned, scratch]
    variants = {}
    if args.mix:  # as many general pairs as domain pairs beside them: does it forget less?
        variants["finetuned-mix"] = ["--data", str(files["food-mix"])]
    if args.ablate:  # configs/finetune.yaml's choices, one changed at a time
        variants["finetuned-lr0.002"] = ["--set", "train.lr=0.002"]  # the parent's peak rate
        variants["finetuned-no-warmup"] = ["--set", "train.warmup_steps=0"]
        variants["finetuned-2min"] = ["--max-minutes", str(min(2.0, args.ft_minutes))]  # fewer steps
    for name, changes in variants.items():
        data = [] if "--data" in changes else ["--data", str(files["food-train"])]
        train(out / name, "configs/finetune.yaml", "--init-from", str(base), *data, *domain, *changes)
        models.append(out / name)
    checkpoints = [arg for m in models for arg in ("-c", str(m))]
    domain_report = nmt("eval", "--bleu", *checkpoints, "--test", str(files["food-test"]))
    general_report = nmt("eval", "--bleu", *checkpoints, "--data", str(files["general"]))
    print(domain_report, general_report, sep="\n")
    on_domain, on_general = scores(domain_report), scores(general_report)
    print("| model | food test BLEU / chrF | vs general: ΔBLEU, p | general test BLEU / chrF | vs general: ΔBLEU, p |")
    print("|---|---|---|---|---|")
    for model in models:
        key = str(model / "best.pt")
        d, g = on_domain[key], on_general[key]
        print(f"| {model.name} | {d['bleu']} / {d['chrf']} | {d.get('d_bleu', '')} {d.get('p_bleu', '')} | "
              f"{g['bleu']} / {g['chrf']} | {g.get('d_bleu', '')} {g.get('p_bleu', '')} |")


if __name__ == "__main__":
    main()
