"""Text in, text out: the one path by which everything translates (`nmt.load`, `nmt translate`,
`nmt eval`, `nmt serve` and validation during training). Its texts take their road (`text.road`:
read into sentence records, written back after search); the translator decodes those records in
length-sorted batches on its engine and gives back text in the input's order.

    import nmt
    model = nmt.load("runs/my-run")                  # a run directory or a checkpoint file
    model.translate("Go.")                           # 'Va !' (the run's decode.beam_size: 5 by default)
    model.translate(["Go.", "I am cold."], beam=1)   # greedy search: ['Va !', "J'ai froid."]
    model.nbest("Go.", n=3)[0][0].score              # n-best lists of Translation, best first
    model.attention("I am cold.").weights            # (output pieces, source pieces)
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import torch

from nmt.config import DecodeConfig
from nmt.data.batches import pad
from nmt.data.prepared_corpus import TARGET_WORDS, TRAINING_WORDS, words_by_count
from nmt.data.tokenizer import Tokenizer, WordTokenizer
from nmt.data.vocab import Vocab
from nmt.inference.decoding.search import Hypothesis, Sources, Specials, forced
from nmt.inference.engines import engine_device, map_batches
from nmt.inference.ensemble import Ensemble
from nmt.inference.onnx_engine import OnnxSeq2Seq, load_engine
from nmt.inference.text.road import (Attention, CasedWords, FrequentWords, Options, Road, Sentence, Translation,
                                     attentions, best_of, one_per_text, scored, sentence_words)
from nmt.model import Seq2Seq
from nmt.model.checkpoint import LoadedModel, load_models

logger = logging.getLogger(__name__)


def frequent_words(run: Path) -> FrequentWords | None:
    """A run directory's most frequent words of each side, from its word counts; None where it has
    no target counts (a run trained before they were kept)."""
    if not (run / TRAINING_WORDS).is_file() or not (run / TARGET_WORDS).is_file():
        return None
    return FrequentWords.of(words_by_count(run / TRAINING_WORDS), words_by_count(run / TARGET_WORDS))


def alignments(translator: Translator, texts: Sequence[str], translations: Sequence[Translation],
               each_output_word: bool = False) -> list[list[tuple[int, int]]]:
    """Hard word alignments of translations of `texts` (their own tokens: from any search): each
    source word to an output word, or with `each_output_word` each output word to a source word."""
    return [attention.alignment(t, each_output_word, translator.frequent) if t.tokens else []
            for attention, t in zip(attentions(translator.road, texts, translations, translator.forced), translations)]


def by_length(sources: Sequence[Sequence], size: int) -> list[list[int]]:
    """The indices of the non-empty sources in batches of `size`, sorted by length: little padding."""
    order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: len(sources[i]))
    return [order[start: start + size] for start in range(0, len(order), size)]


class Translator:
    cased = CasedWords({})  # how the run's corpus writes words with capitals (`from_loaded` reads the run's)
    _road: Road | None = None

    def __init__(self, model: Seq2Seq | OnnxSeq2Seq | Ensemble, src_vocab: Vocab, tgt_vocab: Vocab, cfg: DecodeConfig,
                 device: torch.device, tokenizer: Tokenizer | None = None, frequent: FrequentWords | None = None):
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.frequent = frequent  # the words alignments step past (`words.past_frequent`); None: the run has no counts
        self.cfg, self.device = cfg, device
        self.tokenizer = tokenizer or WordTokenizer()
        self.specials = Specials(tgt_vocab.bos_id, tgt_vocab.eos_id,
                                 tgt_vocab.unk_id if self.tokenizer.ban_unk else None)

    @classmethod
    def load(cls, checkpoint: str | None = None, device: str | torch.device = "auto",
             batch_size: int | None = None, engine: str = "torch", strict_numbers: bool | None = None) -> Translator:
        """A checkpoint file or a run directory (its best.pt; by default the newest run's), on `device`,
        decoding `batch_size` sentences at a time with `engine` (torch, onnx, onnx-fp32: see nmt.load);
        `strict_numbers` False lets search drop numbers or write digits (default: decode.strict_numbers)."""
        device = engine_device(engine, device)
        return cls.from_loaded(load_models(checkpoint, device), device, batch_size, engine, strict_numbers)

    @classmethod
    def from_loaded(cls, loaded: LoadedModel, device: torch.device, batch_size: int | None = None,
                    engine: str = "torch", strict_numbers: bool | None = None) -> Translator:
        chosen = {"batch_size": batch_size, "strict_numbers": strict_numbers,
                  "max_sentence_words": loaded.cfg.decode.max_sentence_words or sentence_words(loaded.cfg.data.max_len)}
        cfg = dataclasses.replace(loaded.cfg.decode, **{key: v for key, v in chosen.items() if v is not None})
        models = [member.model.to(device).eval() if engine == "torch" else load_engine(member.path, engine)
                  for member in loaded.members or [loaded]]
        model = Ensemble(models, loaded.weights) if loaded.members else models[0]
        translator = cls(model, loaded.src_vocab, loaded.tgt_vocab, cfg, device, loaded.tokenizer,
                         frequent_words(loaded.path.parent))
        translator.cased = CasedWords.load(loaded.path.parent)
        return translator

    @property
    def road(self) -> Road:
        """The road this model's texts take (`text.road`); made anew where the decoding config was replaced."""
        if self._road is None or self._road.cfg is not self.cfg:
            self._road = Road(self.tokenizer, self.src_vocab, self.tgt_vocab, self.cfg, self.cased, self.frequent)
        return self._road

    def run(self, texts: Sequence[str], options: Options = Options()) -> list[list[Translation]]:
        """The one way in: up to `options.n` translations of each text, best first ([] for an empty
        text), in input order; beam search with a beam of at least n, or with `options.sample`, n
        drawn samples (best first by their score). A text of several sentences is translated a
        sentence at a time (one without a prefix: nmt.inference.text.sentences) and joined."""
        read = self.road.read(texts, options)
        records = self.road.records(read)
        return self.road.write(read, records, self._search(records, options), self.forced)

    def stream(self, lines: Iterable[str], options: Options = Options(), chunk_size: int | None = None
               ) -> Iterator[tuple[list[str], list[list[Translation]]]]:
        """`run` over an arbitrarily long stream, in chunks of `chunk_size` lines (default 16
        batches), in order, holding one chunk at a time: each chunk's texts and their n-best lists
        (a prefix or glossary given one a line is cut with its lines; warnings name the line in the
        whole stream)."""
        chunk_size = chunk_size or 16 * self.cfg.batch_size
        lines, done = iter(lines), 0
        while chunk := list(itertools.islice(lines, chunk_size)):
            per_line = {key: value[done: done + len(chunk)] for key in ("prefix", "glossary")
                        if isinstance(value := getattr(options, key), list)}
            yield chunk, self.run(chunk, dataclasses.replace(options, first_line=options.first_line + done,
                                                             **per_line))
            done += len(chunk)

    def translate(self, texts: str | Sequence[str], beam: int | None = None, tokenized: bool = False,
                  **options) -> str | list[str]:
        """A sentence (or a list of them) in, its best translation's text out; empty in, empty out.
        `beam` 1 is greedy search (default: the checkpoint's decode.beam_size); `tokenized` gives
        the legacy lowercased, tokenized form; `options`, any other of `Options`: each output starts
        with `prefix` (one for all, or one per text), tokenized as the target is; with `sample`, each
        output is drawn from the model's distribution instead (beam unused); with `glossary` (a
        Glossary, a {source term: target term} dict or a file), every output contains the target term
        of each source term its text holds (nmt.inference.text.glossary)."""
        single = isinstance(texts, str)
        out = [t.tokenized if tokenized else t.text
               for t in map(best_of, self.run([texts] if single else texts, Options(beam=beam, **options)))]
        return out[0] if single else out

    def translations(self, texts: Sequence[str], beam: int | None = None, **options) -> list[Translation]:
        """The best `Translation` of each text, in input order (an empty one for an empty text)."""
        return [best_of(hyps) for hyps in self.run(texts, Options(beam=beam, **options))]

    def nbest(self, texts: str | Sequence[str], n: int = 1, beam: int | None = None, **options
              ) -> list[list[Translation]]:
        """Up to `n` translations of each text, best first ([] for an empty text): `run`."""
        return self.run([texts] if isinstance(texts, str) else texts, Options(beam=beam, n=n, **options))

    def translate_stream(self, lines: Iterable[str], beam: int | None = None, chunk_size: int | None = None,
                         tokenized: bool = False, **options) -> Iterator[str]:
        """Translate an arbitrarily long stream in chunks, in order, holding one chunk at a time."""
        for _, results in self.stream(lines, Options(beam=beam, **options), chunk_size):
            yield from (best.tokenized if tokenized else best.text for best in map(best_of, results))

    def score(self, texts: str | Sequence[str], outputs: str | Sequence[str]) -> list[Translation]:
        """The model's scores of given translations `outputs` of `texts` (forced decoding; the scale
        search scores on): a Translation of each output, with its tokens' and words' scores."""
        single = isinstance(texts, str)
        return scored(self.road, [texts] if single else texts, [outputs] if single else outputs,  # type: ignore
                      self.forced)

    def attention(self, text: str, output: Translation | Sequence[str] | None = None,
                  beam: int | None = None) -> Attention:
        """The attention weights behind the translation of `text` (its search: `beam`, default
        decode.beam_size), or behind a given `output`: a Translation of it, or its tokens."""
        if output is None:
            output = self.translations([text], beam)[0]
        elif not isinstance(output, Translation):
            output = Translation("", "", math.nan, list(output))
        return attentions(self.road, [text], [output], self.forced)[0]

    def forced(self, src_ids: Sequence[list[int]], out_ids: Sequence[list[int]], scored: bool = True
               ) -> dict[int, tuple[list[float], torch.Tensor]]:
        """`search.forced` over many sentences (source ids, <eos> last), batched by source length: per
        non-empty source, its output's token scores (where `scored`) and attention weights."""
        batches = by_length(src_ids, self.cfg.batch_size)

        def decode(indices: list[int]) -> list[tuple[list[float], torch.Tensor]]:
            src = pad([src_ids[i] for i in indices], self.src_vocab.pad_id).to(self.device)
            lens = torch.tensor([len(src_ids[i]) for i in indices], device=self.device)
            return forced(self.model, src, lens, self.specials, [out_ids[i] for i in indices], scored)

        decoded = map_batches(self.model, decode, batches)
        return dict(zip(itertools.chain(*batches), itertools.chain(*decoded)))

    def _search(self, sentences: Sequence[Sentence], options: Options) -> list[list[Hypothesis]]:
        """Up to `options.n` scored hypotheses of each sentence, in input order ([] for an empty
        one), decoded in batches of similar length."""
        beam = max(options.beam or self.cfg.beam_size, options.n)
        results: list[list[Hypothesis]] = [[] for _ in sentences]
        batches = by_length([s.ids for s in sentences], self.cfg.batch_size)
        decoded = map_batches(self.model, lambda indices: self._decode([sentences[i] for i in indices], beam, options),
                              batches)
        for i, hyps in zip(itertools.chain(*batches), itertools.chain(*decoded)):
            results[i] = hyps
        return results

    def _decode(self, batch: Sequence[Sentence], beam: int, options: Options) -> list[list[Hypothesis]]:
        """One batch of records on this engine's device, decoded as the road says (`Road.decode`)."""
        sources = Sources(pad([s.ids for s in batch], self.src_vocab.pad_id).to(self.device),
                          torch.tensor([len(s.ids) for s in batch], device=self.device),
                          torch.tensor([s.cap for s in batch], device=self.device), [s.rules for s in batch])
        return self.road.decode(self.model, sources, self.specials, beam, options.n, options.sample)
