"""Normalised code tokens: the text near-duplicate removal and decontamination compare.

    python -c "from kernelwright.code_norm import code_tokens; print(code_tokens(open('f.py').read()))"

Python is read with `tokenize`: comments, newlines and indentation are dropped; the contents of
string literals (where the CUDA source lives) are split into C-like tokens with their `//` and
`/* */` comments removed. Text that is not Python is split the same way as a whole. Identifiers,
numbers and punctuation survive; whitespace and comments do not.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence

_C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_PY_COMMENT = re.compile(r"^\s*#(?!\s*(include|define|undef|if|ifdef|ifndef|elif|else|endif|pragma)\b)[^\n]*",
                         re.MULTILINE)
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\S")
_SKIP = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                   tokenize.ENDMARKER})


def _text_tokens(text: str) -> list[str]:
    return _TOKEN.findall(_C_COMMENT.sub(" ", text))


def c_code_tokens(text: str) -> list[str]:
    """Tokens of C/C++/CUDA text (a header, a .cu file), split as CUDA string contents are, comments gone."""
    return _text_tokens(text)


def code_tokens(text: str) -> list[str]:
    """Tokens of a Python file (CUDA string contents included) with comments and whitespace gone."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return _text_tokens(_PY_COMMENT.sub(" ", text))
    out: list[str] = []
    for t in toks:
        if t.type in _SKIP:
            continue
        out.extend(_text_tokens(t.string) if t.type == tokenize.STRING else [t.string])
    return out


def shingles(tokens: Sequence[str], n: int) -> set[str]:
    """Distinct runs of `n` consecutive tokens (the whole text as one when it is shorter)."""
    if len(tokens) <= n:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}
