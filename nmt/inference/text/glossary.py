"""A glossary: source terms whose translations must contain a given target term ("cold" -> "rhume").

A file holds one entry a line, the source term and the target term separated by a tab. A source
term matches whole words, ignoring case (`Cold`, `COLD`), with any run of spaces between its
words; where terms overlap, the longest match wins, and matches are read left to right without
overlapping. The target term is written exactly as listed: a term whose translation inflects
(froid, froide, froids) is the user's to list in the form the sentence needs. Search then writes
every matched term (`nmt.inference.text.terms`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from nmt.data.marks import END
from nmt.data.tokenizer import WORD_START, Tokenizer, continues_word, special_piece, spells
from nmt.data.vocab import Vocab
from nmt.errors import NmtError
from nmt.inference.text.terms import Pieces

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Glossary:
    entries: tuple[tuple[str, str], ...]  # (source term, target term)

    @classmethod
    def of(cls, given: Glossary | Mapping[str, str] | str | Path | None) -> Glossary | None:
        """A glossary from a Glossary, a {source: target} mapping or a file's path (None: none)."""
        if given is None or isinstance(given, Glossary):
            return given
        if isinstance(given, Mapping):
            return cls.parse(f"{s}\t{t}" for s, t in given.items())
        return cls.read(given)

    @classmethod
    def read(cls, path: str | Path) -> Glossary:
        path = Path(path)
        if not path.is_file():
            raise NmtError(f"glossary {path} not found: give a file of source term<TAB>target term lines")
        try:  # utf-8-sig: a spreadsheet's "UTF-8 TSV" begins with a byte-order mark, not part of its first term
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as e:
            raise NmtError(f"glossary {path} is not UTF-8 (byte {e.start}: {e.reason}); save it as UTF-8 text") from None
        return cls.parse(text.splitlines(), str(path))

    @classmethod
    def parse(cls, lines: Iterable[str], where: str = "glossary") -> Glossary:
        entries, seen = [], set()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            columns = line.split("\t")
            if len(columns) != 2:
                raise NmtError(f"{where} line {number}: {len(columns)} tab-separated columns; "
                               "write one source term<TAB>target term a line")
            source, target = (" ".join(c.split()) for c in columns)
            if not source or not target:
                raise NmtError(f"{where} line {number}: an empty {'source' if not source else 'target'} term")
            if source.casefold() in seen:
                raise NmtError(f"{where} line {number}: '{source}' is listed twice; keep one target for it")
            seen.add(source.casefold())
            entries.append((source, target))
        return cls(tuple(entries))

    def updated(self, other: Glossary | None) -> Glossary:
        """This glossary with `other`'s entries added, `other`'s target winning for a source in both."""
        if other is None:
            return self
        replaced = {s.casefold() for s, _ in other.entries}
        return Glossary(tuple(e for e in self.entries if e[0].casefold() not in replaced) + other.entries)

    def terms(self, text: str) -> list[str]:
        """The target terms of the entries whose source term occurs in `text`, in their order there
        (each once)."""
        return [target for _, target in self.matches(text)]

    def matches(self, text: str) -> list[tuple[str, str]]:
        """(the source term as `text` writes it, its target term) for each target term of `terms`,
        at its first match."""
        if not self.entries:
            return []
        found: dict[str, str] = {}
        for match in self._pattern.finditer(text):
            found.setdefault(self._targets[" ".join(match.group(1).split()).casefold()], match.group(1))
        return [(source, target) for target, source in found.items()]

    def use(self, sources: Sequence[str], outputs: Sequence[str]) -> tuple[int, int]:
        """How many terms the sources match, and how many of those their outputs hold as listed."""
        asked = used = 0
        for source, output in zip(sources, outputs):
            for term in self.terms(source):
                asked += 1
                used += holds(output, term)
        return asked, used

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        sources = sorted((s for s, _ in self.entries), key=len, reverse=True)  # the longest first
        return re.compile(_whole_words("|".join(map(_spaced, sources))), re.IGNORECASE)

    @cached_property
    def _targets(self) -> dict[str, str]:
        return {s.casefold(): t for s, t in self.entries}


