"""The decoders' LSTM execution paths against each other, measured before one is removed (#74).

The same weights run three ways (tests hold them equal): one-step nn.LSTM calls (oneDNN on the
CPU; the only form ONNX Runtime's int8 LSTM takes), fused LSTM cells (`lstm_cells_step`), and
for the stepwise decoder's teacher forcing on the CPU in fp32 the features-first loop of
`nmt/model/unrolled.py`. `decoder.use_cells` pins one (None: the rule in nmt/model/decoder.py).

- Training: whole training steps of a stepwise run's config (bench.py's batches, fresh weights),
  teacher forcing by `unrolled` (the rule's choice), by a loop of one-step nn.LSTM calls, and by
  a loop of cells; interleaved windows, the median of each.
- Decoding: each run's translator (nmt.load) on the first --sentences lines of --src, greedy and
  beam 5, at each --batch-sizes, nn.LSTM against cells; the rule takes cells for steps of at most
  CPU_CELLS_MAX_ROWS rows (beam rows count), marked with *.

    python scripts/benchmarks/bench_decoder_paths.py --train-run runs/recipe/multi30k-en-de/before-s1 \\
        --run runs/recipe/multi30k-en-de/before-s1 --run runs/recipe/multi30k-en-de/parallel-s1 \\
        --data data/multi30k/raw/train --src data/multi30k/raw/test_2016_flickr.en
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "benchmarks"))

from bench import _prepare, _training_batches, machine  # noqa: E402

PATHS = {"rule": None, "nn.LSTM": False, "cells": True}


def interleaved(arms: dict, rounds: int) -> dict[str, float]:
    """name -> the median seconds of `arms[name]()` over `rounds` rounds, arms taking turns (the
    first round warms up and is not counted)."""
    times: dict[str, list[float]] = {name: [] for name in arms}
    for round_ in range(rounds + 1):
        for name, run in arms.items():
            start = time.perf_counter()
            run()
            if round_:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def training(args) -> None:
    from nmt.model import build_model
    from nmt.training.loop import train_step

    cfg, _, src_vocab, tgt_vocab, examples, _ = _prepare(argparse.Namespace(
        config=str(Path(args.train_run) / "config.yaml"), data=args.data, threads=args.threads, model="config",
        overrides=[], precision="fp32"))
    torch.manual_seed(0)
    model = build_model(cfg.model, src_vocab, tgt_vocab).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
    batches = _training_batches(cfg, examples, tgt_vocab.pad_id, tgt_vocab.bos_id)
    window = [next(batches) for _ in range(args.train_steps)]

    def steps(path):
        def run():
            model.decoder.use_cells = path
            for batch in window:
                train_step(model, [batch], optimizer, cfg, tgt_vocab.pad_id)
        return run

    medians = interleaved({name: steps(path) for name, path in PATHS.items()}, args.rounds)
    tokens = sum(batch.num_tokens for batch in window)
    print(f"\ntraining, {cfg.model.decoder} decoder of {args.train_run} (fresh weights), {args.train_steps} steps "
          f"of {cfg.train.batch_size} sentences, median of {args.rounds} windows:")
    for name, seconds in medians.items():
        shown = "unrolled (the rule)" if name == "rule" else f"loop of {name}"
        print(f"  {shown:<22} {tokens / seconds:>8,.0f} tok/s  x{medians['rule'] / seconds:.2f}")


def decoding(args, run: str, sources: list[str]) -> None:
    import nmt
    from nmt.model.decoder import CPU_CELLS_MAX_ROWS

    print(f"\ndecoding, {run}: sentences/s on {len(sources)} sources, median of {args.rounds} rounds "
          f"(* the path the rule takes)")
    for batch_size in args.batch_sizes:
        translator = nmt.load(run, device="cpu", batch_size=batch_size)
        decoder = translator.model.decoder
        for beam in (1, 5):
            def decode(path):
                def run_():
                    decoder.use_cells = path
                    translator.translate(sources, beam=beam)
                return run_
            medians = interleaved({name: decode(path) for name, path in PATHS.items() if path is not None},
                                  args.rounds)
            rule = "cells" if batch_size * beam <= CPU_CELLS_MAX_ROWS else "nn.LSTM"
            shown = "  ".join(f"{name}{'*' if name == rule else ' '} {len(sources) / s:>7.1f}"
                              for name, s in medians.items())
            print(f"  batch {batch_size:>3} beam {beam}: {shown}  cells/nn.LSTM x{medians['nn.LSTM'] / medians['cells']:.2f}",
                  flush=True)
        decoder.use_cells = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-run", help="a run of the stepwise decoder whose config the training part uses")
    parser.add_argument("--data", help="the corpus that run trained on")
    parser.add_argument("--run", action="append", default=[], help="a run to decode with (repeatable)")
    parser.add_argument("--src", help="source sentences, one a line")
    parser.add_argument("--sentences", type=int, default=128)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16, 128])
    parser.add_argument("--train-steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    from nmt import hardware

    hardware.configure(args.threads)
    info = machine(torch.device("cpu"))
    flags = ", ".join(f for f, on in info["cpu_flags"].items() if on)
    caps = " ".join(f"{k}={v}" for k, v in info["isa_caps"].items()) or "none (native kernels)"
    print(f"CPU: {info['cpu']} ({flags}); ISA caps: {caps}; torch {info['torch']}, {args.threads} threads")
    if args.train_run:
        training(args)
    if args.run:
        sources = Path(args.src).read_text(encoding="utf-8").splitlines()[:args.sentences]
        for run in args.run:
            decoding(args, run, sources)


if __name__ == "__main__":
    main()
