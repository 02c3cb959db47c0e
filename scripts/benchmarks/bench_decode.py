"""Decoding speed of the three engines on the test split: PyTorch fp32 (`--engine torch`), ONNX
Runtime fp32 (`onnx-fp32`) and ONNX Runtime int8 (`onnx`), one checkpoint, one run, one table.

    python scripts/benchmarks/bench_decode.py [-c RUN] [--data CORPUS] [--threads N] [--sentences N] [--latency N]

For each engine: sentences/s of greedy search and of beam 5 over the test split's sources
(length-sorted batches of decode.batch_size, as `nmt translate --input` and `nmt eval` decode),
each with its standard sacreBLEU against all references, the share of sentences identical to the
torch engine's, and batch-1 latency (one sentence a call, as a server at low load decodes)
p50/p90 over the first --latency sources; and each engine's model files. Exports the run first
when it has no current export.

Threads: torch runs with --threads, one batch at a time; the ONNX engines decode --threads
batches at once, one thread each (a lone batch with --threads), with torch, which then only
does the search's bookkeeping, on one thread, as `nmt translate` does (`nmt.inference.onnx_engine`). A
last line gives torch in the ONNX engines' arrangement too, for a like-for-like ratio. Each
figure is the best of --rounds rounds, the engines taking turns, so a machine's drift over
minutes falls on all of them alike.

ONEDNN_MAX_CPU_ISA=AVX2 (and MKL_ENABLE_INSTRUCTIONS=AVX2) make torch behave as on an AVX2-only
CPU, but ONNX Runtime picks its kernels from cpuid and has no such switch: an AVX2 figure for
the ONNX engines needs a CPU without AVX-512.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from nmt.data.corpus import resolve_corpus
from nmt.data.prepare import ensure_prepared
from nmt.data.prepared_corpus import PreparedCorpus
from nmt.evaluation.metrics import group_references, score
from nmt.hardware import cpu_flags, cpu_name
from nmt.inference.engines import ENGINES
from nmt.inference.onnx_engine import current_export
from nmt.inference.translator import Translator
from nmt.model.checkpoint import load_model


def throughput(translator: Translator, sources: list[str], beam: int) -> tuple[float, list[str]]:
    translator.translate(sources[:32], beam=beam)  # warm-up: first-call allocations, thread pools
    start = time.perf_counter()
    outputs = translator.translate(sources, beam=beam)
    return len(sources) / (time.perf_counter() - start), outputs


def torch_two_at_once(translator: Translator, sources: list[str], beam: int, threads: int) -> float:
    """Sentences/s of the torch engine decoding `threads` batches at once, one thread each: the
    arrangement the ONNX engines use, which `nmt` does not use for torch (a like-for-like row)."""
    torch.set_num_threads(1)
    try:
        order = sorted(sources, key=len)
        size = translator.cfg.batch_size
        chunks = [order[start: start + size] for start in range(0, len(order), size)]
        translator.translate(sources[:32], beam=beam)
        start = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda chunk: translator.translate(chunk, beam=beam), chunks))
        return len(sources) / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)


def latencies(translator: Translator, sources: list[str], beam: int) -> list[float]:
    translator.translate(sources[0], beam=beam)
    times = []
    for text in sources:
        start = time.perf_counter()
        translator.translate(text, beam=beam)
        times.append(1000 * (time.perf_counter() - start))
    return times


def profile_ops(translator: Translator, graph: Path, sources: list[str], beam: int, threads: int) -> list[str]:
    """Where ONNX Runtime spends the decoder step's time, by operator type: the step session is
    swapped for one with ONNX Runtime's profiler on while `sources` are decoded, a batch at a time."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.enable_profiling = True
    options.profile_file_prefix = str(Path(tempfile.mkdtemp(prefix="nmt-profile-")) / "decoder")
    model = translator.model
    profiled = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    saved = model.shared, model.workers
    model.shared = model.workers = {**model.shared, "decoder": profiled}  # one batch at a time, as profiled
    try:
        translator.translate(sources, beam=beam)
        trace = Path(profiled.end_profiling())
    finally:
        model.shared, model.workers = saved
    totals: dict[str, float] = {}
    for event in json.loads(trace.read_text()):
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            totals[event["args"]["op_name"]] = totals.get(event["args"]["op_name"], 0.0) + event["dur"]
    shutil.rmtree(trace.parent, ignore_errors=True)
    whole = sum(totals.values())
    return [f"{op} {100 * us / whole:.1f}%" for op, us in sorted(totals.items(), key=lambda kv: -kv[1])]


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--checkpoint", default=None, help="run directory or checkpoint (default: newest run)")
    parser.add_argument("--data", default=None, help="the corpus the run trained on (default: its data.path, "
                        "$NMT_CORPUS, data/fra-eng.zip); its test split is decoded")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads each engine decodes with")
    parser.add_argument("--sentences", type=int, default=0, help="test sources to decode (0: all)")
    parser.add_argument("--latency", type=int, default=200, help="sources timed one at a time")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three engines; the best is kept")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--profile", action="store_true",
                        help="also print the decoder step's time by operator type, fp32 and int8 (beam 5)")
    args = parser.parse_args()

    loaded = load_model(args.checkpoint)
    directory, manifest = current_export(loaded.path)
    data = loaded.cfg.data
    refs = group_references(PreparedCorpus(ensure_prepared(resolve_corpus(args.data, data), data), data).pairs("test"))
    count = args.sentences or len(refs.sources)
    sources, references = refs.sources[:count], refs.references[:count]
    torch.set_num_threads(args.threads)  # the torch engine's, and what the ONNX sessions take for theirs
    translators = {engine: Translator.from_loaded(loaded, torch.device("cpu"), engine=engine) for engine in ENGINES}

    rates: dict[tuple[str, int], float] = {}
    outputs: dict[tuple[str, int], list[str]] = {}
    for _ in range(args.rounds):
        for beam in args.beams:
            for engine, translator in translators.items():
                rate, out = throughput(translator, sources, beam)
                rates[engine, beam] = max(rate, rates.get((engine, beam), 0.0))
                outputs[engine, beam] = out
                print(f"  {engine} beam {beam}: {rate:,.1f} sent/s", flush=True)
            rate = torch_two_at_once(translators["torch"], sources, beam, args.threads)
            rates["torch-batches", beam] = max(rate, rates.get(("torch-batches", beam), 0.0))
    timed = {(engine, beam): latencies(translators[engine], sources[:args.latency], beam)
             for beam in args.beams for engine in ENGINES}

    torch_size = loaded.path.stat().st_size
    sizes = {"torch": f"{loaded.path.name} {torch_size / 1e6:.1f} MB",
             "onnx-fp32": f"{(manifest.sizes['encoder.onnx'] + manifest.sizes['decoder.onnx']) / 1e6:.1f} MB",
             "onnx": f"{(manifest.sizes['encoder.int8.onnx'] + manifest.sizes['decoder.int8.onnx']) / 1e6:.1f} MB"}
    import onnxruntime

    flags = ", ".join(sorted(f for f in cpu_flags() if f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16",
                                                              "amx_bf16", "amx_int8", "avx_vnni")))
    print(f"\nCPU: {cpu_name()} ({flags}) | {args.threads} threads | torch {torch.__version__} | onnxruntime "
          f"{onnxruntime.__version__} | {loaded.path} | {count:,} test sources, standard sacreBLEU"
          + (f" | ONEDNN_MAX_CPU_ISA={os.environ['ONEDNN_MAX_CPU_ISA']}" if "ONEDNN_MAX_CPU_ISA" in os.environ else ""))
    head = "| engine | model files |"
    rule = "|---|---|"
    for beam in args.beams:
        name = "greedy" if beam == 1 else f"beam {beam}"
        head += f" {name} sent/s | x torch | BLEU | same as torch | batch-1 p50 / p90 ms |"
        rule += "---|---|---|---|---|"
    print(head + "\n" + rule)
    for engine in ENGINES:
        row = f"| {engine} | {sizes[engine]} |"
        for beam in args.beams:
            bleu = score(outputs[engine, beam], references, target_lang=loaded.tokenizer.target_lang).bleu
            same = sum(a == b for a, b in zip(outputs[engine, beam], outputs["torch", beam])) / count
            ms = timed[engine, beam]
            row += (f" {rates[engine, beam]:,.1f} | {rates[engine, beam] / rates['torch', beam]:.2f} | {bleu:.2f} | "
                    f"{same:.1%} | {percentile(ms, 50):.1f} / {percentile(ms, 90):.1f} |")
        print(row)
    print(f"torch decoding {args.threads} batches at once, one thread each (the ONNX engines' arrangement, not "
          f"nmt's for torch): " + ", ".join(f"{'greedy' if beam == 1 else f'beam {beam}'} "
                                           f"{rates['torch-batches', beam]:,.1f} sent/s "
                                           f"(x{rates['torch-batches', beam] / rates['torch', beam]:.2f} torch)"
                                           for beam in args.beams))
    if args.profile:
        for engine, part in (("onnx-fp32", "decoder.onnx"), ("onnx", "decoder.int8.onnx")):
            ops = profile_ops(translators[engine], directory / part, sources[:args.latency], 5, args.threads)
            print(f"{engine} decoder step, beam 5, time by operator: " + ", ".join(ops[:10]))


if __name__ == "__main__":
    main()
