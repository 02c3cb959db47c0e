"""Training speed of arms of one config, in one run: target tokens/s of whole training steps
(encoder, decoder, loss, backward, Adam) for `stepwise` (the config as it is) against `parallel`
(or the arms you name), at the config's sizes, with the ratio to the first arm and the median
step time. An arm with train.accum_steps N steps once per N micro-batches, so the cost of
accumulation at one global batch is a run of arms too.

    python scripts/benchmarks/bench_decoders.py                   # configs/default.yaml, 2 threads
    python scripts/benchmarks/bench_decoders.py --arm parallel=model.decoder=parallel,model.input_feeding=false,model.embed_dropout=0.1
    python scripts/benchmarks/bench_decoders.py --window-steps 4 --arm n1=train.batch_size=256 \
        --arm n2=train.batch_size=128,train.accum_steps=2 --arm n4=train.batch_size=64,train.accum_steps=4 \
        --arm n8=train.batch_size=32,train.accum_steps=8

This VM's speed drifts by 10-20% over minutes, so the arms are interleaved: one process prepares
the corpus and builds every arm's model, then times a window of each arm in turn, round after
round, every arm reading the same batches; each arm's figure is the median of its windows. Where
bf16 is native on this CPU (probed, not read from the flags), each arm is timed in bf16 too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "benchmarks"))

from bench import _prepare, _training_batches, machine  # noqa: E402

PARALLEL = "model.decoder=parallel,model.input_feeding=false"


def parse_arm(text: str) -> tuple[str, list[str]]:
    name, _, changes = text.partition("=")
    return name, [c for c in changes.split(",") if c]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "configs/default.yaml"))
    parser.add_argument("--data", default=None, help="fra-eng.zip (default: as nmt finds it)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--arm", action="append", default=None,
                        help=f"NAME=KEY=VALUE[,...] (default: stepwise= and parallel={PARALLEL})")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--window-steps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=8)
    args = parser.parse_args()
    arms = [parse_arm(a) for a in (args.arm or ["stepwise=", f"parallel={PARALLEL}"])]

    from nmt import hardware
    from nmt.config import load_config
    from nmt.training.recipe import fit_to_corpus
    from nmt.model import build_model
    from nmt.training.loop import train_step

    hardware.configure(args.threads)
    device = torch.device("cpu")
    precisions = ["fp32"] + (["bf16"] if hardware.bf16_support(device).native else [])
    cfg, _, src_vocab, tgt_vocab, examples, _ = _prepare(argparse.Namespace(
        config=args.config, data=args.data, threads=args.threads, model="config", overrides=[], precision=None))
    info = machine(device)
    flags = " ".join(f for f, on in info["cpu_flags"].items() if on)
    caps = " ".join(f"{k}={v}" for k, v in info["isa_caps"].items()) or "none"
    print(f"CPU: {info['cpu']} ({flags}); bf16 native: {info['bf16_native']} ({info['bf16_reason']}); "
          f"ISA caps: {caps}; torch {info['torch']}, {args.threads} threads", flush=True)

    for precision in precisions:
        runs = []
        for name, changes in arms:
            arm_cfg = fit_to_corpus(load_config(args.config, changes + [f"train.precision={precision}"]), args.data)
            torch.manual_seed(0)
            model = build_model(arm_cfg.model, src_vocab, tgt_vocab).train()
            optimizer = torch.optim.Adam(model.parameters(), lr=arm_cfg.train.lr, fused=True)
            batches = _training_batches(arm_cfg, examples, tgt_vocab.pad_id, tgt_vocab.bos_id)
            runs.append((name, arm_cfg, model, optimizer, batches, [], []))
        for round_ in range(args.rounds + 1):  # round 0 warms every arm up and is not counted
            for name, arm_cfg, model, optimizer, batches, rates, step_ms in runs:
                steps = args.warmup if round_ == 0 else args.window_steps
                tokens, start = 0, time.perf_counter()
                for _ in range(steps):
                    micro = [next(batches) for _ in range(arm_cfg.train.accum_steps)]
                    train_step(model, micro, optimizer, arm_cfg, tgt_vocab.pad_id)
                    tokens += sum(batch.num_tokens for batch in micro)
                if round_:
                    elapsed = time.perf_counter() - start
                    rates.append(tokens / elapsed)
                    step_ms.append(1000 * elapsed / steps)
        base = statistics.median(runs[0][5])
        print(f"\n{precision}: target tokens/s of whole training steps, median of {args.rounds} interleaved "
              f"windows of {args.window_steps} steps")
        for name, arm_cfg, _, _, _, rates, step_ms in runs:
            median = statistics.median(rates)
            batch = f"{arm_cfg.train.batch_size} x {arm_cfg.train.accum_steps}"
            print(f"  {name:<12} {median:>9,.0f} tok/s  (windows {min(rates):,.0f}-{max(rates):,.0f})  "
                  f"x{median / base:.2f}  {statistics.median(step_ms):.1f} ms a step  "
                  f"[{batch} sentences a step]", flush=True)


if __name__ == "__main__":
    main()
