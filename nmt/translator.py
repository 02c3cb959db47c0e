"""Text in, text out: tokenize, batch by length, decode, restore the input order."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence

import torch

from nmt.checkpoint import LoadedModel
from nmt.config import DecodeConfig
from nmt.data import pad
from nmt.model import Seq2Seq
from nmt.search import Hypothesis, beam_search, forced_attention, greedy, hypothesis
from nmt.tokenizer import Tokenizer, WordTokenizer
from nmt.vocab import EOS, Vocab

logger = logging.getLogger(__name__)


def output_caps(src_lens: torch.Tensor, cfg: DecodeConfig) -> torch.Tensor:
    """The most tokens to produce for each source length (<eos> not counted)."""
    return (src_lens.float() * cfg.max_output_ratio).long() + cfg.max_output_extra


class Translator:
    def __init__(self, model: Seq2Seq, src_vocab: Vocab, tgt_vocab: Vocab, cfg: DecodeConfig,
                 device: torch.device, tokenizer: Tokenizer | None = None):
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.cfg, self.device = cfg, device
        self.tokenizer = tokenizer or WordTokenizer()
        self.banned_id = tgt_vocab.unk_id if self.tokenizer.ban_unk else None

    @classmethod
    def from_loaded(cls, loaded: LoadedModel, device: torch.device) -> Translator:
        return cls(loaded.model.to(device).eval(), loaded.src_vocab, loaded.tgt_vocab, loaded.cfg.decode, device,
                   loaded.tokenizer)

    def encode_source(self, tokens: list[str], line_no: int | None = None) -> list[int]:
        limit = self.cfg.max_input_len
        if len(tokens) > limit:
            where = f"line {line_no}" if line_no is not None else "input"
            logger.warning("%s has %d tokens; truncated to decode.max_input_len=%d", where, len(tokens), limit)
            tokens = tokens[:limit]
        return self.src_vocab.encode(tokens) + [self.src_vocab.eos_id]

    def translate_nbest(self, sources: Sequence[list[str]], beam_size: int | None = None, nbest: int = 1,
                        first_line: int = 1, scored: bool = False) -> list[list[Hypothesis]]:
        """Token lists in; for each, up to `nbest` hypotheses (best first), in input order.

        beam_size 1 is greedy search, whose one hypothesis has NaN scores unless `scored`;
        empty inputs give []. `first_line` is the input line number of sources[0], for warnings.
        """
        beam_size = beam_size or self.cfg.beam_size
        results: list[list[Hypothesis]] = [[] for _ in sources]
        # Sorting by length keeps padding low; results go back to input order.
        order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: len(sources[i]))
        for start in range(0, len(order), self.cfg.batch_size):
            indices = order[start: start + self.cfg.batch_size]
            ids = [self.encode_source(sources[i], first_line + i) for i in indices]
            src = pad(ids, self.src_vocab.pad_id).to(self.device)
            src_lens = torch.tensor([len(x) for x in ids], device=self.device)
            max_lens = output_caps(src_lens, self.cfg)
            bos, eos = self.tgt_vocab.bos_id, self.tgt_vocab.eos_id
            if beam_size == 1 and nbest == 1:
                scores: list[float] | None = [] if scored else None
                outputs, _ = greedy(self.model, src, src_lens, bos, eos, max_lens, banned_id=self.banned_id,
                                    scores=scores)
                hyps = [[hypothesis(o, scores[j] if scores is not None else float("nan"), self.cfg.length_penalty)]
                        for j, o in enumerate(outputs)]
            else:
                hyps = beam_search(self.model, src, src_lens, bos, eos, max_lens, max(beam_size, nbest),
                                   self.cfg.length_penalty, nbest, self.banned_id)
            for i, h in zip(indices, hyps):
                results[i] = h
        return results

    def translate_tokens(self, sources: Sequence[list[str]], beam_size: int | None = None,
                         first_line: int = 1) -> list[list[str]]:
        """Token lists in, the best translation's tokens out, in input order."""
        return [self.tgt_vocab.decode(h[0].tokens) if h else []
                for h in self.translate_nbest(sources, beam_size, first_line=first_line)]

    def text(self, ids: Sequence[int], tokenized: bool = False) -> str:
        """Output ids as text: plain French, or (`tokenized`) the legacy lowercased, split form."""
        tokens = self.tgt_vocab.decode(ids)
        return self.tokenizer.legacy_text(tokens) if tokenized else self.tokenizer.target_text(tokens)

    def translate(self, lines: Sequence[str], beam_size: int | None = None, first_line: int = 1,
                  tokenized: bool = False) -> list[str]:
        """Plain text in (no pre-tokenization needed), text out, in input order; empty in, empty out."""
        hyps = self.translate_nbest(self.tokenizer.source_tokens(lines), beam_size, first_line=first_line)
        return [self.text(h[0].tokens, tokenized) if h else "" for h in hyps]

    def translate_stream(self, lines: Iterable[str], beam_size: int | None = None,
                         chunk_size: int | None = None, tokenized: bool = False) -> Iterator[str]:
        """Translate an arbitrarily long stream in chunks, in order, holding one chunk at a time."""
        chunk_size = chunk_size or 16 * self.cfg.batch_size
        chunk: list[str] = []
        first_line = 1  # of the current chunk, so warnings name the line in the whole input
        for line in lines:
            chunk.append(line)
            if len(chunk) == chunk_size:
                yield from self.translate(chunk, beam_size, first_line, tokenized)
                first_line += len(chunk)
                chunk = []
        if chunk:
            yield from self.translate(chunk, beam_size, first_line, tokenized)

    def attention_of(self, sentence: str, output: list[int]) -> tuple[list[str], list[str], torch.Tensor]:
        """The attention weights (output x source) behind a given output of `sentence` (the best of
        a beam search, say), with both token lists as the model sees them, <eos> included."""
        ids = self.encode_source(self.tokenizer.source_tokens([sentence])[0])
        src = torch.tensor([ids], device=self.device)
        weights = forced_attention(self.model, src, len(ids), self.tgt_vocab.bos_id, self.tgt_vocab.eos_id, output)
        return ([self.src_vocab.itos[i] for i in ids], [self.tgt_vocab.itos[i] for i in output] + [EOS], weights)

    def attention(self, sentence: str) -> tuple[list[str], list[str], torch.Tensor]:
        """Greedy translation of one sentence with its attention weights (output x source),
        both token lists ending in <eos> as the model sees them."""
        ids = self.encode_source(self.tokenizer.source_tokens([sentence])[0])
        src = torch.tensor([ids], device=self.device)
        src_lens = torch.tensor([len(ids)], device=self.device)
        outputs, weights = greedy(self.model, src, src_lens, self.tgt_vocab.bos_id, self.tgt_vocab.eos_id,
                                  output_caps(src_lens, self.cfg), return_attention=True,
                                  banned_id=self.banned_id)
        src_tokens = [self.src_vocab.itos[i] for i in ids]
        out_tokens = [self.tgt_vocab.itos[i] for i in outputs[0]]
        if weights[0].shape[0] > len(out_tokens):  # the <eos> step was attended too
            out_tokens.append(EOS)
        return src_tokens, out_tokens, weights[0]
