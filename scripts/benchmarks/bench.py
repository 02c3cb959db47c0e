"""Speed benchmark: nmt against a faithful re-implementation of the seed 002 design, in one run.

    python scripts/benchmarks/bench.py                      # default config, 2 threads, about 5 minutes
    python scripts/benchmarks/bench.py --json bench.json    # also write the figures as JSON
    python scripts/benchmarks/bench.py --model config       # the default config's own model: subwords, its options on
    python scripts/benchmarks/bench.py --model onmt         # OpenNMT-py's RNN architecture, like for like
    python scripts/benchmarks/bench.py --device cuda --config configs/gpu.yaml --model config   # the GPU section
    python scripts/benchmarks/bench.py --set train.batch_tokens=4000     # any config value, as nmt train --set

The figures name the machine they came from: the CPU model and the ISA flags that decide the
precision (avx2, avx512f, avx512_bf16, amx), whether bf16 is native there (probed, not read from
the flags alone), and the precision each figure ran in. Where bf16 is native, nmt's training is
measured in fp32 as well, beside bf16; elsewhere in fp32 only (emulated bf16 is not worth a figure).

With --device cuda, nmt alone is measured on the GPU (the seed reference is a CPU program): target
tokens/s over the config's batches, peak GPU memory, the share of the timed steps the GPU spent
running kernels (torch.profiler's kernel time over wall time), and greedy / beam 5 decoding.

The model (`--model`), at the config's sizes:
  seed    seed 002's architecture: the config's model options (bidirectional encoder, input feeding,
          tied embeddings) switched off, so that nmt and the seed reference train
          the same model;
  onmt    OpenNMT-py's RNN architecture, to compare with it like for like: input feeding, additive
          (mlp) attention, a unidirectional encoder, untied embeddings, no bridge;
  config  the config's model and tokenizer as they are (configs/default.yaml: subwords, its options).
seed and onmt use the seed's units, d2l's word vocabulary and pairs of up to 20 word tokens
(--set data.tokenizer=... or data.max_len=... change that); both sides always train on the same
sentences and ids (the seed reference takes any vocabulary).

`--no-decode` measures training only (the decoding API differs between versions).

Each measurement runs in a fresh process (so peak memory is its own) on the same training
sentences, model sizes and thread count:
  train_tok_s / seed_train_tok_s   target tokens/s (non-pad, <eos> included), median of windows
                                   after warm-up; nmt as its own pipeline feeds it (length-bucketed
                                   batches), the seed as seed 002 feeds it (64 shuffled sentences
                                   padded to the longest)
  greedy_sent_s / seed_greedy_sent_s   test-split sentences/s; nmt batched, the seed one sentence
                                   at a time (d2l.predict_s2s_ch9); both with untrained weights and
                                   the same length caps, so both decode every sentence to its cap
  beam5_sent_s                     nmt's batched beam search, beam 5, same sentences and caps
  peak_rss_mb                      peak resident memory of nmt's training process
  gemm_gflops                      this machine's fp32 GEMM rate (2048^3, same thread count)
  flops_per_token                  the model's training FLOPs per target token (3x forward)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "benchmarks"))


SEED_DESIGN_OFF = ("bidirectional", "bridge", "input_feeding", "tie_embeddings")
MODEL_OPTIONS = {"seed": [f"model.{option}=false" for option in SEED_DESIGN_OFF],
                 "onmt": ["model.bidirectional=false", "model.bridge=false", "model.input_feeding=true",
                          "model.tie_embeddings=false", "model.attention=additive"],
                 "config": []}
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
# Settings that hold oneDNN, MKL and ATen's own kernels to an older instruction set (to see on an
# AVX-512 machine what an AVX2-only CPU gets): the figures record them.
ISA_CAPS = ("ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY")


def _prepare(args):
    """The config, splits, vocabularies, tokenizer (None for words) and training examples, built
    with only what every version of nmt offers, so that this script can measure an older checkout."""
    from nmt.config import load_config
    from nmt.training.recipe import fit_to_corpus
    from nmt.data.batches import encode_pairs
    from nmt.data.corpus import load_splits, resolve_corpus
    from nmt.data.tokenizer import SubwordTokenizer
    from nmt.data.vocab import Vocab

    torch.set_num_threads(args.threads)
    units = ["data.tokenizer=word", "data.max_len=20"] if args.model != "config" else []
    precision = [f"train.precision={args.precision}"] if args.precision else []
    cfg = fit_to_corpus(load_config(args.config, units + MODEL_OPTIONS[args.model] + args.overrides + precision),
                        args.data)
    splits = load_splits(resolve_corpus(args.data, cfg.data), cfg.data.num_pairs, cfg.data)
    tokenizer = None
    if cfg.data.tokenizer == "word":
        src_vocab = Vocab.build((p.src for p in splits.train), cfg.data.min_freq)
        tgt_vocab = Vocab.build((p.tgt for p in splits.train), cfg.data.min_freq)
    else:
        tokenizer = SubwordTokenizer.train([p.raw[0] for p in splits.train], [p.raw[1] for p in splits.train],
                                           cfg.data)
        src_vocab, tgt_vocab = tokenizer.vocabularies()
    examples = encode_pairs(splits.train, src_vocab, tgt_vocab, cfg.data.max_len, tokenizer)
    return cfg, splits, src_vocab, tgt_vocab, examples, tokenizer


def _windows(step_fn, batches, warmup: int, windows: int, window_steps: int, sync=lambda: None) -> list[float]:
    """Run warm-up steps, then time `windows` windows of `window_steps` steps; tokens/s each.
    `sync` waits for the device, so a window's time includes the work it queued."""
    it = iter(batches)
    for _ in range(warmup):
        step_fn(next(it))
    rates = []
    for _ in range(windows):
        sync()
        tokens, start = 0, time.perf_counter()
        for _ in range(window_steps):
            tokens += step_fn(next(it))
        sync()
        rates.append(tokens / (time.perf_counter() - start))
    return rates


