"""The race: nmt's default against OpenNMT-py 3.5.1 for the same wall-clock minutes on one CPU.

    python scripts/benchmarks/race.py --minutes 30 --seed 1 --out /tmp/race
    python scripts/benchmarks/race.py --nmt-run runs/default-s1 --out /tmp/race   # an nmt run already made

Both toolkits learn from the same md5 split of the same corpus in the same SentencePiece pieces
(those of the nmt run), one after the other on this CPU. nmt trains with its config (it stops itself
at `--minutes` of training; its preparation is counted in its wall clock); OpenNMT-py trains from the
pieces with the architecture closest to nmt's default (bidirectional 2+2 LSTM, 256 units, MLP
attention, input feeding, tied decoder embeddings, dropout 0.2, Adam at a constant 0.002, batches of
64 sentences, loss normalised by tokens, no validation) and is stopped when its wall clock (vocabulary
building included) reaches nmt's, its last checkpoint taken (it saves every 200 steps). Each decodes
the test split with beam 5; both are scored by nmt's multi-reference scorer (standard sacreBLEU and
chrF) with sacreBLEU's paired bootstrap against OpenNMT-py. One table at the end (`race.md` beside it).
`--also-test PREFIX` (any test set `nmt eval --test` reads, e.g. Multi30k's test_2017_flickr) has both
decode it too, scored the same, one row each, outputs as onmt-NAME.hyp and nmt-NAME.hyp.

OpenNMT-py pins torch < 2.3: it is installed into a venv of its own (`--venv`, default .venv-race)
over the project's torch, without its dependencies, plus those its training and translation import.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.config import Config, load_config  # noqa: E402
from nmt.training.recipe import fit_to_corpus  # noqa: E402
from nmt.data.corpus import load_splits, resolve_corpus  # noqa: E402
from nmt.data.prepared_corpus import TRAINING_WORDS, training_words  # noqa: E402
from nmt.data.tokenizer import SubwordTokenizer  # noqa: E402
from nmt.evaluation.metrics import References, group_references, reference_streams, sacrebleu_metrics, score  # noqa: E402
from nmt.evaluation.report import rare_word_sources  # noqa: E402
from nmt.evaluation.testsets import from_corpus  # noqa: E402
from nmt.hardware import cpu_name, noted_flags  # noqa: E402

ONMT = "OpenNMT-py==3.5.1"
# What onmt_train and onmt_translate import (its other dependencies serve its server and tools).
ONMT_IMPORTS = ["configargparse", "pyyaml", "sacrebleu", "six", "tensorboard", "pyonmttok>=1.37,<2",
                "spacy", "pyahocorasick", "rapidfuzz", "fasttext-wheel"]
SAVE_EVERY = 200


def ensure_onmt(venv: Path) -> Path:
    """The venv's bin directory, with OpenNMT-py over the project's torch build."""
    bin_dir = venv / "bin"
    if not (bin_dir / "onmt_train").exists():
        import torch

        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q"]
        subprocess.run(pip + [f"torch=={torch.__version__.split('+')[0]}"], check=True)  # first: never a CUDA build
        subprocess.run(pip + ["--no-deps", ONMT], check=True)
        subprocess.run(pip + ONMT_IMPORTS, check=True)
    return bin_dir


def group_rss_mb(pgid: int) -> int:
    """The resident memory of every process in a process group (a trainer and its data workers)."""
    ps = subprocess.run(["ps", "-o", "rss=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return sum(int(kb) for kb in ps.split()) // 1024


def timed(command: list[str], log: Path, deadline_s: float | None = None, env: dict | None = None) -> dict:
    """Run `command` in a process group of its own, its output to `log`, sampling the group's peak
    memory every second; with `deadline_s`, stop it (SIGTERM to the group) when its wall clock
    reaches that."""
    start, peak = time.monotonic(), 0
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        while proc.poll() is None:
            peak = max(peak, group_rss_mb(proc.pid))
            if deadline_s is not None and time.monotonic() - start >= deadline_s:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
                break
            time.sleep(1.0)
    return {"wall_s": time.monotonic() - start, "peak_mb": peak, "rc": proc.returncode}


def train_nmt(config: str, minutes: float, seed: int, out: Path, corpus: str) -> dict:
    run = out / "nmt"
    stats = timed([sys.executable, "-m", "nmt", "train", config, "--data", corpus, "--out", str(run),
                   "--max-minutes", str(minutes), "--set", f"train.seed={seed}"], out / "nmt-train.log")
    if stats["rc"] != 0:
        sys.exit(f"nmt train failed: see {out / 'nmt-train.log'}")
    return {**stats, "run": run}


def nmt_training(run: Path) -> dict:
    """Steps and seconds of an nmt run, from its metrics."""
    last = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()][-1]
    return {"steps": last["step"], "train_s": last["elapsed_s"]}


def write_pieces(path: Path, rows: list[list[str]]) -> None:
    path.write_text("".join(" ".join(r) + "\n" for r in rows), encoding="utf-8")


def prepare_onmt_data(run: Path, cfg: Config, tokenizer: SubwordTokenizer, corpus: Path, work: Path
                      ) -> tuple[References, list[bool]]:
    """The run's split in the run's pieces (`tokenizer`), as OpenNMT-py reads it; returns the test
    sources with their references and which of them are in the rare-word subset."""
    splits = load_splits(corpus, cfg.data.num_pairs, cfg.data)
    pairs = [p.raw for p in splits.train]
    src, tgt = tokenizer.source_tokens([s for s, _ in pairs]), tokenizer.target_tokens([t for _, t in pairs])
    keep = [i for i in range(len(pairs)) if len(src[i]) < cfg.data.max_len and len(tgt[i]) < cfg.data.max_len]
    write_pieces(work / "train.src", [src[i] for i in keep])
    write_pieces(work / "train.tgt", [tgt[i] for i in keep])
    refs = group_references(splits.test)
    write_pieces(work / "test.src", tokenizer.source_tokens(refs.sources))
    rare = rare_word_sources(refs.source_words, training_words(run / TRAINING_WORDS, cfg.data.min_freq))
    return refs, rare


ONMT_CONFIG = """\
save_data: {work}/onmt
src_vocab: {work}/vocab.src
tgt_vocab: {work}/vocab.tgt
src_vocab_size: 20000
tgt_vocab_size: 20000
overwrite: true
data:
  corpus_1:
    path_src: {work}/train.src
    path_tgt: {work}/train.tgt
