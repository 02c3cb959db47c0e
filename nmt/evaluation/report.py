"""`nmt eval`: a checkpoint's loss, and its BLEU and chrF, on a split of its corpus or on any
test set (`nmt.evaluation.testsets`); with several checkpoints, whether their differences are real.

The data flows one way: config and checkpoint -> test set -> `validation.validate` (the routine
training validates with) -> the extras only evaluation reports: the rare-word subset, the
shares of outputs with <unk>, of numbers copied and of numbers invented, the hypotheses file, and sacreBLEU's paired
bootstrap resampling between models. Nothing here imports training.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from nmt.config import Config
from nmt.data.batches import encode_pairs
from nmt.data.corpus import recorded_corpus, resolve_corpus
from nmt.data.manifest import corpus_name
from nmt.data.prepare import ensure_prepared
from nmt.data.prepared_corpus import TRAINING_WORDS, PreparedCorpus, training_words
from nmt.data.vocab import UNK, Vocab
from nmt.errors import DataError, NmtError
from nmt.evaluation.metrics import group_references, reference_streams, sacrebleu_metrics, score
from nmt.evaluation.testsets import TestSet, from_corpus, from_files, from_sacrebleu
from nmt.evaluation.validation import search_name, validate
from nmt.inference.engines import engine_device
from nmt.inference.text.glossary import Glossary
from nmt.inference.translator import Options, Translator
from nmt.model.checkpoint import LoadedModel, load_models
from nmt.model.runs import BEST
from nmt.model.loss import validation_loss

_NUMBER = re.compile(r"\d+")
BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's default for paired bootstrap resampling


@dataclass(frozen=True)
class TestSpec:
    """What to score on: a split of the run's corpus (or of `data`), or a test set from files."""
    split: str = "test"
    data: str | None = None  # with a split: the corpus whose own split is scored
    test: str | None = None  # a corpus-form test set (TSV, zip, PREFIX.<lang>)
    src: str | None = None  # with refs: sacreBLEU's layout
    refs: list[str] = field(default_factory=list)
    testset: str | None = None  # sacreBLEU's registry
    langpair: str | None = None

    def __post_init__(self) -> None:
        given = [name for name, on in (("--test", self.test), ("--src", self.src), ("--testset", self.testset)) if on]
        if len(given) > 1:
            raise NmtError(f"{' and '.join(given)} each name a test set; give one")
        if self.refs and not self.src:
            raise NmtError("--ref goes with --src FILE (the sources the references translate)")
        if self.langpair and not self.testset:
            raise NmtError("--langpair goes with --testset NAME (sacreBLEU's test sets)")
        if given and self.data:
            raise NmtError(f"--data names the corpus whose own split is scored; with {given[0]}, leave it out")
        if self.split not in ("test", "valid"):
            raise NmtError(f"--split must be test or valid (got {self.split!r})")

    @property
    def from_files(self) -> bool:
        return bool(self.test or self.src or self.testset)


def rare_word_sources(source_words: list[list[str]], words: Vocab) -> list[bool]:
    """Which sources hold a word outside `words` (`training_words`)."""
    return [any(w not in words.stoi for w in src) for src in source_words]


def numbers_copied(source: str, output: str) -> bool:
    """Whether every run of digits in `source` comes out unchanged in `output` (as often as it occurs):
    3 -> 3, 1987 -> 1987, 10:30 -> 10 h 30; not 1987 -> 1978, nor 3 -> trois."""
    return not Counter(_NUMBER.findall(source)) - Counter(_NUMBER.findall(output))


def numbers_invented(source: str, output: str) -> bool:
    """Whether `output` prints a run of digits `source` does not hold (or more often than it does):
    3 -> 30, 7:45 -> 7h30; the source's numbers in another form (30,000 -> 30 000) are not invented."""
    return bool(Counter(_NUMBER.findall(output)) - Counter(_NUMBER.findall(source)))


