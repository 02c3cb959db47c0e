"""Reading a prepared corpus (`nmt.data.prepare`): its tokenizer and vocabularies, the training ids as
memory maps, the small splits as pairs, and the training words the rare-word subset is cut by."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import regex

from nmt.config import DataConfig
from nmt.data.corpus import Pair, source_hash, split_pair
from nmt.data.indexed import IndexedArray
from nmt.data.marks import END
from nmt.data.manifest import MANIFEST, read_manifest
from nmt.data.tokenizer import TOKENIZER, SubwordTokenizer, Tokenizer, WordTokenizer
from nmt.data.vocab import Vocab


class PreparedCorpus:
    def __init__(self, folder: Path, cfg: DataConfig):
        manifest = read_manifest(folder)
        if manifest is None:
            raise FileNotFoundError(folder / MANIFEST)
        self.folder, self.cfg, self.manifest = folder, cfg, manifest
        self.counts: dict[str, int] = manifest["counts"]

    def vocabularies(self) -> tuple[Tokenizer, Vocab, Vocab]:
        src_vocab, tgt_vocab = Vocab.load(self.folder / "src_vocab.txt"), Vocab.load(self.folder / "tgt_vocab.txt")
        if self.cfg.tokenizer == "word":
            return WordTokenizer(self.cfg.source_lang, self.cfg.target_lang), src_vocab, tgt_vocab
        return SubwordTokenizer.load(self.folder, self.cfg.source_lang, self.cfg.target_lang), src_vocab, tgt_vocab

    def ids(self, split: str, side: str) -> IndexedArray:
        """Token ids without <eos>, one sequence a pair of the split."""
        return IndexedArray(self.folder / f"{split}.{side}")

    def texts(self, split: str, side: str) -> IndexedArray:
        """The sentences as the corpus writes them (UTF-8 bytes)."""
        return IndexedArray(self.folder / f"{split}.{side}.txt")

    def pairs(self, split: str, at_most: int | None = None) -> list[Pair]:
        """A small split (valid, test) as pairs, in corpus order. With `at_most`, a larger split
        gives about that many: the pairs of every k-th source by the split's own hash, so all
        translations of a kept source stay together and the subset spreads over the split."""
        src, tgt = self.texts(split, "src"), self.texts(split, "tgt")
        every = max(1, round(len(src) / at_most)) if at_most else 1  # about: a bounded split of 5,050 stays whole
        # The stores hold the pair in the model's direction: read back as first, second = src, tgt.
        forward = DataConfig(src_lang=self.cfg.src_lang, tgt_lang=self.cfg.tgt_lang)
        pairs = []
        for i in range(len(src)):
            text = src.text(i)
            if every == 1 or source_hash(TOKENIZER.preprocess(text)) // 100 % every == 0:
                if found := split_pair(text, tgt.text(i), forward):
                    pairs.append(found[1])
        return pairs

    def training_words(self, min_freq: int) -> Vocab:
        return training_words(self.folder / TRAINING_WORDS, min_freq)


# In a prepared folder, and copied into each run directory: the training split's word counts (as the
# word tokenizer splits them), most frequent first, of the source and of the target
TRAINING_WORDS = "training_words.tsv"
TARGET_WORDS = "target_words.tsv"


def training_words(path: Path, min_freq: int) -> Vocab:
    """The source words seen at least `min_freq` times in the training split, as the word
    tokenizer keeps them. Words outside it are what eval calls rare."""
    return Vocab.from_counts(word_counts(path), min_freq)


def word_counts(path: Path) -> dict[str, int]:
    """A word-count file (TRAINING_WORDS, TARGET_WORDS) as {word: count}, most frequent first."""
    return dict(_counted(path))


def words_by_count(path: Path) -> Iterator[str]:
    """A word-count file's words, most frequent first, read only as far as they are wanted."""
    return (word for word, _ in _counted(path))


def _counted(path: Path) -> Iterator[tuple[str, int]]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            word, count = line.rstrip("\n").rsplit("\t", 1)
            yield word, int(count)


def write_word_counts(path: Path, counts: dict[str, int]) -> None:
    path.write_text("".join(f"{w}\t{c}\n" for w, c in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))),
                    encoding="utf-8")


# In a prepared folder and each run directory: the words the training sources write with a capital
# where no sentence starts, more often than not, in their usual form ("tom" Tom, "i" I, "usa" USA):
# how a source in capitals is read back into the case the model learned (nmt.inference.text.case)
CASED_WORDS = "cased_words.tsv"
# a word is a whitespace-separated token without the punctuation at its ends (the word tokenizer's
# unit: "Don't" is one word, "T-shirt" another)
WORD_ENDS = "\"'“”‘’«»()[]{}.,;:!?…¡¿"
SENTENCE_END = regex.compile(END + "$")
_CAPITAL_INSIDE = regex.compile(r"\s\S*\p{Lu}")


class CaseCounts:
    """Counted in the streaming pass over training sources, the first `sample` of them (their
    share of the word counts is taken as theirs): each word written with a capital where no
    sentence starts, and each sentence's first word (the rest comes from the word counts)."""

    def __init__(self, sample: int = 1_000_000) -> None:
        self.capitals: Counter = Counter()
        self.first: Counter = Counter()
        self.sample, self.seen, self.counted = sample, 0, 0

    def add(self, text: str) -> None:
        self.seen += 1
        if self.counted >= self.sample:  # (a corpus of millions: its first million tell the usual case)
            return
        self.counted += 1
        tokens = text.split()
        if not tokens:
            return
        if not _CAPITAL_INSIDE.search(text):  # (most sentences: no capital past their first word)
            self.first[tokens[0].strip(WORD_ENDS).lower()] += 1
            return
        starts = True
        for token in tokens:
            if word := token.strip(WORD_ENDS):
                if starts:
                    self.first[word.lower()] += 1
                elif not word.islower() and any(c.isupper() for c in word):
                    self.capitals[word] += 1
                starts = False
            starts = starts or bool(SENTENCE_END.search(token))

    def forms(self, words: Counter) -> dict[str, str]:
        """{lowercase word: its most frequent form with capitals} where such forms outnumber the
        word in small letters inside sentences (`words`: the lowercased word counts of the same sources)."""
        capitalized: Counter = Counter()
        for form, count in self.capitals.items():
            capitalized[form.lower()] += count
        share = self.counted / max(self.seen, 1)  # of the sources the word counts are over
        best: dict[str, tuple[int, str]] = {}
        for form, count in self.capitals.items():
            key = form.lower()
            small = share * words.get(key, 0) - self.first.get(key, 0) - capitalized[key]
            if count >= 2 and count > small and count > best.get(key, (0, ""))[0]:
                best[key] = (count, form)
        return {key: form for key, (_, form) in sorted(best.items())}


def write_cased_words(path: Path, forms: dict[str, str]) -> None:
    path.write_text("".join(f"{word}\t{form}\n" for word, form in forms.items()), encoding="utf-8")


def read_cased_words(path: Path) -> dict[str, str]:
    with open(path, encoding="utf-8") as f:
        return dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)
