"""Text in, text out: tokenize, batch by length, decode, restore the input order."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import torch

from nmt.checkpoint import LoadedModel
from nmt.config import DecodeConfig
from nmt.data import pad
from nmt.model import Seq2Seq
from nmt.search import greedy
from nmt.tokenizer import TOKENIZER
from nmt.vocab import Vocab

logger = logging.getLogger(__name__)


class Translator:
    def __init__(self, model: Seq2Seq, src_vocab: Vocab, tgt_vocab: Vocab, cfg: DecodeConfig,
                 device: torch.device):
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.cfg, self.device = cfg, device

    @classmethod
    def from_loaded(cls, loaded: LoadedModel, device: torch.device) -> Translator:
        return cls(loaded.model.to(device).eval(), loaded.src_vocab, loaded.tgt_vocab, loaded.cfg.decode, device)

    def encode_source(self, tokens: list[str], line_no: int | None = None) -> list[int]:
        limit = self.cfg.max_input_len
        if len(tokens) > limit:
            where = f"line {line_no}" if line_no is not None else "input"
            logger.warning("%s has %d tokens; truncated to decode.max_input_len=%d", where, len(tokens), limit)
            tokens = tokens[:limit]
        return self.src_vocab.encode(tokens) + [self.src_vocab.eos_id]

    def translate_tokens(self, sources: Sequence[list[str]]) -> list[list[str]]:
        """Token lists in, token lists out, in input order; empty inputs give empty outputs."""
        results: list[list[str]] = [[] for _ in sources]
        for indices, hyps in self._decode_batches(sources):
            for i, ids in zip(indices, hyps):
                results[i] = self.tgt_vocab.decode(ids)
        return results

    def translate(self, lines: Sequence[str]) -> list[str]:
        return [TOKENIZER.detokenize(t) for t in self.translate_tokens([TOKENIZER.tokenize(x) for x in lines])]

    def _decode_batches(self, sources: Sequence[list[str]]) -> Iterator[tuple[list[int], list[list[int]]]]:
        # Sorting by length keeps padding low; the caller puts outputs back in input order.
        order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: len(sources[i]))
        for start in range(0, len(order), self.cfg.batch_size):
            indices = order[start: start + self.cfg.batch_size]
            ids = [self.encode_source(sources[i], i + 1) for i in indices]
            src = pad(ids, self.src_vocab.pad_id).to(self.device)
            src_lens = torch.tensor([len(x) for x in ids], device=self.device)
            max_lens = (src_lens.float() * self.cfg.max_output_ratio).long() + self.cfg.max_output_extra
            hyps, _ = greedy(self.model, src, src_lens, self.tgt_vocab.bos_id, self.tgt_vocab.eos_id, max_lens)
            yield indices, hyps
