"""How near this CPU's matrix-product rate the parallel decoder's LSTM layers already run.

Each of the parallel decoder's layers, forward and backward, as a training step calls it (one
`nn.LSTM` call over the whole target, at the config's sizes), against one plain product with the
same arithmetic, forward and backward: [input; h] (rows, in + hidden) @ (in + hidden, 4 hidden),
which is what a layer's gates cost when nothing but the product takes time. The difference is
all a faster arrangement of those layers could still save a training step; the stepwise and
parallel arrangements do the same products, so that saving bounds their speed ratio too. A third
figure times the layer as PyTorch code can write it without oneDNN's kernel: the input's share
of the gates in one product, then a loop of one product and the gate arithmetic a position,
features first as `nmt/model/unrolled.py` arranges the stepwise decoder.

    python scripts/benchmarks/bench_lstm_rate.py                  # configs/default.yaml, 2 threads
    python scripts/benchmarks/bench_lstm_rate.py --target-len 20  # a fixed padded target length
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "benchmarks"))

from bench import _prepare, _training_batches, machine  # noqa: E402

from nmt import hardware  # noqa: E402
from nmt.config import load_config  # noqa: E402
from nmt.training.recipe import fit_to_corpus  # noqa: E402
from nmt.model.unrolled import lstm_gates  # noqa: E402


def median_ms(run, rounds: int, repeats: int = 10) -> float:
    """The median over `rounds` of the mean time of `repeats` calls, after a warm-up."""
    for _ in range(3):
        run()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        times.append((time.perf_counter() - start) / repeats)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "configs/default.yaml"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data", default=None, help="fra-eng.zip (default: as nmt finds it)")
    parser.add_argument("--target-len", type=int, default=0,
                        help="padded target positions of a batch (0: the median of the config's training batches)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    hardware.configure(args.threads)
    cfg = fit_to_corpus(load_config(args.config, []), args.data)
    if not args.target_len:
        cfg, _, _, tgt_vocab, examples, _ = _prepare(argparse.Namespace(
            config=args.config, data=args.data, threads=args.threads, model="config", overrides=[], precision=None))
        batches = _training_batches(cfg, examples, tgt_vocab.pad_id, tgt_vocab.bos_id)
        args.target_len = int(statistics.median(next(batches).tgt_in.shape[1] for _ in range(500)))
    batch, embed, hidden = cfg.train.batch_size, cfg.model.embed_size, cfg.model.hidden_size
    rows = batch * args.target_len
    info = machine(torch.device("cpu"))
    flags = " ".join(f for f, on in info["cpu_flags"].items() if on)
    caps = " ".join(f"{k}={v}" for k, v in info["isa_caps"].items()) or "none"
    print(f"CPU: {info['cpu']} ({flags}); ISA caps: {caps}; torch {info['torch']}, {args.threads} threads; "
          f"fp32, {batch} sentences x {args.target_len} target positions", flush=True)

    torch.manual_seed(0)
    total_lstm = total_product = 0.0
    # The parallel decoder's layers: the bottom one reads the embeddings, each above [below; context].
    for layer in range(cfg.model.num_layers):
        in_size = embed if layer == 0 else 2 * hidden
        lstm = nn.LSTM(in_size, hidden, batch_first=True)
        x = torch.randn(batch, args.target_len, in_size, requires_grad=True)
        begin = (torch.zeros(1, batch, hidden), torch.zeros(1, batch, hidden))

        def lstm_step() -> None:
            output, _ = lstm(x, begin)
            output.sum().backward()

        gates_in = torch.randn(rows, in_size + hidden, requires_grad=True)
        weight = torch.randn(4 * hidden, in_size + hidden, requires_grad=True)

        def product_step() -> None:
            F.linear(gates_in, weight).sum().backward()

        def loop_step() -> None:  # (4 hidden, positions, batch) input gates, then position by position
            steps = x.shape[1]
            input_gates = torch.addmm((lstm.bias_ih_l0 + lstm.bias_hh_l0)[:, None], lstm.weight_ih_l0,
                                      x.transpose(0, 1).reshape(steps * batch, in_size).t()).view(-1, steps, batch)
            h, c, outputs = begin[0][0].t(), begin[1][0].t(), []
            for t in range(steps):
                h, c = lstm_gates(torch.addmm(input_gates[:, t], lstm.weight_hh_l0, h), c)
                outputs.append(h)
            torch.stack(outputs).sum().backward()

        flop = 3 * 2 * rows * (in_size + hidden) * 4 * hidden  # forward, and twice that backward
        lstm_ms, product_ms, loop_ms = (median_ms(run, args.rounds) for run in (lstm_step, product_step, loop_step))
        total_lstm, total_product = total_lstm + lstm_ms, total_product + product_ms
        print(f"  layer {layer} ({in_size} -> {hidden}), {flop / 1e9:.2f} GFLOP: nn.LSTM {lstm_ms:.1f} ms "
              f"({flop / lstm_ms / 1e6:,.0f} GFLOP/s); one product {product_ms:.1f} ms "
              f"({flop / product_ms / 1e6:,.0f} GFLOP/s); a loop of products {loop_ms:.1f} ms "
              f"({flop / loop_ms / 1e6:,.0f} GFLOP/s)", flush=True)
    print(f"decoder layers: nn.LSTM {total_lstm:.1f} ms, at the product's rate {total_product:.1f} ms: "
          f"at most {total_lstm - total_product:.1f} ms a training step left to save in them")


if __name__ == "__main__":
    main()