def load_test_set(spec: TestSpec, loaded: LoadedModel) -> tuple[TestSet, str, Vocab | None]:
    """The test set, how the result line describes it, and the run's training words (None when
    they cannot be found: the rare-word subset is then left out)."""
    data = loaded.cfg.data
    if not spec.from_files:
        corpus = resolve_corpus(spec.data or recorded_corpus(loaded.state, data), data)
        prepared = PreparedCorpus(ensure_prepared(corpus, data), data)
        pairs = prepared.pairs(spec.split)
        if not pairs:
            raise DataError(f"the {spec.split} split of {corpus} is empty")
        own = trained_on(loaded, corpus, spec.data)
        name = spec.split if own else f"{spec.split}-split-of-{corpus_name(corpus)}"
        given = getattr(data, spec.split) if spec.data is None else None  # the run's data.valid / data.test
        where = f"{spec.split} split of {corpus}" + (f" (data.{spec.split} {given})" if given else "")
        if own and loaded.cfg.train.teacher:  # a distilled corpus: only its training split is the teacher's
            where += f", its own references (the training split holds {loaded.cfg.train.teacher}'s translations)"
        return TestSet(name, group_references(pairs), pairs), where, prepared.training_words(data.min_freq)
    if spec.test:
        test, where = from_corpus(Path(spec.test), data), f"test set {spec.test}"
    elif spec.src:
        test = from_files(Path(spec.src), [Path(r) for r in spec.refs])
        where = f"test set {spec.src} ({len(spec.refs)} reference file{'s' * (len(spec.refs) > 1)})"
    else:
        langpair = spec.langpair or f"{data.source_lang}-{data.target_lang}"
        test, where = from_sacrebleu(spec.testset, langpair), f"sacreBLEU test set {spec.testset} ({langpair})"
    return test, where, run_training_words(loaded)


def trained_on(loaded: LoadedModel, corpus: Path, data_path: str | None) -> bool:
    """Whether `corpus` is the one the run trained on (the fingerprint its checkpoints record; for
    older checkpoints, when no --data names another)."""
    recorded = loaded.state.get("corpus")
    return recorded["path"] == str(corpus.resolve()) if recorded else data_path is None


def run_training_words(loaded: LoadedModel) -> Vocab | None:
    """The run's training words: saved in its directory, or (runs from before that) those of its
    prepared corpus, when the corpus can be found."""
    data = loaded.cfg.data
    if (loaded.path.parent / TRAINING_WORDS).is_file():
        return training_words(loaded.path.parent / TRAINING_WORDS, data.min_freq)
    try:
        corpus = resolve_corpus(recorded_corpus(loaded.state, data), data)
        return PreparedCorpus(ensure_prepared(corpus, data), data).training_words(data.min_freq)
    except DataError:
        return None


def hypotheses_path(loaded: LoadedModel, test_name: str, beam: int, decoding: Decoding, loose: bool = False
                    ) -> Path:
    """Beside the checkpoint, named after the test set, the search, and (when they are not the
    defaults) the checkpoint, the engine, loose number rules and a glossary, so no evaluation
    overwrites another's."""
    checkpoint = "" if loaded.path.name == BEST else f"{loaded.path.stem}."
    if loaded.members:  # beside the first member, named for the whole ensemble
        checkpoint = f"ensemble-{hashlib.sha1(loaded.name.encode()).hexdigest()[:8]}."
    engine = decoding.engine
    suffix = ("" if engine == "torch" else f".{engine}") + (".loose-numbers" if loose else "") + (
        ".glossary" if decoding.glossary is not None else "")
    return loaded.path.parent / f"hyps.{checkpoint}{test_name}.{search_name(beam).replace(' ', '')}{suffix}.txt"


@dataclass
class Evaluated:
    lines: list[str]
    hyps: list[str]
    name: str  # how the comparison names the model


@dataclass(frozen=True)
class Decoding:
    """How a model is decoded for scoring: the beam (default: its decode.beam_size), the engine,
    the number rules (None: its decode.strict_numbers) and a glossary."""
    beam: int | None = None
    engine: str = "torch"
    strict_numbers: bool | None = None
    glossary: Glossary | None = None


def evaluate(checkpoints: list[str | None], spec: TestSpec, bleu: bool, device_name: str,
             decoding: Decoding = Decoding(), out: str | None = None) -> list[str]:
    """Score each checkpoint on the test set `spec` names; returns the result lines. With --bleu,
    the hypotheses are written (`out`, or beside each checkpoint), and with several checkpoints
    each is compared with the first by sacreBLEU's paired bootstrap resampling."""
    checkpoints = checkpoints or [None]
    if out is not None and len(checkpoints) > 1:
        raise NmtError("--out names one hypotheses file; with several checkpoints, leave it out "
                       "(each is written beside its checkpoint)")
    if len(checkpoints) > 1 and not bleu:
        raise NmtError("comparing checkpoints scores their translations: add --bleu")
    device = engine_device(decoding.engine, device_name)
    lines, results = [], []
    test = where = words = None
    for checkpoint in checkpoints:
        loaded = load_models(checkpoint, device)
        if test is None:
            test, where, words = load_test_set(spec, loaded)
            direction = (loaded.tokenizer.source_lang, loaded.tokenizer.target_lang)
        elif (loaded.tokenizer.source_lang, loaded.tokenizer.target_lang) != direction:
            raise NmtError(f"{loaded.name} translates {loaded.tokenizer.source_lang} -> "
                           f"{loaded.tokenizer.target_lang}, the first checkpoint {direction[0]} -> "
                           f"{direction[1]}: compare models of one direction")
        result = evaluate_one(loaded, device, test, where, words, bleu, decoding, out)
        lines += result.lines
        results.append(result)
        del loaded
    if len(results) > 1:
        lines += compare(results, test, loaded_target_lang=direction[1], words=words)
    return lines