save_model: {work}/model
save_checkpoint_steps: {save_every}
keep_checkpoint: 3
seed: {seed}
train_steps: 1000000
valid_steps: 1000000
report_every: 100
encoder_type: brnn
decoder_type: rnn
rnn_type: LSTM
enc_layers: 2
dec_layers: 2
hidden_size: 256
word_vec_size: 256
global_attention: mlp
input_feed: 1
share_decoder_embeddings: true
dropout: [0.2]
optim: adam
learning_rate: 0.002
batch_size: 64
batch_type: sents
normalization: tokens
"""


def train_onmt(bin_dir: Path, work: Path, seed: int, wall_s: float, threads: int) -> dict:
    """Build the vocabulary and train until the wall clock (both counted) reaches `wall_s`."""
    config = work / "onmt.yaml"
    config.write_text(ONMT_CONFIG.format(work=work, seed=seed, save_every=SAVE_EVERY))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    script = (f"{bin_dir}/onmt_build_vocab -config {config} -n_sample -1 && "
              f"exec {bin_dir}/onmt_train -config {config}")
    stats = timed(["bash", "-c", script], work / "train.log", deadline_s=wall_s, env=env)
    checkpoints = sorted(work.glob("model_step_*.pt"), key=lambda p: int(re.findall(r"\d+", p.stem)[-1]))
    if not checkpoints:
        sys.exit(f"OpenNMT-py saved no checkpoint: see {work / 'train.log'}")
    reports = re.findall(r"Step (\d+)/\s*\d+;.*?(\d+)/\s*(\d+) tok/s;\s+(\d+) sec", (work / "train.log").read_text())
    steps = int(re.findall(r"\d+", checkpoints[-1].stem)[-1])  # its last checkpoint's: what is scored
    reported = (int(reports[-1][0]), float(reports[-1][3])) if reports else (steps, stats["wall_s"])
    return {**stats, "checkpoint": checkpoints[-1], "steps": steps, "reported_steps": reported[0],
            "train_s": reported[1]}


def decode_onmt(bin_dir: Path, work: Path, checkpoint: Path, tokenizer: SubwordTokenizer, threads: int,
                name: str = "test") -> tuple[list[str], float]:
    """Beam 5 over work/NAME.src (pieces); the texts, also written as onmt-NAME.hyp beside nmt's."""
    # OpenNMT-py's checkpoints pickle its options; torch >= 2.6 loads only weights unless told.
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    start = time.monotonic()
    subprocess.run([f"{bin_dir}/onmt_translate", "-model", str(checkpoint), "-src", str(work / f"{name}.src"),
                    "-output", str(work / f"{name}.hyp"), "-beam_size", "5", "-batch_size", "64", "-gpu", "-1"],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.monotonic() - start
    lines = (work / f"{name}.hyp").read_text(encoding="utf-8").splitlines()
    texts = [tokenizer.target_text(line.split()) for line in lines]
    (work.parent / f"onmt-{name}.hyp").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    return texts, seconds


def decode_nmt(run: Path, corpus: str, out: Path, test: str | None = None, name: str = "test"
               ) -> tuple[list[str], float]:
    """Beam 5 over the run's test split, or over `test` (`nmt eval --test`), written as nmt-NAME.hyp."""
    hyps = out / f"nmt-{name}.hyp"
    given = ["--test", test] if test else ["--data", corpus]
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "nmt", "eval", "--bleu", "-c", str(run), *given, "--beam", "5",
                    "--out", str(hyps)], check=True, stdout=(out / f"nmt-eval-{name}.log").open("w"),
                   stderr=subprocess.STDOUT)
    return hyps.read_text(encoding="utf-8").splitlines(), time.monotonic() - start