def _spaced(term: str) -> str:
    """A regular expression of `term`'s words with any run of spaces between them."""
    return r"\s+".join(map(re.escape, term.split()))


def _whole_words(alternatives: str) -> str:
    """`alternatives` matched only as whole words, the match as group 1."""
    return rf"(?<!\w)({alternatives})(?!\w)"


def holds(text: str, term: str, ignore_case: bool = False) -> bool:
    """Whether `text` holds `term` as whole words (what a glossary's term use counts), by the rule
    source terms match by."""
    return re.search(_whole_words(_spaced(term)), text, re.IGNORECASE if ignore_case else 0) is not None


ELIDING_LANGUAGES = frozenset({"fr", "it", "ca"})  # "l'", "d'", "dell'" before a vowel, the next word glued on
VOWELS = "aeiouyàâäéèêëîïôöùûüœæ"
ELIDES = re.compile(f"[{VOWELS}h]", re.IGNORECASE)  # the first letters words elide before
# French elides before most h-words ("l'hôtel", "l'habitation") but not before an aspirated h ("le
# héros", "la hache"): the common ones, by the beginnings they share with no silent-h word
# ("hont" is honte but not honneur; "héros" alone, since héroïne elides).
ASPIRATED_H = ("hach", "hagard", "haie", "haill", "hain", "haï", "hâl", "halet", "hall", "halte", "hamac",
               "hamburger", "hameau", "hamster", "hanche", "handball", "handicap", "hangar", "hanneton", "hant",
               "happ", "harang", "harcel", "hardi", "hareng", "hargn", "haricot", "harnais", "harp", "hasard",
               "hâte", "hâtiv", "hauss", "haut", "havre", "hennir", "hériss", "hernie", "héron", "héros", "herse",
               "hêtre", "heurt", "hibou", "hideu", "hiérarch", "hiss", "hoch", "hockey", "hollan", "homard",
               "hongr", "hont", "hoquet", "horde", "hors", "hotte", "houblon", "houle", "houpp", "houss", "houx",
               "hublot", "hué", "huer", "huit", "hurl", "hutte")


def elides_before(word: str, lang: str = "fr") -> bool:
    """Whether the word before `word` elides in `lang` ("l'ami", "l'hôtel"; in French not "le héros")."""
    return bool(ELIDES.match(word)) and not (lang == "fr" and word.lower().startswith(ASPIRATED_H))


APOSTROPHE = re.compile(r".*['’]")  # a piece ending in one: a word written after it is glued to it
ELIDED_BY = "l'"  # what a term is written after to see it as the tokenizer writes it after an elision

CLOSER = re.compile(END)  # a piece that ends a sentence: ".", "!", "?!", "...", '."'
_SENTENCE_END = re.compile(END + r"(?=\s|$)")  # in a text: before a space or the end


def pieces_of(itos: Sequence[str], subword: bool) -> Pieces:
    """Which target tokens continue a word, which close a sentence and which end in an apostrophe.
    A subword piece continues the word before it unless it begins one or is punctuation; a word
    tokenizer's tokens are words. Tokens in angle brackets or ⦅⦆ (specials, bytes, number
    placeholders) are none of these."""
    glued, closers, elisions = set(), set(), set()
    for i, piece in enumerate(itos):
        if special_piece(piece):
            continue
        text = piece[len(WORD_START):] if piece.startswith(WORD_START) else piece
        if CLOSER.fullmatch(text):
            closers.add(i)
        elif subword and continues_word(piece):
            glued.add(i)
        if subword and APOSTROPHE.fullmatch(text):
            elisions.add(i)
    return Pieces(frozenset(glued), frozenset(closers), frozenset(elisions))


def elided_form(term: str, target_tokens: Callable[[list[str]], list[list[str]]], lang: str) -> list[str]:
    """`term`'s pieces as the target's tokenizer writes them glued to an elided word ("l'aéronef":
    ▁l ' a ér one f), in a language that elides before a vowel; [] where it would not be elided so."""
    if lang not in ELIDING_LANGUAGES or not elides_before(term, lang):
        return []
    pieces = target_tokens([ELIDED_BY + term])[0]
    after = next((i + 1 for i, piece in enumerate(pieces) if APOSTROPHE.fullmatch(piece.lstrip(WORD_START))), None)
    if after is None or after == len(pieces) or pieces[after].startswith(WORD_START):
        return []
    return pieces[after:]


