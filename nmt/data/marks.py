"""Where a sentence ends: the one rule every reader and writer of text asks (the splitter's
pre-check, a clause's closing piece, a kept span's tail, the glossary's closers, the corpus's
sentence starts), so that no two of them disagree on a mark.

A sentence ends with one or more of its closing marks (Latin, CJK), then any quotes or brackets
that close around them: `."`, `?!`, `…»`, `。`, `!)`.
"""

from __future__ import annotations

import re

ENDS = ".!?…。！？"  # the marks that close a sentence
CLOSING = "\"'”’»)]"  # what may close around them


def _any_of(characters: str) -> str:
    return "[" + "".join(re.escape(c) for c in characters) + "]"


END_MARK = _any_of(ENDS)  # one closing mark, as a regular expression
CLOSING_MARK = _any_of(CLOSING)  # one quote or bracket that closes around it
END_OR_CLOSING = _any_of(ENDS + CLOSING)
END = f"{END_MARK}+{CLOSING_MARK}*"  # a sentence's end
