"""Load test for `nmt serve`: the server on a free loopback port, 1, 8, 32 and 128 concurrent
clients for a bounded time each, one test-split English source per request; and the offline
throughput of `nmt translate --input` (the same translate_stream) on the same sentences, timed
before and after the load levels.

    python scripts/benchmarks/bench_serve.py [--checkpoint RUN] [--clients 1 8 32 128] [--seconds 15]
                                             [--engines torch onnx]

Each engine (`nmt serve --engine`) in turn, torch and ONNX Runtime int8 by default (the
checkpoint is exported first when it has no current export). Prints sentences/s, p50 and p99 latency, errors and 503s per level, the server's peak RSS, and
the CPU the figures came from. The clients (aiohttp: httpx's own overhead halved the figures at
32 clients) run in this process, on the same machine: on a 2-core CPU they take part of the CPU
the server could use, as a co-located caller would.

"decoder alone" is the ceiling of each level: the translator with no HTTP, on batches of as
many random test sentences as that level can have in flight (closed-loop clients never have
more requests out than there are clients), while the offline figure decodes length-sorted
batches of decode.batch_size.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import httpx
import torch

from nmt.data.corpus import load_corpus
from nmt.evaluation.metrics import group_references
from nmt.hardware import cpu_name
from nmt.inference.engines import ENGINES
from nmt.inference.onnx_engine import current_export
from nmt.inference.translator import Translator
from nmt.model.checkpoint import load_model

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def load_level(url: str, sentences: list[str], clients: int, seconds: float, beam: int,
                     answers: dict[str, str]) -> dict:
    """`clients` concurrent callers, each sending one sentence at a time until `seconds` pass;
    every answer is kept in `answers` to be compared with offline decoding."""
    latencies: list[float] = []
    counts = {"ok": 0, "503": 0, "errors": 0}
    deadline = time.perf_counter() + seconds

    async def client(index: int, http: aiohttp.ClientSession) -> None:
        i = index
        while time.perf_counter() < deadline:
            text = sentences[i % len(sentences)]
            i += clients
            start = time.perf_counter()
            try:
                async with http.post(f"{url}/translate", json={"text": text, "beam": beam}) as response:
                    body = await response.json()
            except (aiohttp.ClientError, asyncio.TimeoutError):
                counts["errors"] += 1
                continue
            if response.status == 200:
                counts["ok"] += 1
                latencies.append(time.perf_counter() - start)
                answers[text] = body["translations"][0]["tgt"]
            elif response.status == 503:
                counts["503"] += 1
                await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
            else:
                counts["errors"] += 1

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client(i, http) for i in range(clients)))
        elapsed = time.perf_counter() - start
    latencies.sort()
    pick = (lambda q: latencies[min(int(q * len(latencies)), len(latencies) - 1)] * 1000) if latencies else (
        lambda q: float("nan"))
    return {"clients": clients, "sent_s": counts["ok"] / elapsed, "p50_ms": pick(0.50), "p99_ms": pick(0.99),
            "errors": counts["errors"], "503": counts["503"], "requests": counts["ok"]}


def wait_for_health(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited with code {proc.returncode}")
        try:
            httpx.get(f"{url}/health", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    sys.exit("the server never answered /health")


def offline(translator: Translator, sentences: list[str], beam: int) -> tuple[float, list[str]]:
    """Sentences/s of `nmt translate --input` on the same sentences (model load excluded), and its outputs."""
    translator.translate(sentences[:64], beam)  # warm-up
    start = time.perf_counter()
    outputs = list(translator.translate_stream(sentences, beam))
    return len(sentences) / (time.perf_counter() - start), outputs


def decoder_alone(translator: Translator, sentences: list[str], batch: int, beam: int, seconds: float = 3.0) -> float:
    """Sentences/s of the server's decoding call on batches of `batch` random sentences, no HTTP."""
    rng, done = random.Random(0), 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        texts = rng.sample(sentences, min(batch, len(sentences)))
        translator.nbest(texts, 1, beam)
        done += len(texts)
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", "-c", default=None, help="run directory or checkpoint (default: newest run)")
    parser.add_argument("--data", default=None)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--seconds", type=float, default=15.0, help="time per level")
    parser.add_argument("--beam", type=int, default=None, help="beam of every request (default: the run's "
                        "decode.beam_size, what nmt serve answers with when a request names none)")
    parser.add_argument("--max-batch", type=int, default=128, help="nmt serve's --max-batch (its default)")
    parser.add_argument("--engines", nargs="+", default=["torch", "onnx"], choices=ENGINES,
                        help="nmt serve --engine of each run (the ONNX ones export the checkpoint if needed)")
    parser.add_argument("--serve-args", default="", help="extra flags for nmt serve, e.g. '--max-wait-ms 2'")
    args = parser.parse_args()

    loaded = load_model(args.checkpoint)
    args.beam = args.beam or loaded.cfg.decode.beam_size
    _, splits = load_corpus(args.data, loaded.cfg.data)
    sentences = group_references(splits.test).sources
    if any(engine != "torch" for engine in args.engines):
        current_export(loaded.path)
    results = [measure_engine(engine, loaded, sentences, args) for engine in args.engines]
    search = "greedy" if args.beam == 1 else f"beam {args.beam}"
    print(f"CPU: {cpu_name()} | {torch.get_num_threads()} threads | checkpoint {loaded.path} | {search} | "
          f"{len(sentences):,} test sources | {args.seconds:g} s a level")
    print("| engine | clients | sentences/s | p50 ms | p99 ms | errors | 503s | vs offline | decoder alone, same batch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for row in r["rows"]:
            print(f"| {r['engine']} | {row['clients']} | {row['sent_s']:,.1f} | {row['p50_ms']:,.1f} | "
                  f"{row['p99_ms']:,.1f} | {row['errors']} | {row['503']} | {row['sent_s'] / r['offline']:.2f} | "
                  f"{row['alone']:,.1f} |")
    for r in results:
        print(f"{r['engine']}: offline (nmt translate --input, same sentences, {search}): {r['offline']:,.1f} "
              f"sentences/s, the mean of {r['before']:,.1f} before and {r['after']:,.1f} after the load levels; "
              f"server peak RSS {r['rss']:,.0f} MB; answers that differ from offline decoding: {r['differ']} of "
              f"{r['answers']:,} distinct sentences")


def measure_engine(engine: str, loaded, sentences: list[str], args) -> dict:
    """The load levels against `nmt serve --engine ENGINE`, and the same engine offline."""
    # Offline decoding is timed before and after the load levels and the mean is the reference:
    # on a shared (virtual) machine the speed drifts by 10-20% over minutes.
    translator = Translator.from_loaded(loaded, torch.device("cpu"), engine=engine)
    offline_before, outputs = offline(translator, sentences, args.beam)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "nmt", "serve", "-c", str(loaded.path), "--port", str(port), "--device", "cpu",
               "--max-batch", str(args.max_batch), "--engine", engine, *args.serve_args.split()]
    server = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.DEVNULL)
    rows, answers = [], {}
    try:
        wait_for_health(url, server)
        asyncio.run(load_level(url, sentences, 4, 2.0, args.beam, answers))  # warm-up
        for clients in args.clients:
            rows.append(asyncio.run(load_level(url, sentences, clients, args.seconds, args.beam, answers)))
            print(f"  {engine}, {clients} clients: {rows[-1]['sent_s']:.1f} sent/s", file=sys.stderr, flush=True)
        rss = peak_rss_mb(server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    offline_after, _ = offline(translator, sentences, args.beam)
    for row in rows:
        row["alone"] = decoder_alone(translator, sentences, min(row["clients"], args.max_batch), args.beam)
    expected = dict(zip(sentences, outputs))
    return {"engine": engine, "rows": rows, "offline": (offline_before + offline_after) / 2, "before": offline_before,
            "after": offline_after, "rss": rss, "answers": len(answers),
            "differ": sum(answer != expected[text] for text, answer in answers.items())}


if __name__ == "__main__":
    main()