def closes(text: str) -> int:
    """How many sentences of `text` close before its last one: the closers (".", "!", "?" before a
    space or the end) an output may write while a glossary term is still owed."""
    return max(0, len(_SENTENCE_END.findall(text.strip())) - 1)


def word_of_each(pieces: Sequence[str], subword: bool = True) -> np.ndarray:
    """Per piece, the index of its word. A piece starts a word at "▁", when it or the piece before
    spells no letter or digit (punctuation stands alone), or when it is a special (<eos>, <0x41>,
    ⦅N1⦆); a word tokenizer's tokens are words of their own."""
    word = np.zeros(len(pieces), dtype=np.int64)
    words, previous_spells = 0, False
    for i, piece in enumerate(pieces):
        if not (subword and words and previous_spells and continues_word(piece)):
            words += 1
        word[i] = words - 1
        previous_spells = spells(piece)
    return word


def term_spans(pieces: Sequence[str], sources: Sequence[str], subword: bool = True) -> list[tuple[int, int] | None]:
    """Where each source term is in a source of `pieces`: the first and last piece of the first
    words, not yet taken by an earlier term, that spell it (case and spaces aside); None for a
    term its words do not spell."""
    word = word_of_each(pieces, subword)
    spelled = [""] * (int(word[-1]) + 1 if len(pieces) else 0)
    starts, ends = [0] * len(spelled), [0] * len(spelled)  # each word's first and last piece
    for i, (piece, w) in enumerate(zip(pieces, word.tolist())):
        if not spelled[w]:
            starts[w] = i
        spelled[w] += piece.replace(WORD_START, "").casefold()
        ends[w] = i
    out: list[tuple[int, int] | None] = []
    used = set()
    for source in sources:
        wanted, found = "".join(source.split()).casefold(), None
        for first in range(len(spelled)):
            joined, last = "", first
            while last < len(spelled) and len(joined) < len(wanted):
                joined += spelled[last]
                last += 1
            if joined == wanted and ends[last - 1] not in used:
                used.add(ends[last - 1])
                found = (starts[first], ends[last - 1])
                break
        out.append(found)
    return out


BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")  # SentencePiece's byte fallback: one byte of a character it has no piece for


@dataclass(frozen=True)
class FoundTerm:
    """A glossary term found in a text: its source words as the text writes them, and the target
    term as ids, tokenized as the target is, as a word and glued after an elision (empty: never so)."""
    source: str
    ids: list[int]
    elided: list[int]


def glossary_terms(tokenizer: Tokenizer, vocab: Vocab, glossaries: Sequence[Glossary | None], texts: Sequence[str],
                   lines: Sequence[int]) -> list[list[FoundTerm]]:
    """Each text's glossary terms. A term with a piece the model cannot write is one warning,
    naming the line, and is not asked for."""
    out = []
    for line, text, terms_of in zip(lines, texts, glossaries):
        found = terms_of.matches(text) if terms_of is not None else []
        kept = []
        targets = [term for _, term in found]
        for (source, term), tokens in zip(found, tokenizer.target_tokens(targets) if found else []):
            ids = vocab.encode(tokens)
            if not ids or vocab.unk_id in ids or any(BYTE_PIECE.fullmatch(t) for t in tokens):
                # (byte pieces: characters the model never learned to write, forced byte by byte)
                logger.warning("line %d: glossary term '%s' holds a character the target vocabulary cannot write "
                               "as a piece; it is not enforced", line, term)
                continue
            elided = vocab.encode(elided_form(term, tokenizer.target_tokens, tokenizer.target_lang)
                                  if tokenizer.kind == "subword" else [])
            kept.append(FoundTerm(source, ids, [] if vocab.unk_id in elided else elided))
        out.append(kept)
    return out