def _training_batches(cfg, examples, pad_id: int, bos_id: int):
    """Endless epochs of nmt's own batches (sentences or tokens per the config), shuffled."""
    from nmt.data import batches as batching

    rng = random.Random(0)
    while True:
        if hasattr(batching, "lengths"):  # batches cut from length arrays (nmt since prepared corpora)
            batches = batching.bucket_batches(*batching.lengths(examples), cfg.train.batch_size,
                                          np.random.default_rng(rng.randrange(1 << 30)), cfg.train.batch_tokens)
        else:
            batches = batching.bucket_batches(examples, cfg.train.batch_size, rng, cfg.train.batch_tokens)
        for indices in batches:
            yield batching.collate([examples[i] for i in indices], pad_id, bos_id)


def _nmt_model(args, cfg, src_vocab, tgt_vocab):
    """nmt's model of the config, seeded, on --device with --threads: what both nmt measurements time."""
    from nmt import hardware
    from nmt.model import build_model

    hardware.configure(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    return build_model(cfg.model, src_vocab, tgt_vocab).to(device), device


def measure_nmt_train(args) -> dict:
    from nmt import hardware
    from nmt.training.loop import train_step

    cfg, _, src_vocab, tgt_vocab, examples, _ = _prepare(args)
    model, device = _nmt_model(args, cfg, src_vocab, tgt_vocab)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr, fused=True)
    batches = _training_batches(cfg, examples, tgt_vocab.pad_id, tgt_vocab.bos_id)

    def step(batch) -> int:
        train_step(model, [batch.to(device)], optimizer, cfg, tgt_vocab.pad_id)
        return batch.num_tokens

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rates = _windows(step, batches, args.warmup, args.windows, args.window_steps, sync)
    result = {"train_tok_s": statistics.median(rates), "train_windows": rates, "peak_rss_mb": hardware.peak_rss_mb(),
              "precision": cfg.train.precision, "flops_per_token": flops_per_token(cfg, examples, len(tgt_vocab))}
    if device.type == "cuda":
        result["gpu_peak_mem_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        result["gpu_busy_share"] = _gpu_busy_share(lambda: step(next(batches)), args.window_steps)
    return result


def _gpu_busy_share(step_fn, steps: int) -> float:
    """The share of the wall time of `steps` steps during which the GPU ran kernels."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step_fn()
        torch.cuda.synchronize()
        wall_us = (time.perf_counter() - start) * 1e6
    kernel_us = sum(e.self_device_time_total for e in prof.key_averages() if e.device_type.name == "CUDA")
    return kernel_us / wall_us


def measure_seed_train(args) -> dict:
    import seed_reference as seed

    from nmt import hardware
    from nmt.data.batches import pad

    cfg, _, src_vocab, tgt_vocab, examples, _ = _prepare(args)
    m = cfg.model
    torch.manual_seed(0)
    model = seed.build(len(src_vocab), len(tgt_vocab), m.embed_size, m.hidden_size, m.num_layers, m.dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
    loss_fn = seed.MaskedSoftmaxCELoss()
    order = list(range(len(examples)))
    random.Random(0).shuffle(order)

    def batches():
        for start in range(0, len(order), 64):
            chunk = [examples[i] for i in order[start: start + 64]]
            X = pad([ex.src for ex in chunk], src_vocab.pad_id)
            Y = pad([[tgt_vocab.bos_id] + ex.tgt for ex in chunk], tgt_vocab.pad_id)  # tgt ends in <eos>
            yield X, torch.tensor([len(ex.src) for ex in chunk]), Y, torch.tensor([len(ex.tgt) + 1 for ex in chunk])

    def step(batch) -> int:
        X, X_vlen, Y, Y_vlen = batch
        seed.train_step(model, optimizer, loss_fn, X, X_vlen, Y, Y_vlen)
        return int((Y_vlen - 1).sum())

    rates = _windows(step, batches(), args.warmup, args.windows, args.window_steps)
    return {"seed_train_tok_s": statistics.median(rates), "seed_train_windows": rates,
            "seed_peak_rss_mb": hardware.peak_rss_mb()}


def _decode_inputs(args):
    from nmt.evaluation.metrics import group_references

    cfg, splits, src_vocab, tgt_vocab, _, tokenizer = _prepare(args)
    references = group_references(splits.test)
    n = args.decode_sentences
    return cfg, references.sources[:n], references.source_words[:n], src_vocab, tgt_vocab, tokenizer


def measure_nmt_decode(args) -> dict:
    from nmt.inference.translator import Translator

    cfg, texts, _, src_vocab, tgt_vocab, tokenizer = _decode_inputs(args)
    model, device = _nmt_model(args, cfg, src_vocab, tgt_vocab)
    model.eval()
    translator = Translator(model, src_vocab, tgt_vocab, cfg.decode, device, tokenizer)
    translator.translations(texts[:64])  # warm-up
    result = {"decode_sentences": len(texts)}
    for key, beam_size in (("greedy", 1), ("beam5", 5)):
        start = time.perf_counter()
        outputs = translator.translations(texts, beam_size)
        result[f"{key}_sent_s"] = len(texts) / (time.perf_counter() - start)
        result[f"{key}_out_tokens"] = sum(len(t.tokens) for t in outputs)
    return result


def measure_seed_decode(args) -> dict:
    import seed_reference as seed

    from nmt.inference.decoding.constraints import NO_RULES
    from nmt.inference.text.road import output_cap

    cfg, texts, words, src_vocab, tgt_vocab, tokenizer = _decode_inputs(args)
    sources = words if tokenizer is None else tokenizer.source_tokens(texts)
    m, d = cfg.model, cfg.decode
    torch.manual_seed(0)
    model = seed.build(len(src_vocab), len(tgt_vocab), m.embed_size, m.hidden_size, m.num_layers, m.dropout).eval()
    ids = [src_vocab.encode(s) + [src_vocab.eos_id] for s in sources]
    caps = [output_cap(len(x), NO_RULES, d, 1) for x in ids]  # nmt's own caps
    seed.predict(model, ids[0], tgt_vocab.bos_id, tgt_vocab.eos_id, caps[0])  # warm-up
    start = time.perf_counter()
    out_tokens = sum(len(seed.predict(model, x, tgt_vocab.bos_id, tgt_vocab.eos_id, cap)) for x, cap in zip(ids, caps))
    elapsed = time.perf_counter() - start
    return {"seed_greedy_sent_s": len(ids) / elapsed, "seed_greedy_out_tokens": out_tokens}


def measure_gemm(args) -> dict:
    from nmt import hardware

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    shapes = [("gemm_gflops", torch.float32, (2048, 2048, 2048)),
              ("gemm_gflops_output_shape", torch.float32, (640, 256, 17582))]
    if hardware.fast_bf16(device):  # emulated bf16 runs ~150x slower than fp32: nothing to learn from it
        shapes.append(("gemm_gflops_bf16", torch.bfloat16, (2048, 2048, 2048)))
    result = {}
    for name, dtype, (m, k, n) in shapes:
        if device.type == "cuda":
            m, k, n = 8 * m, 8 * k, n  # big enough to fill a GPU
        a, b = torch.randn(m, k, dtype=dtype, device=device), torch.randn(k, n, dtype=dtype, device=device)
        for _ in range(3):
            a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        reps, start = 10, time.perf_counter()
        for _ in range(reps):
            a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        result[name] = 2 * m * k * n * reps / (time.perf_counter() - start) / 1e9
    return result


def flops_per_token(cfg, examples, tgt_vocab_size: int) -> float:
    """Training FLOPs per target token: 3x the forward multiply-adds x2, per the model's shapes."""
    E, H, L = cfg.model.embed_size, cfg.model.hidden_size, cfg.model.num_layers
    src_tokens = sum(len(ex.src) for ex in examples)
    tgt_tokens = sum(len(ex.tgt) for ex in examples)
    avg_src_len = src_tokens / len(examples)
    lstm = lambda input_size: 8 * H * (input_size + H)  # 4 gates, input and recurrent GEMMs  # noqa: E731
    encoder_per_src = lstm(E) + (L - 1) * lstm(H) + 2 * H * H  # + the key projection
    decoder_per_tgt = (2 * H * H + 4 * H * avg_src_len  # query projection, scores and context
                       + lstm(E + H) + (L - 1) * lstm(H) + 2 * H * tgt_vocab_size)
    forward = decoder_per_tgt + encoder_per_src * src_tokens / tgt_tokens
    return 3 * forward


def _run(fn_name: str, args) -> dict:
    """`fn_name(args)` in a fresh process."""
    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(globals()[fn_name], (args,))


def machine(device: torch.device) -> dict:
    """What the figures came from: the CPU (or GPU), the flags that decide precision, bf16 support."""
    from nmt import hardware

    flags = hardware.cpu_flags()
    support = hardware.bf16_support(device)
    info = {"cpu": hardware.cpu_name(), "cpu_flags": {f: f in flags for f in ISA_FLAGS},
            "bf16_native": support.native, "bf16_reason": support.reason,
            "isa_caps": {k: os.environ[k] for k in ISA_CAPS if k in os.environ}, "torch": torch.__version__}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def _precisions(args, device: torch.device) -> list[str]:
    """The training precisions to measure: the asked one, or bf16 and fp32 where bf16 is native."""
    from nmt import hardware
    from nmt.config import load_config

    requested = args.precision or load_config(args.config, args.overrides).train.precision
    if requested == "auto":
        return ["bf16", "fp32"] if hardware.fast_bf16(device) else ["fp32"]
    return [hardware.resolve_precision(requested, device)]  # an unavailable bf16 stops here, in one line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs/default.yaml"))
    parser.add_argument("--data", default=None, help="fra-eng.zip (default: as nmt finds it)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default=None,
                        help="nmt's train.precision (default: the config's; auto measures bf16 and fp32 where bf16 is native)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--window-steps", type=int, default=20)
    parser.add_argument("--decode-sentences", type=int, default=1000)
    parser.add_argument("--model", choices=tuple(MODEL_OPTIONS), default="seed",
                        help="seed: seed 002's architecture at the config's sizes; onmt: OpenNMT-py's RNN "
                             "architecture; config: the config's model and tokenizer")
    parser.add_argument("--no-decode", action="store_true", help="measure training only")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="override a config value, as nmt train --set does (repeatable)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from nmt import hardware
    from nmt.errors import NmtError

    try:
        device = hardware.resolve_device(args.device)
        precisions = _precisions(args, device)
    except NmtError as e:
        sys.exit(f"error: {e}")
    results: dict = {"threads": args.threads, "config": args.config, "model": args.model, "device": args.device,
                     "machine": machine(device), "precisions": precisions,
                     "overrides": args.overrides}
    decode = [] if args.no_decode else ["measure_nmt_decode"]
    steps = ["measure_gemm"] + [("measure_nmt_train", p) for p in precisions] + decode
    if device.type == "cpu":
        steps += ["measure_seed_train"] + ([] if args.no_decode else ["measure_seed_decode"])
    for step in steps:
        name, precision = step if isinstance(step, tuple) else (step, None)
        start = time.perf_counter()
        figures = _run(name, argparse.Namespace(**{**vars(args), "precision": precision or args.precision}))
        if precision is not None:
            results.setdefault("train", {})[precision] = figures
        else:
            results.update(figures)
        print(f"[{name}{f' {precision}' if precision else ''} took {time.perf_counter() - start:.0f} s]",
              file=sys.stderr)
    print_table(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")


def print_table(results: dict, args) -> None:
    info = results["machine"]
    flags = ", ".join(f for f, present in info["cpu_flags"].items() if present) or "none listed"
    isa = "".join(f"; {k}={v}" for k, v in info["isa_caps"].items())
    print(f"cpu: {info['cpu']} | flags: {flags}{isa} | bf16 native: {'yes' if info['bf16_native'] else 'no'} "
          f"({info['bf16_reason']})")
    size = "2048^3" if args.device == "cpu" else "16384x16384x2048 on the GPU"
    bf16 = f", bf16 {results['gemm_gflops_bf16']:.0f}" if "gemm_gflops_bf16" in results else ""
    where = info.get("gpu", f"{args.threads} threads")
    print(f"machine: fp32 GEMM {results['gemm_gflops']:.0f} GFLOP/s ({size}), "
          f"{results['gemm_gflops_output_shape']:.0f} at the output projection's shape{bf16}; {where}; torch {info['torch']}")
    first = results["train"][results["precisions"][0]]
    if args.model == "seed":  # the FLOP count is the seed architecture's
        print(f"model: {first['flops_per_token'] / 1e6:.1f} MFLOP per trained target token")
    for precision, figures in results["train"].items():
        line = f"train   nmt ({precision}, {args.model} model) {figures['train_tok_s']:8,.0f} tok/s"
        if "seed_train_tok_s" in results:
            speedup = figures["train_tok_s"] / results["seed_train_tok_s"]
            figures["train_speedup"] = speedup
            line += f" | seed 002 (fp32) {results['seed_train_tok_s']:8,.0f} tok/s | x{speedup:.2f}"
            if args.model == "seed":
                share = figures["train_tok_s"] * figures["flops_per_token"] / (results["gemm_gflops"] * 1e9)
                line += f" | {100 * share:.0f}% of the fp32 GEMM bound"
        if "gpu_busy_share" in figures:
            line += (f" | GPU busy {100 * figures['gpu_busy_share']:.0f}% of the time | "
                     f"peak GPU memory {figures['gpu_peak_mem_mb']:,.0f} MB")
        print(line)
    memory = " | ".join(f"nmt {p} {f['peak_rss_mb']:,.0f} MB" for p, f in results["train"].items())
    if "seed_peak_rss_mb" in results:
        memory += f" | seed 002 {results['seed_peak_rss_mb']:,.0f} MB"
    if "greedy_sent_s" not in results:  # --no-decode
        print(f"memory  peak RSS while training: {memory}")
        return
    greedy = f"greedy  nmt (fp32) {results['greedy_sent_s']:8,.1f} sent/s"
    if "seed_greedy_sent_s" in results:
        results["greedy_speedup"] = results["greedy_sent_s"] / results["seed_greedy_sent_s"]
        greedy += f" | seed 002 {results['seed_greedy_sent_s']:8,.1f} sent/s | x{results['greedy_speedup']:.2f}"
    print(f"{greedy} ({results['decode_sentences']} test sentences)")
    print(f"beam 5  nmt (fp32) {results['beam5_sent_s']:8,.1f} sent/s (batched)")
    print(f"memory  peak RSS while training: {memory}")


if __name__ == "__main__":
    main()
