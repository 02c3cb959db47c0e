"""Compare subword vocabularies on the corpus before training with one: how long SentencePiece
takes to learn each, how long the sequences get (the decoder's steps, so the training cost), how
many training pairs a length limit drops, and whether the test split round-trips and stays free
of <unk>. The word vocabulary is the reference row.

    python scripts/experiments/compare_tokenizers.py [--data PATH] [--sizes 4000 8000 16000] [--types unigram bpe] [--joint]
"""

from __future__ import annotations

import argparse
import statistics
import time
import unicodedata

from nmt.config import DataConfig
from nmt.data.batches import pair_tokens
from nmt.data.corpus import load_corpus
from nmt.data.tokenizer import SubwordTokenizer, WordTokenizer
from nmt.data.vocab import Vocab
from nmt.evaluation.metrics import group_references


def describe(name: str, tokenizer, splits, max_len: int, seconds: float, src_vocab: Vocab, tgt_vocab: Vocab) -> str:
    src, tgt = pair_tokens(splits.train, tokenizer)
    within = sum(len(s) + 1 <= max_len and len(t) + 1 <= max_len for s, t in zip(src, tgt))
    refs = group_references(splits.test)
    test_src = tokenizer.source_tokens(refs.sources)
    unk = sum(src_vocab.unk_id in src_vocab.encode(s) for s in test_src)
    targets = [r for group in refs.references for r in group]
    outputs = [tokenizer.target_text(t) for t in tokenizer.target_tokens(targets)]
    exact = sum(o == unicodedata.normalize("NFKC", r) for o, r in zip(outputs, targets)) / len(targets)
    return (f"| {name} | {len(src_vocab):,} / {len(tgt_vocab):,} | {seconds:.1f} | "
            f"{statistics.mean(map(len, src)):.2f} / {statistics.mean(map(len, tgt)):.2f} | "
            f"{max(map(len, src)) + 1} / {max(map(len, tgt)) + 1} | {100 * (1 - within / len(src)):.2f}% | "
            f"{100 * unk / len(test_src):.1f}% | {100 * exact:.1f}% |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4000, 8000, 16000])
    parser.add_argument("--types", nargs="+", default=["unigram", "bpe"])
    parser.add_argument("--max-len", type=int, default=24, help="the length limit whose drop rate is shown")
    parser.add_argument("--joint", action="store_true", help="also one model for both languages")
    args = parser.parse_args()
    _, splits = load_corpus(args.data, DataConfig())
    print(f"training split: {len(splits.train):,} pairs; test: {len(splits.test):,}")
    print("| tokenizer | vocab en / fr | learn s | mean tokens en / fr | longest en / fr | "
          f"pairs over {args.max_len} | test sources with <unk> | test refs round-trip |")
    print("|---|---|---|---|---|---|---|---|")
    start = time.perf_counter()
    words = Vocab.build((p.src for p in splits.train), 2), Vocab.build((p.tgt for p in splits.train), 2)
    print(describe("word (min_freq 2, lowercased)", WordTokenizer(), splits, args.max_len,
                   time.perf_counter() - start, *words))
    for joint in (False, True) if args.joint else (False,):
        for kind in args.types:
            for size in args.sizes:
                start = time.perf_counter()
                cfg = DataConfig(tokenizer="subword", vocab_size=size, subword_type=kind, joint_vocab=joint)
                tokenizer = SubwordTokenizer.train([p.raw[0] for p in splits.train], [p.raw[1] for p in splits.train],
                                                   cfg)
                seconds = time.perf_counter() - start
                print(describe(f"SentencePiece {kind} {size:,}{' joint' if joint else ''}", tokenizer, splits,
                               args.max_len, seconds, *tokenizer.vocabularies()), flush=True)


if __name__ == "__main__":
    main()
