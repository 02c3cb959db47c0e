"""The distilled student against its teacher and against the same student trained on the original
pairs: test-split BLEU and chrF with the rare-word subset (paired bootstrap against the teacher's
beam 5), and sentences per second of each way of decoding on the same CPU, in one run.

    nmt train --out runs/teacher                                   # the default's 30 minutes
    nmt distill runs/teacher --out runs/student                    # configs/student.yaml
    nmt train configs/student.yaml --out runs/student-original \\
        --set data.tokenizer=subword --set data.subword_type=bpe --set data.vocab_size=auto \\
        --set data.max_len=auto --set data.split_digits=true --set data.protect=true \\
        --set model.embed_size=80 --set model.hidden_size=80   # the student's width (its log, config.yaml)
    nmt export runs/teacher && nmt export runs/student && nmt export runs/student-original
    python scripts/experiments/distillation.py runs/teacher runs/student runs/student-original

An ensemble into one model of the default's size, against one default run at beam 5:

    nmt train --out runs/teacher2 --set train.seed=2 && nmt export runs/teacher2
    nmt distill runs/teacher+runs/teacher2 --out runs/one --config configs/default.yaml --set train.patience=0
    nmt eval --bleu --beam 5 -c runs/teacher -c runs/one -c runs/teacher2 -c runs/teacher+runs/teacher2

Multi30k en->de (the corpus as `corpus_recipe.py` reads it; each command with the same data flags,
the test split test_2016_flickr), also scored as the papers score it:

    M=data/multi30k; DATA="--data $M/raw/train --valid $M/raw/val --test $M/raw/test_2016_flickr \
        --set data.src_lang=en --set data.tgt_lang=de"
    nmt train $DATA --out runs/m-teacher && nmt distill runs/m-teacher --out runs/m-student
    nmt train configs/student.yaml $DATA --out runs/m-student-original --set ...   # as above, width 104
    python scripts/experiments/distillation.py runs/m-teacher runs/m-student runs/m-student-original \
        --papers-refs $M/tok/test_2016_flickr.lc.norm.tok.de
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))  # corpus_recipe's scoring as the Multi30k papers score

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


def quality(ways: list[tuple[str, str, int, str]], papers_refs: Path | None) -> None:
    device, results, test, target_lang = resolve_device("cpu"), [], None, ""
    for name, checkpoint, beam, engine in ways:
        loaded = load_models(checkpoint, device)
        if test is None:
            test, where, words = load_test_set(TestSpec(), loaded)
            target_lang = loaded.tokenizer.target_lang
        out = Path(checkpoint) / f"hyps.distillation.{len(results)}.txt"
        result = evaluate_one(loaded, device, test, where, words, True, Decoding(beam, engine), str(out))
        result.name = name
        print("\n".join(result.lines), flush=True)
        results.append(result)
    print("\n".join(compare(results, test, target_lang, words)), flush=True)
    greedy = [r for r in results if r.name.endswith("greedy")]  # the distillation gain: the student against
    if len(greedy) == 2:  # the same student trained on the original pairs, both greedy
        print("\n".join(compare(greedy, test, target_lang, words)), flush=True)
    if papers_refs:
        papers(results, greedy, papers_refs, target_lang)


def papers(results: list, greedy: list, refs_path: Path, target_lang: str) -> None:
    """BLEU as the Multi30k papers score it (lowercased, Moses-tokenized against the official
    tokenised references), paired against the teacher's beam 5 and, for the gain, between the greedy two."""
    from corpus_recipe import paired, papers_bleu, papers_form
    refs = refs_path.read_text(encoding="utf-8").splitlines()
    for group, against in ((results, "the teacher's beam 5"), (greedy, "the student on its teacher's outputs")):
        if len(group) < 2:
            continue
        found = paired({r.name: papers_form(r.hyps, target_lang) for r in group}, refs, papers_bleu())
        print(f"\nthe papers' BLEU ({refs_path.name}), paired bootstrap against {against}")
        print("\n".join(f"| {name} | {bleu} |" for name, bleu in found.items()), flush=True)


def speed(ways: list[tuple[str, str, int, str]], sentences: int) -> None:
    """Sentences per second of each way on the test split's first `sentences` sources (the split
    repeated where it has fewer: Multi30k's 1,000), after a warm-up."""
    device = resolve_device("cpu")
    loaded = load_models(ways[0][1], device)
    split = load_test_set(TestSpec(), loaded)[0].references.sources
    sources = (split * -(-sentences // len(split)))[:sentences]
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
    parser.add_argument("--papers-refs", type=Path, help="Multi30k: the tokenised references "
                        "(tok/test_2016_flickr.lc.norm.tok.de) to score the outputs as the papers do")
    args = parser.parse_args()
    print(f"CPU: {cpu_name()} ({' '.join(noted_flags())}); {torch.get_num_threads()} threads")
    ways = systems(args.teacher, args.student, args.original)
    quality(ways, args.papers_refs)
    speed(ways, args.speed_sentences)


if __name__ == "__main__":
    main()
