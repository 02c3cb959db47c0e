"""Markup kept through translation: inline XML/HTML tags taken out of the source, the text
translated, and each tag put back around the output words aligned to the source words it wrapped.

A source such as `Click <b>Save</b> to keep <a href="x">your file</a>.<br/>` is read into its
plain text (`Click Save to keep your file.`), the words each paired tag wraps (by whitespace
words of the plain text: a tag inside a word takes the whole word) and the place of each
self-closing tag. The model translates the plain text; the alignment weights over its output (the
alignment head's where the run has one, `model.alignment_head`, else the attention's) map each
source word to the output word that gave it the most (`words.source_alignment`: tags around the
right words 90% of the time on fra-eng's test split with the head, 88% by attention, 22% by the
other direction, each output word to a source word; scripts/experiments/markup_placement.py),
and each paired tag wraps the span of its words' output words. Whatever the alignment says, the
output is well formed: every source tag comes back exactly once, with its attributes as written,
nested as in the source (a tag's span is kept inside its parent's, siblings do not overlap, a tag
whose words found no counterpart is placed, empty, where its first word's neighbours went).
Entities (`&amp;`, `&lt;`, `&#233;`) are read as the characters they stand for and the output's
`&`, `<` and `>` are written as entities again.

Bergamot's alignment-based transfer (bergamot-translator's html.cpp) works the same way.
"""

from __future__ import annotations

import copy
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from nmt.errors import NmtError

_TAG = re.compile(r"<(/?)([A-Za-z][\w:.-]*)((?:\s+[\w:.-]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'=<>`]+))?)*)\s*(/?)>")
_LOOKS_LIKE_A_TAG = re.compile(r"</?[A-Za-z][^<>]*>")


class MarkupError(NmtError):
    """A source that asked for markup but is not well-formed inline markup."""


@dataclass
class Tag:
    """One source tag: its text as written (`<a href="x">`, and its closing `</a>`), the source
    words it wraps ([first, last), by index; a self-closing tag: first == last, its place) and the
    tags inside it."""
    opening: str
    closing: str = ""  # "" for a self-closing tag
    first: int = 0
    last: int = 0
    children: list[Tag] = field(default_factory=list)


@dataclass
class Markup:
    """A source read into the plain text the model translates and its tags (a root whose children
    are the outermost tags)."""
    text: str
    root: Tag

    @property
    def has_tags(self) -> bool:
        return bool(self.root.children)

    def restore(self, words: Sequence[str], pairs: Sequence[tuple[int, int]]) -> str:
        """The output `words` with the source's tags put back, by `pairs` of (source word, output
        word) indices: always well formed, every tag exactly once."""
        aligned: dict[int, list[int]] = {}
        for source, output in pairs:
            aligned.setdefault(source, []).append(output)
        # a source word's punctuation ("file." is one word) aligns to the output's: its words are what a tag wraps
        content = {i for i, w in enumerate(words) if any(c.isalnum() for c in w)}
        aligned = {s: [o for o in outputs if o in content] or outputs for s, outputs in aligned.items()}
        root = copy.deepcopy(self.root)  # placed in output positions; the source's stay for another output
        _place(root, 0, len(words), aligned, len(words))
        return _written(root, [html.escape(w, quote=False) for w in words])


def parse(text: str) -> Markup:
    """`text` read as inline markup; a tag that does not close, closes what it did not open, or a
    '<' that starts no tag is one MarkupError naming it."""
    root, stack, plain, last = Tag(""), [], [], 0
    stack.append(root)
    for match in _TAG.finditer(text):
        between = text[last:match.start()]
        if "<" in between or ">" in between:
            raise MarkupError(f"'{_snippet(between)}' is not a tag: write '<' as &lt; and '>' as &gt; in markup")
        plain.append(html.unescape(between))
        last = match.end()
        at = _words_before("".join(plain))
        slash, name, _, self_closing = match.group(1), match.group(2), match.group(3), match.group(4)
        if self_closing:  # a place between words, and a word break (a <br/> between two words parts them)
            stack[-1].children.append(Tag(match.group(0), "", at.end, at.end))
            plain.append(" ")
        elif not slash:
            tag = Tag(match.group(0), f"</{name}>", at.start)
            stack[-1].children.append(tag)
            stack.append(tag)
        else:
            if len(stack) == 1 or stack[-1].closing != f"</{name}>":
                open_name = stack[-1].closing[2:-1] if len(stack) > 1 else None
                raise MarkupError(f"'{match.group(0)}' closes " + (f"<{open_name}>, which is still open" if open_name
                                                                     else "a tag that was never opened"))
            stack.pop().last = at.end
    rest = text[last:]
    if "<" in rest or ">" in rest:
        raise MarkupError(f"'{_snippet(rest)}' is not a tag: write '<' as &lt; and '>' as &gt; in markup")
    if len(stack) > 1:
        raise MarkupError(f"'{stack[-1].opening}' is never closed: close it with {stack[-1].closing}")
    plain.append(html.unescape(rest))
    return Markup(_spaced("".join(plain)), root)