def evaluate_one(loaded: LoadedModel, device: torch.device, test: TestSet, where: str, words: Vocab | None,
                 bleu: bool, decoding: Decoding = Decoding(), out: str | None = None) -> Evaluated:
    engine, glossary = decoding.engine, decoding.glossary
    translator = Translator.from_loaded(loaded, device, engine=engine, strict_numbers=decoding.strict_numbers)
    tokenizer = loaded.tokenizer
    loose = tokenizer.protector is not None and not translator.cfg.strict_numbers
    refs = test.references
    examples = encode_pairs(test.pairs, loaded.src_vocab, loaded.tgt_vocab, tokenizer=tokenizer)
    what = (f"ensemble of {len(loaded.members)} (mean log-probabilities) {loaded.name}"
            if loaded.members else f"checkpoint {loaded.path}")
    head = (f"{what} ({tokenizer.kind} tokenizer, {tokenizer.source_lang} -> "
            f"{tokenizer.target_lang}) | {where}: {len(refs.sources):,} sources, {len(test.pairs):,} pairs"
            + ("" if engine == "torch" else f" | decoded with --engine {engine}")
            + (" | loose number rules (--loose-numbers)" if loose else "")
            + (f" | glossary of {len(glossary.entries):,} terms" if glossary is not None else "") + lineage(loaded.cfg))
    unit = f"(per {tokenizer.kind} token)"
    if not bleu and loaded.members:
        return Evaluated([head, "loss: an ensemble has no one loss; add --bleu to score its translations"], [],
                         loaded.name)
    if not bleu:
        vocab = loaded.tgt_vocab
        loss = validation_loss(loaded.model, examples, loaded.cfg.decode.batch_size, vocab.pad_id, vocab.bos_id, device)
        return Evaluated([head, f"loss {loss:.3f} | ppl {math.exp(min(loss, 50)):.2f} {unit}"], [], str(loaded.path))
    beam_size = decoding.beam or loaded.cfg.decode.beam_size
    result = validate(translator, examples, refs, Options(beam=beam_size, glossary=glossary),
                      loss_model=None if loaded.members else loaded.model, meter=f"eval {test.name}")
    hyps = [t.text for t in result.translations]
    search = search_name(beam_size)
    hyp_path = Path(out) if out else hypotheses_path(loaded, test.name, beam_size, decoding, loose)
    try:
        hyp_path.write_text("\n".join(hyps) + "\n", encoding="utf-8")
    except OSError as e:
        raise NmtError(f"cannot write the hypotheses to {hyp_path}: {e.strerror}") from None
    loss = ("loss: an ensemble has no one loss" if loaded.members
            else f"loss {result.loss:.3f} | ppl {math.exp(min(result.loss, 50)):.2f} {unit}")
    lines = [head, loss,
             f"{search}: {result.standard.line()}",
             f"{search}, lowercased and tokenized (legacy): {result.legacy.line()}"]
    rare = rare_word_sources(refs.source_words, words) if words is not None else [False] * len(hyps)
    rare_refs = refs.subset(rare)
    if words is None:
        lines.append("rare-word subset: left out (the run's training words were not found: neither "
                     f"{TRAINING_WORDS} in its directory nor its training corpus)")
    elif rare_refs.sources:
        subset = score([h for h, keep in zip(hyps, rare) if keep], rare_refs.references,
                       target_lang=tokenizer.target_lang)
        lines.append(f"rare-word subset ({len(rare_refs.sources):,} sources with a word outside the "
                     f"{len(words):,}-word training vocabulary): BLEU {subset.bleu:.2f} | chrF {subset.chrf:.2f}")
    has_unk = [UNK in t.tokens for t in result.translations]
    subset_unk = sum(u for u, keep in zip(has_unk, rare) if keep)
    lines.append(f"outputs with <unk>: {sum(has_unk):,} of {len(hyps):,} ({100 * sum(has_unk) / len(hyps):.1f}%); "
                 f"rare-word subset: {subset_unk:,} of {len(rare_refs.sources):,}")
    with_digits = [(src, hyp) for src, hyp in zip(refs.sources, hyps) if _NUMBER.search(src)]
    if with_digits:
        copied = sum(numbers_copied(src, hyp) for src, hyp in with_digits)
        lines.append(f"numbers copied: {copied:,} of {len(with_digits):,} sources with digits "
                     f"({100 * copied / len(with_digits):.1f}%) keep every number unchanged")
    if glossary is not None:
        asked, used = glossary.use(refs.sources, hyps)
        lines.append(f"glossary terms used: {used:,} of {asked:,} matched in the sources "
                     f"({100 * used / max(asked, 1):.1f}%; the target term as listed)")
    invented = sum(numbers_invented(src, hyp) for src, hyp in zip(refs.sources, hyps))
    lines.append(f"numbers invented: {invented:,} of {len(hyps):,} outputs ({100 * invented / len(hyps):.1f}%) "
                 f"print a number their source does not hold")
    seconds = result.decode_seconds
    lines.append(f"decoded {len(refs.sources):,} sentences in {seconds:.1f} s ({len(refs.sources) / seconds:,.1f} "
                 f"sent/s); hypotheses written to {hyp_path}")
    return Evaluated(lines, hyps, loaded.name)


