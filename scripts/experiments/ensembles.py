"""More from models already trained: one run against the average of its last checkpoints, an
ensemble of its last checkpoints, an ensemble of two runs of half its minutes, and ensembles of
all of them, on the test split and the number probe (beam 5, paired bootstrap against the single
run, as `nmt eval -c A -c B` compares); both ways of combining; and what an ensemble of N costs
in decoding speed and memory, greedy and beam.

    nmt train --out runs/full --max-minutes 30                     # the single run (seed 1)
    nmt train --out runs/half2 --max-minutes 15 --set train.seed=2  # two runs of half the minutes
    nmt train --out runs/half3 --max-minutes 15 --set train.seed=3
    python scripts/tools/number_probe.py                            # data/number-probe.tsv
    python scripts/experiments/ensembles.py runs/full runs/half2 runs/half3
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.evaluation.report import Decoding, TestSpec, compare, evaluate_one, load_test_set  # noqa: E402
from nmt.hardware import cpu_flags, cpu_name, resolve_device  # noqa: E402
from nmt.inference.translator import Translator  # noqa: E402
from nmt.model.checkpoint import load_models  # noqa: E402
from nmt.model.checkpoint_average import AVERAGED, average_checkpoints, last_checkpoints  # noqa: E402


def with_combination(loaded, combine: str):
    decode = dataclasses.replace(loaded.cfg.decode, ensemble=combine)
    return dataclasses.replace(loaded, cfg=dataclasses.replace(loaded.cfg, decode=decode))


def quality(systems: list[tuple[str, str, str]], probe: str, beam: int) -> None:
    device = resolve_device("cpu")
    for test_name, spec in (("test split", TestSpec()), ("number probe", TestSpec(test=probe))):
        results, test = [], None
        for name, checkpoints, combine in systems:
            loaded = with_combination(load_models(checkpoints, device), combine)
            if test is None:
                test, where, words = load_test_set(spec, loaded)
            (REPO / "runs").mkdir(exist_ok=True)
            out = REPO / "runs" / f"hyps.ensembles.{test_name.replace(' ', '-')}.{len(results)}.txt"
            result = evaluate_one(loaded, device, test, where, words, True, Decoding(beam), str(out))
            result.name = name
            print("\n".join(result.lines), flush=True)
            results.append(result)
        print(f"\n== {test_name}, beam {beam}", flush=True)
        print("\n".join(compare(results, test, "fr")), flush=True)


def cost(specs: list[tuple[str, str]], sentences: int) -> None:
    """Decoding speed of ensembles of N on the test split's first sources, and the weights held."""
    device = resolve_device("cpu")
    print("\n| members | weights held | greedy sent/s | beam 5 sent/s |\n|---|---|---|---|")
    for name, spec in specs:
        loaded = load_models(spec, device)
        test, _, _ = load_test_set(TestSpec(), loaded)
        sources = test.references.sources[:sentences]
        translator = Translator.from_loaded(loaded, device)
        held = sum(p.numel() * p.element_size() for m in loaded.members or [loaded] for p in m.model.parameters())
        speeds = []
        for beam in (1, 5):
            translator.translate(sources[:64], beam)  # warm-up
            start = time.perf_counter()
            translator.translate(sources, beam)
            speeds.append(len(sources) / (time.perf_counter() - start))
        print(f"| {name} | {held / 1e6:.0f} MB | {speeds[0]:.1f} | {speeds[1]:.1f} |", flush=True)
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("full", help="the single run of the whole budget")
    parser.add_argument("halves", nargs=2, help="two runs of half the budget (other seeds)")
    parser.add_argument("--last", type=int, default=3, help="the single run's last checkpoints to average")
    parser.add_argument("--probe", default=str(REPO / "data" / "number-probe.tsv"))
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--speed-sentences", type=int, default=500)
    args = parser.parse_args()
    flags = " ".join(sorted(f for f in cpu_flags() if f in {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}))
    print(f"CPU: {cpu_name()} ({flags}); {torch.get_num_threads()} threads")
    if not Path(args.probe).is_file():
        subprocess.run([sys.executable, str(REPO / "scripts" / "tools" / "number_probe.py"), "--out", args.probe],
                       check=True)
    full, (half_a, half_b) = Path(args.full), args.halves
    last = last_checkpoints(full, args.last)
    averaged = full / AVERAGED
    average_checkpoints(last, averaged)
    last_ensemble = "+".join(str(p) for p in last)
    halves = f"{half_a}+{half_b}"
    systems = [("single (best.pt)", str(full), "log_prob"),
               (f"average of its last {args.last}", str(averaged), "log_prob"),
               (f"ensemble of its last {args.last}", last_ensemble, "log_prob"),
               ("ensemble of two half-budget runs", halves, "log_prob"),
               ("the same, prob combined", halves, "prob"),
               ("ensemble of all three runs", f"{full}+{halves}", "log_prob")]
    quality(systems, args.probe, args.beam)
    cost([("1", str(full)), ("2", f"{full}+{half_a}"), ("3", f"{full}+{halves}")], args.speed_sentences)


if __name__ == "__main__":
    main()
