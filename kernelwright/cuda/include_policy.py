"""Which `#include`s a candidate may use: system, CUDA and torch headers, named by a plain name.

Checked on the candidate's own sources before anything compiles; any refusal fails the check
with a line `include_refused: <source>:<line>: <directive>: <reason>`. Allowed: `#include <x>` and
`#include "x"` (also `#include_next`, `#import`, `#embed`, `__has_include(...)`) whose name is
a relative path of plain characters, without `.`/`..` components, that names a file under one of
the allowed roots: the C++ compiler's system include dirs, the CUDA headers (NVRTC shims, the
nvidia-cuda-runtime wheel, the host CUDA headers and their shims) and torch's include paths
(with Python's, which torch/extension.h needs). Refused: absolute paths, `..`, any other
character, names found under no root, and every include whose target is made by macros
(`#include MACRO`, `#include P(/etc/passwd)`, `#include __FILE__`), `#pragma GCC dependency`, and
`#line` directives that name a file (compiler logs tell the candidate's lines by file name).

The scan is deliberately conservative: it splices backslash-newlines, knows the `%:` and `??=`
spellings of `#` and comments between `#` and the keyword, and looks at the whole text, comments
and string literals included, so a directive cannot hide from it behind lexing tricks (a raw
string that ends a "comment"); a directive-like text inside a comment is checked like any other.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_SPLICE = re.compile(r"\\[ \t\f\v]*\r?\n")
_GAP = r"(?:[ \t\f\v\r\n]|/\*.*?\*/)*"
_DIRECTIVE = re.compile(r"(?:#|%:|\?\?=)" + _GAP + r"(include_next|include|import|embed)\b" + _GAP, re.DOTALL)
_HAS_INCLUDE = re.compile(r"\b(__has_include_next|__has_include)\b" + _GAP + r"\(" + _GAP, re.DOTALL)
_DEPENDENCY = re.compile(r"\bGCC" + _GAP + r"dependency\b", re.DOTALL)
_LINE_FILE = re.compile(r"(?:#|%:|\?\?=)" + _GAP + r"(?:line\b|\d)[^\n]*?\"", re.DOTALL)  # also `# 12 "f"`
_NAME = re.compile(r"[A-Za-z0-9_+\-./]+")
_MAX_QUOTE = 120


@dataclass(frozen=True)
class Refusal:
    source: str  # the candidate source's name (`cuda_sources[0]`)
    line: int  # 1-based line in that source
    directive: str  # the directive as written (cut at _MAX_QUOTE characters)
    reason: str

    def log_line(self) -> str:
        return f"include_refused: {self.source}:{self.line}: {self.directive}: {self.reason}"


def _spliced(text: str) -> tuple[str, list[int]]:
    """`text` with backslash-newlines removed, and the offsets (in the result) where each was."""
    out: list[str] = []
    cuts: list[int] = []
    pos = length = 0
    for m in _SPLICE.finditer(text):
        out.append(text[pos:m.start()])
        length += m.start() - pos
        cuts.append(length)
        pos = m.end()
    out.append(text[pos:])
    return "".join(out), cuts


def _line_of(text: str, cuts: list[int], offset: int) -> int:
    return text.count("\n", 0, offset) + sum(1 for c in cuts if c <= offset) + 1


def _target(text: str, start: int) -> tuple[str | None, str, int]:
    """(name or None, opening delimiter or '', end offset) of the include target at `start`."""
    opener = text[start:start + 1]
    closer = {"<": ">", '"': '"'}.get(opener)
    if closer is None:
        return None, "", start
    end = text.find(closer, start + 1)
    newline = text.find("\n", start + 1)
    if end < 0 or (0 <= newline < end):
        return None, opener, start + 1
    return text[start + 1:end], opener, end + 1


def name_problem(name: str, roots: Sequence[str]) -> str | None:
    """Why an include name is refused (None: allowed)."""
    if name.startswith("/"):
        return "absolute path"
    parts = name.split("/")
    if ".." in parts:
        return "'..' in the path"
    if not name or not _NAME.fullmatch(name) or "." in parts or "" in parts:
        return "not a plain header name"
    if not any(os.path.isfile(os.path.join(root, name)) for root in roots):
        return "not a system, CUDA or torch header"
    return None


def _line_end(text: str, start: int) -> int:
    end = text.find("\n", start)
    return len(text) if end < 0 else end


def _quote(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= _MAX_QUOTE else one_line[:_MAX_QUOTE] + "..."


def _scan(source: str, text: str, cuts: list[int], roots: Sequence[str]) -> Iterable[Refusal]:
    for pattern in (_DIRECTIVE, _HAS_INCLUDE):
        for m in pattern.finditer(text):
            name, opener, end = _target(text, m.end())
            stop = end if name is not None else _line_end(text, m.end())
            quoted = _quote(text[m.start():stop])
            line = _line_of(text, cuts, m.start())
            if name is None:
                reason = "unterminated header name" if opener else "include target made by macros"
                yield Refusal(source, line, quoted, reason)
                continue
            problem = name_problem(name, roots)
            if problem:
                yield Refusal(source, line, quoted, problem)
    for m in _DEPENDENCY.finditer(text):
        yield Refusal(source, _line_of(text, cuts, m.start()), _quote(m.group(0)), "#pragma GCC dependency")
    for m in _LINE_FILE.finditer(text):  # a `#line` naming a file would make its text look like the candidate's
        directive = _quote(text[m.start():_line_end(text, m.start())])
        yield Refusal(source, _line_of(text, cuts, m.start()), directive, "#line with a file name")


def refused_includes(sources: Sequence[tuple[str, str]], roots: Sequence[str]) -> list[Refusal]:
    """Every refused include of the named sources ((name, text) pairs), in order of appearance."""
    found: list[Refusal] = []
    for source, raw in sources:
        text, cuts = _spliced(raw)
        found.extend(sorted(_scan(source, text, cuts, roots), key=lambda r: r.line))
    return found