def compare(results: list[Evaluated], test: TestSet, loaded_target_lang: str, words: Vocab | None = None) -> list[str]:
    """sacreBLEU's paired bootstrap resampling (1,000 resamples, its seed: $SACREBLEU_SEED or
    12345) of each model against the first, in standard BLEU and chrF: on the whole test set and,
    given the training words, on its rare-word subset, where a small gap hides most easily."""
    refs = test.references
    lines = paired([(r.name, r.hyps) for r in results], refs.references, loaded_target_lang,
                   f"paired bootstrap resampling against {results[0].name}")
    rare = rare_word_sources(refs.source_words, words) if words is not None else []
    if any(rare):
        subset = [(r.name, [h for h, keep in zip(r.hyps, rare) if keep]) for r in results]
        lines += paired(subset, refs.subset(rare).references, loaded_target_lang,
                        f"on the rare-word subset ({sum(rare):,} sources), against {results[0].name}")
    return lines


def paired(systems: list[tuple[str, list[str]]], references: list[list[str]], target_lang: str,
           title: str) -> list[str]:
    """The result lines of one paired bootstrap test of each system against the first."""
    from sacrebleu.significance import PairedTest

    signatures, scores = PairedTest(systems, sacrebleu_metrics(target_lang), reference_streams(references),
                                    test_type="bs", n_samples=BOOTSTRAP_SAMPLES)()
    names = [m for m in scores if m != "System"]
    lines = [f"{title} ({BOOTSTRAP_SAMPLES:,} resamples; "
             f"mean and 95% confidence interval of each score; p: the chance of a difference at least this "
             f"large if the models were equally good)"]
    base = {m: scores[m][0] for m in names}
    lines.append("  " + systems[0][0] + ": " + " | ".join(
        f"{m} {base[m].score:.2f} ({base[m].mean:.2f} ± {base[m].ci:.2f})" for m in names))
    for i, (name, hyps) in enumerate(systems[1:], start=1):
        # sacreBLEU gives a system against itself its smallest p (1 / (resamples + 1)) on purpose;
        # for identical translations the honest answer is that there is no difference at all.
        same = hyps == systems[0][1]
        lines.append("  " + name + ": " + " | ".join(
            f"{m} {scores[m][i].score:.2f} ({scores[m][i].mean:.2f} ± {scores[m][i].ci:.2f}), "
            f"difference {scores[m][i].score - base[m].score:+.2f}, "
            + ("p = 1 (identical translations)" if same else f"p = {scores[m][i].p_value:.4f}")
            for m in names))
    lines.append("  signatures: " + " | ".join(str(signatures[m]) for m in names))
    return lines


def lineage(cfg: Config) -> str:
    """' | fine-tuned from PATH (sha256 abc123def456)' for a child run (`--init-from`), and the
    corpora it trained on with their weights and tags where it had several; '' otherwise."""
    line = ""
    if cfg.train.init_from:
        line += f" | fine-tuned from {cfg.train.init_from} (sha256 {(cfg.train.init_from_sha256 or '')[:12]})"
    if cfg.data.corpora or cfg.data.weight != 1:
        corpora = [f"{cfg.data.path or 'the first corpus'} x {cfg.data.weight:g}"]
        corpora += [f"{c.path} x {c.weight:g}" + (f" (tag {c.tag})" if c.tag else "") for c in cfg.data.corpus_specs()]
        line += " | trained on " + " + ".join(corpora)
    return line