def also_tested(prefix: str, cfg: Config, tokenizer: SubwordTokenizer, work: Path) -> tuple[str, References]:
    """A further test set (`--also-test`): its name, its sources in pieces in work/NAME.src for
    OpenNMT-py, and its references."""
    test = from_corpus(Path(prefix), cfg.data)
    name = Path(prefix).name
    write_pieces(work / f"{name}.src", tokenizer.source_tokens(test.references.sources))
    return name, test.references


def paired(hyps: dict[str, list[str]], refs: list[list[str]], lang: str) -> dict:
    """sacreBLEU's paired bootstrap (1,000 resamples) of each system against the first."""
    from sacrebleu.significance import PairedTest

    _, scores = PairedTest(list(hyps.items()), sacrebleu_metrics(lang), reference_streams(refs), test_type="bs",
                           n_samples=1000)()
    metrics = [m for m in scores if m != "System"]  # BLEU, then chrF under its signature's name
    return {name: {m: scores[m][i].p_value for m in metrics} for i, name in enumerate(hyps) if i}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="nmt's training budget (train.max_minutes)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--config", default=str(REPO / "configs/default.yaml"))
    parser.add_argument("--data", default=None, help="the corpus (default: where nmt finds it)")
    parser.add_argument("--nmt-run", type=Path, help="race this nmt run instead of training one")
    parser.add_argument("--onmt-wall-minutes", type=float,
                        help="OpenNMT-py's wall clock (default: nmt's wall clock in this race, or --minutes)")
    parser.add_argument("--onmt-from", type=Path,
                        help="score the OpenNMT-py run of an earlier race (its OUT) instead of training one")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--venv", type=Path, default=REPO / ".venv-race")
    parser.add_argument("--also-test", action="append", default=[], metavar="PREFIX",
                        help="a further test set both decode and the table scores (as nmt eval --test reads it)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = fit_to_corpus(load_config(Path(args.config)), args.data)
    corpus = str(resolve_corpus(args.data, cfg.data))
    threads = int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))
    bin_dir = ensure_onmt(args.venv)

    if args.nmt_run:
        nmt = {"run": args.nmt_run, "wall_s": None, "peak_mb": None}
    else:
        nmt = train_nmt(args.config, args.minutes, args.seed, args.out, corpus)
    nmt.update(nmt_training(nmt["run"]))
    onmt_wall = (args.onmt_wall_minutes * 60 if args.onmt_wall_minutes else nmt["wall_s"] or args.minutes * 60)

    work = args.out / "onmt"
    work.mkdir(exist_ok=True)
    run_cfg = load_config(nmt["run"] / "config.yaml")
    tokenizer = SubwordTokenizer.load(nmt["run"], run_cfg.data.src_lang, run_cfg.data.tgt_lang)
    lang = run_cfg.data.tgt_lang
    test, rare = prepare_onmt_data(nmt["run"], run_cfg, tokenizer, Path(corpus), work)
    sources, refs = test.sources, test.references
    if args.onmt_from:
        onmt = json.loads((args.onmt_from / "onmt" / "result.json").read_text())
        onmt["checkpoint"] = Path(onmt["checkpoint"])
    else:
        onmt = {**train_onmt(bin_dir, work, args.seed, onmt_wall, threads), "seed": args.seed}
        (work / "result.json").write_text(json.dumps({**onmt, "checkpoint": str(onmt["checkpoint"])}))
    onmt_hyps, onmt["decode_s"] = decode_onmt(bin_dir, work, onmt["checkpoint"], tokenizer, threads)
    nmt_hyps, nmt["decode_s"] = decode_nmt(nmt["run"], corpus, args.out)
    if len(nmt_hyps) != len(sources):
        sys.exit(f"nmt eval wrote {len(nmt_hyps)} hypotheses for {len(sources)} test sources")

    p = paired({"OpenNMT-py": onmt_hyps, "nmt": nmt_hyps}, refs, lang)["nmt"]
    further = []
    for prefix in args.also_test:
        name, also = also_tested(prefix, run_cfg, tokenizer, work)
        onmt_also, _ = decode_onmt(bin_dir, work, onmt["checkpoint"], tokenizer, threads, name)
        nmt_also, _ = decode_nmt(nmt["run"], corpus, args.out, prefix, name)
        further.append((name, also.references, onmt_also, nmt_also,
                        paired({"OpenNMT-py": onmt_also, "nmt": nmt_also}, also.references, lang)["nmt"]))
    flags = " ".join(noted_flags()) or "none"
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "all")
    lines = [f"CPU: {cpu_name()} ({flags}; ONEDNN_MAX_CPU_ISA={isa}), {threads} threads; seeds: OpenNMT-py "
             f"{onmt.get('seed', args.seed)}, nmt {run_cfg.train.seed}; "
             f"{len(sources):,} test sources, beam 5", "",
             "| toolkit | steps | wall min | train sent/s | peak RSS MB | decode s | BLEU | chrF | p (BLEU / chrF) | "
             f"rare-word subset ({sum(rare)}) BLEU |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, row, hyps in (("OpenNMT-py 3.5.1", onmt, onmt_hyps), (f"nmt ({nmt['run'].name})", nmt, nmt_hyps)):
        s = score(hyps, refs, target_lang=lang)
        rare_bleu = score([h for h, r in zip(hyps, rare) if r], [x for x, r in zip(refs, rare) if r],
                          target_lang=lang).bleu
        wall = f"{row['wall_s'] / 60:.1f}" if row["wall_s"] else "-"
        mem = row["peak_mb"] or "-"
        pv = "-" if row is onmt else " / ".join(f"{v:.4f}" for v in p.values())
        rate = row.get("reported_steps", row["steps"]) * 64 / row["train_s"]  # sentences a second of training
        lines.append(f"| {name} | {row['steps']:,} | {wall} | {rate:.0f} | {mem} | "
                     f"{row['decode_s']:.0f} | {s.bleu:.2f} | {s.chrf:.2f} | {pv} | {rare_bleu:.2f} |")
    if further:
        lines += ["", "| further test set | OpenNMT-py BLEU / chrF | nmt BLEU / chrF | p (BLEU / chrF) |",
                  "|---|---|---|---|"]
    for name, also_refs, onmt_also, nmt_also, p_also in further:
        theirs, ours = (score(h, also_refs, target_lang=lang) for h in (onmt_also, nmt_also))
        lines.append(f"| {name} ({len(also_refs):,}) | {theirs.bleu:.2f} / {theirs.chrf:.2f} | "
                     f"{ours.bleu:.2f} / {ours.chrf:.2f} | {' / '.join(f'{v:.4f}' for v in p_also.values())} |")
    lines.append(f"\nnmt run: {nmt['run']}; OpenNMT-py checkpoint: {onmt['checkpoint']}; {s.signature}")
    (args.out / "race.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
