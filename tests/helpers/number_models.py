"""A toy vocabulary with number placeholders and digit pieces, and real models biased toward some
of its tokens: what the search tests of the number rules and of sampling decode with."""

import torch

from nmt.data.protected_numbers import PLACEHOLDERS, SpanRule
from nmt.data.vocab import SPECIALS, Vocab
from nmt.inference.decoding.constraints import Rules
from nmt.inference.text.terms import sentence_rules
from nmt.inference.decoding.search import Specials
from nmt.model import build_model
from conftest import seed_model

DIGITS = [str(d) for d in range(10)] + ["▁1", "1er"]
VOCAB = Vocab(list(SPECIALS) + list(PLACEHOLDERS) + DIGITS + [f"w{i}" for i in range(8)])
IDS = {VOCAB.stoi[p]: i for i, p in enumerate(PLACEHOLDERS)}
DIGIT_IDS = frozenset(VOCAB.stoi[d] for d in DIGITS)
WORDS = [VOCAB.stoi[f"w{i}"] for i in range(8)]
BOS, EOS = VOCAB.bos_id, VOCAB.eos_id
TARGET_IDS = Specials(BOS, EOS)


def biased_model(**bias: float):
    """A real model whose output layer prefers some tokens: 'digits', 'eos' or 'placeholders'."""
    torch.manual_seed(0)
    model = build_model(seed_model(embed_size=8, hidden_size=16, num_layers=1), VOCAB, VOCAB).eval()
    with torch.no_grad():
        for name, value in bias.items():
            ids = {"digits": DIGIT_IDS, "eos": [EOS], "placeholders": IDS}[name]
            for token in ids:
                model.decoder.out.bias[token] += value
    return model


def strict(counts: list[int]) -> SpanRule:
    return SpanRule(IDS, counts, DIGIT_IDS, strict=True)


def rules_of(spans: SpanRule, prefixes: list[list[int]] | None = None) -> list[Rules]:
    """Each sentence's search rules under `spans` (and its prefix)."""
    return [sentence_rules(spans, i, prefixes[i] if prefixes else ()) for i in range(len(spans.counts))]


def sources(rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([[WORDS[i % 8], WORDS[(i + 3) % 8], EOS] for i in range(rows)])
    return src, torch.full((rows,), 3)


def placeholders_written(output: list[int]) -> list[int]:
    return sorted(IDS[t] for t in output if t in IDS)
