"""A lexical shortlist measured before it is built (docs/results.md, "Decisions"):

    python scripts/experiments/shortlist.py RUN [--first 100] [--best 100] [--split test] [--links TEACHER]

Marian's `--shortlist lex FIRST BEST` on nmt's own links: each batch's output layer restricted to
the FIRST most frequent target pieces, every piece that is not a word (digits, marks,
placeholders) and the BEST target pieces each source piece of the batch is most often linked to in
the run's prepared corpus (eflomal's links, `train.links`; a student's: `--links` its teacher, whose
vocabularies it has). The model and search are the run's,
torch, fp32 or the run's precision; only `candidates` is replaced (the prototype, not the product).
Prints sentences/s and BLEU of the whole output layer and the shortlist, greedy and beam 5, on the
same CPU in one run, with the paired bootstrap and the mean shortlist size.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import sacrebleu  # noqa: E402
from sacrebleu.significance import PairedTest  # noqa: E402

from nmt.data.corpus import resolve_corpus  # noqa: E402
from nmt.data.indexed import IndexedArray  # noqa: E402
from nmt.data.prepare import ensure_prepared  # noqa: E402
from nmt.evaluation.metrics import reference_streams  # noqa: E402
from nmt.evaluation.report import TestSpec, load_test_set  # noqa: E402
from nmt.hardware import cpu_name, noted_flags, resolve_device  # noqa: E402
from nmt.inference.translator import Translator  # noqa: E402
from nmt.model.checkpoint import load_models  # noqa: E402


def linked(folder: Path, vocab_size: int, best: int) -> tuple[dict[int, np.ndarray], np.ndarray]:
    """Per source piece its `best` most often linked target pieces, and each target piece's count."""
    src, tgt, links = (IndexedArray(folder / name) for name in ("train.src", "train.tgt", "train.links"))
    keys, targets = [], []
    for start in range(0, len(src), 50_000):
        stop = min(start + 50_000, len(src))
        for s, t, pair_links in zip(src.run(start, stop), tgt.run(start, stop), links.run(start, stop)):
            targets.append(t)
            keys.append(s[pair_links[0::2]].astype(np.int64) * vocab_size + t[pair_links[1::2]])
    pairs, counts = np.unique(np.concatenate(keys), return_counts=True)
    sources, linked_to = pairs // vocab_size, pairs % vocab_size
    order = np.lexsort((-counts, sources))  # by source piece, most often linked first
    sources, linked_to = sources[order], linked_to[order]
    starts = np.flatnonzero(np.r_[True, sources[1:] != sources[:-1]])
    ends = np.r_[starts[1:], len(sources)]
    table = {int(sources[a]): linked_to[a:min(b, a + best)] for a, b in zip(starts, ends)}
    return table, np.bincount(np.concatenate(targets).astype(np.int64), minlength=vocab_size)


class Shortlisted:
    """The model's `encode` / `candidates` with each batch's output layer cut to its shortlist."""

    def __init__(self, model, table: dict[int, np.ndarray], always: np.ndarray):
        self.model, self.table, self.always, self.sizes = model, table, always, []

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def encode(self, src: torch.Tensor, src_lens: torch.Tensor):
        chosen = [self.always] + [self.table.get(piece, self.always[:0]) for piece in src.unique().tolist()]
        self.ids = torch.from_numpy(np.unique(np.concatenate(chosen)))
        out = self.model.decoder.out
        self.weight, self.bias = out.weight[self.ids].contiguous(), out.bias[self.ids].contiguous()
        self.at = torch.full((out.out_features,), -1, dtype=torch.long)
        self.at[self.ids] = torch.arange(len(self.ids))
        self.sizes.append(len(self.ids))
        return self.model.encode(src, src_lens)

    def candidates(self, prev_ids, state, k, banned_id, eos_id, also=None):
        if k is None:  # every token in vocabulary order: the whole layer
            return self.model.candidates(prev_ids, state, k, banned_id, eos_id, also)
        decoder = self.model.decoder
        output, state, weights = decoder.step(decoder.embed(prev_ids), state)
        logits = F.linear(output, self.weight, self.bias).float()
        if banned_id is not None and self.at[banned_id] >= 0:
            logits[:, self.at[banned_id]] = float("-inf")
        log_probs = logits.log_softmax(-1)
        top, at = log_probs.topk(min(k, log_probs.shape[-1]) if isinstance(k, int) else k, dim=-1)
        ids = self.ids[at]
        if also is not None:  # the tokens the rules name: -inf where the shortlist lacks them
            named = self.at[also]
            scores = log_probs.gather(1, named.clamp(min=0)).masked_fill(named < 0, float("-inf"))
            top, ids = torch.cat((top, scores), 1), torch.cat((ids, also), 1)
        return top, ids, log_probs[:, self.at[eos_id]], state, weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run")
    parser.add_argument("--first", type=int, default=100)
    parser.add_argument("--best", type=int, default=100)
    parser.add_argument("--split", default="test")
    parser.add_argument("--links", help="the run whose prepared corpus gives the links (default: RUN)")
    args = parser.parse_args()
    device = resolve_device("cpu")
    loaded = load_models(args.run, device)
    test, where, _ = load_test_set(TestSpec(split=args.split), loaded)
    translator = Translator.from_loaded(loaded, device)
    whole = translator.model
    vocab_size = whole.decoder.out.out_features
    start = time.perf_counter()
    data = (load_models(args.links, device) if args.links else loaded).cfg.data
    table, frequency = linked(ensure_prepared(resolve_corpus(None, data), data), vocab_size, args.best)
    not_words = [i for i, piece in enumerate(translator.tgt_vocab.itos) if not piece.strip("▁").isalpha()]
    always = np.unique(np.r_[np.argsort(-frequency)[:args.first], not_words]).astype(np.int64)
    sources, references = test.references.sources, test.references.references
    print(f"{cpu_name()} ({', '.join(noted_flags())}), {torch.get_num_threads()} threads; {where}, "
          f"{len(sources):,} sources; table in {time.perf_counter() - start:.1f} s, {len(always)} pieces always")
    for beam in (1, 5):
        outputs = {}
        for name, model in (("whole layer", whole), ("shortlist", Shortlisted(whole, table, always))):
            translator.model = model
            translator.translate(sources[:64], beam)  # warm-up
            start = time.perf_counter()
            outputs[name] = translator.translate(sources, beam)
            rate = len(sources) / (time.perf_counter() - start)
            size = f", {np.mean(model.sizes[1:]):.0f} of {vocab_size:,} pieces a batch" if name == "shortlist" else ""
            print(f"beam {beam}, {name}: {rate:.1f} sentences/s{size}", flush=True)
        translator.model = whole
        scores = PairedTest(list(outputs.items()), {"BLEU": sacrebleu.BLEU()}, reference_streams(references),
                            test_type="bs", n_samples=1000)()[1]["BLEU"]
        same = sum(a == b for a, b in zip(*outputs.values()))
        print(f"beam {beam}: BLEU {scores[0].score:.2f} -> {scores[1].score:.2f} "
              f"({scores[1].score - scores[0].score:+.2f}, p = {scores[1].p_value:.3f}); "
              f"{same:,} of {len(sources):,} outputs the same", flush=True)


if __name__ == "__main__":
    main()