def looks_like_markup(text: str) -> bool:
    """Whether `text` holds something that reads as a tag (the `auto` test before parsing)."""
    return bool(_LOOKS_LIKE_A_TAG.search(text))


def read(text: str, markup: bool | None, where: str) -> Markup | None:
    """`text` as markup: always (`markup` True: not well formed is one MarkupError naming `where`
    it is, e.g. "line 3"), where it reads as well-formed markup (None: anything else is translated
    as text), or never."""
    if markup is False or (markup is None and not looks_like_markup(text)):
        return None
    try:
        return parse(text)
    except MarkupError as e:
        if markup:
            raise MarkupError(f"{where}: {e}") from None
        return None


@dataclass(frozen=True)
class _Place:
    start: int  # the index of the first word at or after the place
    end: int  # the number of words that end at or before it


def _words_before(text: str) -> _Place:
    """Where a tag at the end of `text` sits among the plain text's words: an opening tag takes the
    word it touches or the next one (start), a closing tag the word it touches or the one before
    (end); a tag inside a word takes the whole word."""
    words = text.split()
    inside = bool(text) and not text[-1].isspace() and bool(words)
    return _Place(len(words) - 1 if inside else len(words), len(words))


def _spaced(text: str) -> str:
    return " ".join(text.split())


def _snippet(text: str) -> str:
    return text.strip()[:40]


def _place(tag: Tag, lo: int, hi: int, aligned: dict[int, list[int]], count: int) -> None:
    """Each child's output span, from its source words' aligned output words, kept within [lo, hi)
    and clear of the siblings before it (in output order)."""
    wanted = []
    for order, child in enumerate(tag.children):
        outputs = [o for s in range(child.first, child.last) for o in aligned.get(s, [])]
        if outputs:
            start, end = min(outputs), max(outputs) + 1
        else:  # an empty or unaligned tag: where the output word of its place (or the next aligned one) is
            later = [o for s in range(child.first, max(aligned, default=-1) + 1) for o in aligned.get(s, [])]
            start = end = min(later) if later else count
        wanted.append((min(max(start, lo), hi), min(max(end, lo), hi), order, child))
    cursor = lo
    for start, end, _, child in sorted(wanted, key=lambda w: (w[0], w[2])):
        start = max(start, cursor)
        end = max(end, start)
        child.first, child.last = start, end
        _place(child, start, end, aligned, count)
        cursor = end


def _written(tag: Tag, words: list[str]) -> str:
    """`words` with the tags of `tag`'s subtree around their spans: an opening tag touches the word
    after it, a closing tag the word before it."""
    parts: list[str] = []  # words and tags in order; joined with spaces except next to a tag's inner side

    def emit(node: Tag, lo: int, hi: int) -> None:
        cursor = lo
        for child in sorted(node.children, key=lambda c: (c.first, c.last)):
            parts.extend(words[cursor:child.first])
            parts.append(child.opening)
            if child.closing:
                emit(child, child.first, child.last)
                parts.append(child.closing)
            cursor = max(cursor, child.last)
        parts.extend(words[cursor:hi])

    emit(tag, 0, len(words))
    out = ""
    for i, part in enumerate(parts):
        out += part if i == 0 or _opens(parts[i - 1]) or _closes(part) else " " + part
    return out


def _opens(part: str) -> bool:
    return part.startswith("<") and not part.startswith("</") and not _self(part) and bool(_TAG.fullmatch(part))


def _closes(part: str) -> bool:
    return part.startswith("</") and bool(_TAG.fullmatch(part))


def _self(part: str) -> bool:
    match = _TAG.fullmatch(part)
    return bool(match and match.group(4))
