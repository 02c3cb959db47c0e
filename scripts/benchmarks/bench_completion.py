"""Latency of the page's completion requests: what a translator typing the start of the French
waits for. For test-split sources, the start of a reference (its first 1 to 3 words, the last one
sometimes cut mid-word, as typing leaves it) goes as `prefix` to `POST /translate`, one request
at a time, through the served app in this process (FastAPI, the queue, the JSON; no network).
Prints p50 and p95 per search, the sentences' lengths, and the CPU.

    python scripts/benchmarks/bench_completion.py -c runs/default [--requests 200] [--beams 1 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from nmt.evaluation.report import TestSpec, load_test_set  # noqa: E402
from nmt.hardware import cpu_flags, cpu_name  # noqa: E402
from nmt.inference.translator import Translator  # noqa: E402
from nmt.model.checkpoint import load_model  # noqa: E402
from nmt.serving.server import ServeSettings, create_app, server_info  # noqa: E402


def typed_start(reference: str, rng: random.Random) -> str:
    words = reference.split()
    start = " ".join(words[: rng.randint(1, min(3, len(words)))])
    if rng.random() < 0.5 and len(start) > 2:  # mid-word, as typing leaves it half the time
        start = start[: rng.randint(max(1, len(start) - 3), len(start) - 1)]
    return start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", "--checkpoint", required=True)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    device = torch.device("cpu")
    loaded = load_model(args.checkpoint, device)
    translator = Translator.from_loaded(loaded, device)
    test, where, _ = load_test_set(TestSpec(), loaded)
    rng = random.Random(args.seed)
    picks = rng.sample(range(len(test.references.sources)), min(args.requests, len(test.references.sources)))
    requests = [(test.references.sources[i], typed_start(test.references.references[i][0], rng)) for i in picks]
    words = [len(src.split()) for src, _ in requests]
    flags = sorted(cpu_flags() & {"avx512_bf16", "amx_bf16", "avx512f", "avx2"})
    print(f"{cpu_name()} ({', '.join(flags)}), torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"{len(requests)} sources from the {where}: {statistics.mean(words):.1f} words on average, "
          f"at most {max(words)}")
    with TestClient(create_app(translator, ServeSettings(), server_info(loaded, "cpu"))) as client:
        for beam in args.beams:
            client.post("/translate", json={"text": requests[0][0], "beam": beam, "prefix": requests[0][1]})
            latencies, kept = [], 0
            for text, prefix in requests:
                start = time.perf_counter()
                response = client.post("/translate", json={"text": text, "beam": beam, "prefix": prefix})
                latencies.append(1000 * (time.perf_counter() - start))
                assert response.status_code == 200, response.text
                kept += response.json()["translations"][0]["tgt"].startswith(prefix)
            q = statistics.quantiles(latencies, n=20)
            print(f"beam {beam}: completion p50 {statistics.median(latencies):.1f} ms, p95 {q[18]:.1f} ms "
                  f"({len(latencies)} requests, one at a time); {kept} completions start with the typed text")


if __name__ == "__main__":
    main()
