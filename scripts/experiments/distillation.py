"""The distilled student against its teacher and against the same student trained on the original
pairs: test-split BLEU and chrF with the rare-word subset (paired bootstrap against the teacher's
beam 5), and sentences per second of each way of decoding on the same CPU, in one run.

    nmt train --out runs/teacher                                   # the default's 30 minutes
    nmt distill runs/teacher --out runs/student                    # configs/student.yaml
    nmt train configs/student.yaml --out runs/student-original \\
        --set data.tokenizer=subword --set data.subword_type=bpe --set data.vocab_size=auto \\
        --set data.max_len=auto --set data.split_digits=true --set data.protect=true
    nmt export runs/teacher && nmt export runs/student && nmt export runs/student-original
    python scripts/experiments/distillation.py runs/teacher runs/student runs/student-original

An ensemble into one model of the default's size, against one default run at beam 5:

    nmt train --out runs/teacher2 --set train.seed=2 && nmt export runs/teacher2
    nmt distill runs/teacher+runs/teacher2 --out runs/one --config configs/default.yaml --set train.patience=0
    nmt eval --bleu --beam 5 -c runs/teacher -c runs/one -c runs/teacher2 -c runs/teacher+runs/teacher2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.evaluation.report import Decoding, TestSpec, compare, evaluate_one, load_test_set  # noqa: E402
from nmt.hardware import cpu_name, noted_flags, resolve_device  # noqa: E402
from nmt.inference.translator import Translator  # noqa: E402
from nmt.model.checkpoint import load_models  # noqa: E402


def systems(teacher: str, student: str, original: str | None) -> list[tuple[str, str, int, str]]:
    """(name, checkpoint, beam, engine) of each way of decoding, the teacher's beam 5 first."""
    ways = [("teacher, beam 5", teacher, 5, "torch"), ("teacher, beam 5, int8", teacher, 5, "onnx"),
            ("student, greedy", student, 1, "torch"), ("student, greedy, int8", student, 1, "onnx"),
            ("student, beam 5", student, 5, "torch")]
    if original:
        ways += [("student on the original pairs, greedy", original, 1, "torch"),
                 ("student on the original pairs, beam 5", original, 5, "torch")]
    return ways


def quality(ways: list[tuple[str, str, int, str]]) -> None:
    device, results, test = resolve_device("cpu"), [], None
    for name, checkpoint, beam, engine in ways:
        loaded = load_models(checkpoint, device)
        if test is None:
            test, where, words = load_test_set(TestSpec(), loaded)
        out = Path(checkpoint) / f"hyps.distillation.{len(results)}.txt"
        result = evaluate_one(loaded, device, test, where, words, True, Decoding(beam, engine), str(out))
        result.name = name
        print("\n".join(result.lines), flush=True)
        results.append(result)
    print("\n".join(compare(results, test, "fr")), flush=True)
    greedy = [r for r in results if r.name.endswith("greedy")]  # the distillation gain: the student against
    if len(greedy) == 2:  # the same student trained on the original pairs, both greedy
        print("\n".join(compare(greedy, test, "fr")), flush=True)


def speed(ways: list[tuple[str, str, int, str]], sentences: int) -> None:
    """Sentences per second of each way on the test split's first `sources`, after a warm-up."""
    device = resolve_device("cpu")
    loaded = load_models(ways[0][1], device)
    sources = load_test_set(TestSpec(), loaded)[0].references.sources[:sentences]
    print("\n| way of decoding | parameters | sentences/s | vs the teacher's beam 5 |\n|---|---|---|---|")
    reference = None
    for name, checkpoint, beam, engine in ways:
        member = load_models(checkpoint, device)
        translator = Translator.from_loaded(member, device, engine=engine)
        translator.translate(sources[:64], beam)
        start = time.perf_counter()
        translator.translate(sources, beam)
        rate = len(sources) / (time.perf_counter() - start)
        reference = reference or rate
        parameters = sum(p.numel() for p in member.model.parameters())
        print(f"| {name} | {parameters / 1e6:.2f}M | {rate:.1f} | x{rate / reference:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("teacher")
    parser.add_argument("student")
    parser.add_argument("original", nargs="?", help="the same student trained on the original pairs")
    parser.add_argument("--speed-sentences", type=int, default=3000)
    args = parser.parse_args()
    print(f"CPU: {cpu_name()} ({' '.join(noted_flags())}); {torch.get_num_threads()} threads")
    ways = systems(args.teacher, args.student, args.original)
    quality(ways)
    speed(ways, args.speed_sentences)


if __name__ == "__main__":
    main()
