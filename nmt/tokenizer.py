"""The tokenizer: d2l's preprocessing, then whitespace splitting.

It is one named component so that a subword tokenizer can replace it later without touching the
data pipeline, the model or the search.
"""

from __future__ import annotations

import re

# d2l's `no_space` rule: a space goes before , . ! ? unless the previous character already is one.
_PUNCT_WITHOUT_SPACE = re.compile(r"(?<=[^ ])([,.!?])")


class WhitespaceTokenizer:
    name = "whitespace"

    @staticmethod
    def preprocess(text: str) -> str:
        text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
        return _PUNCT_WITHOUT_SPACE.sub(r" \1", text)

    def tokenize(self, text: str) -> list[str]:
        return self.preprocess(text).split()

    @staticmethod
    def detokenize(tokens: list[str]) -> str:
        return " ".join(tokens)


TOKENIZER = WhitespaceTokenizer()
