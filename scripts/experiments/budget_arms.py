"""Arms of one config at one training budget: each trained for the same minutes, one after the
other on this machine, then compared on the test split (beam 5) with `nmt eval --bleu -c A -c B`'s
paired bootstrap against the first arm, with the steps each made and its last validation.

    python scripts/experiments/budget_arms.py --config configs/quickstart.yaml --minutes 5 \\
        --arm base= --arm batch32=train.batch_size=32 --arm lr5=train.lr=0.005,train.batch_size=32
    python scripts/experiments/budget_arms.py --minutes 30 --seeds 1 2 --arm base= --arm ls=train.label_smoothing=0.1

An arm is NAME=KEY=VALUE[,KEY=VALUE...] (`--set` overrides; NAME= alone is the config as it is).
Runs go to runs/arms/<config>-<minutes>min/<name>-s<seed>; a finished run is kept and skipped, so
an interrupted comparison resumes. Never run two of these at once: they would share the cores.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.hardware import cpu_name, noted_flags  # noqa: E402
from scripts.experiments.domain_adaptation import last_validation, nmt, scores, train  # noqa: E402


def parse_arm(text: str) -> tuple[str, list[str]]:
    name, _, changes = text.partition("=")
    if not name:
        sys.exit(f"--arm {text!r}: expected NAME=KEY=VALUE[,KEY=VALUE...]")
    return name, [c for c in changes.split(",") if c]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--arm", action="append", required=True, help="NAME=KEY=VALUE[,KEY=VALUE...]")
    parser.add_argument("--data", default=os.environ.get("NMT_CORPUS"), help="the corpus (default: as nmt finds it)")
    args = parser.parse_args()
    os.chdir(REPO)
    arms = [parse_arm(a) for a in args.arm]
    root = Path("runs/arms") / f"{Path(args.config).stem}-{args.minutes:g}min"
    data = ["--data", args.data] if args.data else []
    flags = " ".join(noted_flags())
    print(f"CPU: {cpu_name()} ({flags}; ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', 'all')})",
          flush=True)
    for seed in args.seeds:
        runs = []
        for name, changes in arms:
            run = root / f"{name}-s{seed}"
            sets = [a for c in [*changes, f"train.seed={seed}"] for a in ("--set", c)]
            train(run, args.config, *data, "--max-minutes", str(args.minutes), *sets)
            runs.append((name, changes, run))
        report = nmt("eval", "--bleu", *[a for _, _, run in runs for a in ("-c", str(run))], *data)
        print(report, flush=True)
        found = scores(report)
        print(f"\nseed {seed}, {args.minutes:g} minutes each, test split, beam 5 (p: paired bootstrap against "
              f"{runs[0][0]}):\n")
        print("| arm | changes | steps | last val BLEU (greedy) | test BLEU / chrF | ΔBLEU, p | rare-word BLEU |")
        print("|---|---|---|---|---|---|---|")
        rare = dict(re.findall(r"checkpoint (\S+).*?rare-word subset[^:]*: BLEU ([\d.]+)", report, re.S))
        for name, changes, run in runs:
            key, last = str(run / "best.pt"), last_validation(run)
            s = found[key]
            print(f"| {name} | {', '.join(changes) or '-'} | {last['step']:,} | {last['val_bleu']:.2f} | "
                  f"{s['bleu']} / {s['chrf']} | {s.get('d_bleu', '')} {s.get('p_bleu', '')} | {rare.get(key, '')} |",
                  flush=True)


if __name__ == "__main__":
    main()
