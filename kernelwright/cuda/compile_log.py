"""Compiler logs cut down to what a candidate may see: its own lines, messages, and locations.

g++ and NVRTC follow a diagnostic's location line (`file:12:5: error: ...`, `file(12): error:
...`) with an excerpt of the source at that location: a header's text when the location is in a
header. `filter_log` keeps every location line (file name, line number, message) and the
structural lines (`compilation terminated.`, error counts); the lines following a location are
kept only while that location is in one of the candidate's own sources (`own`: the names `#line`
gives them, and the generated translation units). Dropped: the excerpts of headers and their
continuation lines, and the include chains of headers (`In file included from ...`). Temporary
folders are cut out of paths, and the log is capped at `MAX_LINES` lines.
"""

from __future__ import annotations

import re
from collections.abc import Collection

MAX_LINES = 200
_GCC_LOC = re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+)(?::\d+)?: ")
_GCC_CONTEXT = re.compile(r"^(?P<file>[^\s:][^:]*?): (?:In |At |required from)")
_INCLUDED = re.compile(r"^(?:In file included from|\s+from) (?P<file>[^:]+?):\d+")
_EDG_LOC = re.compile(r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\): ")
_STRUCTURAL = re.compile(r"^(?:compilation terminated\.|\d+ errors? detected in the compilation of|"
                         r"[\w+.-]+: (?:fatal )?(?:error|warning|note): |$)")


def _location(line: str) -> str | None:
    """The file a diagnostic line is about, or None when it is not a location line."""
    for pattern in (_GCC_LOC, _EDG_LOC, _GCC_CONTEXT, _INCLUDED):
        m = pattern.match(line)
        if m:
            return m.group("file")
    return None


def filter_log(log: str, own: Collection[str], scrub: Collection[str] = ()) -> str:
    """`log` without any excerpt of a file outside `own` (module docstring); `scrub`: path
    prefixes (temporary folders) removed first."""
    for prefix in scrub:
        log = log.replace(prefix.rstrip("/") + "/", "")
    kept: list[str] = []
    mine = True  # lines before the first location (driver messages) are the compiler's own
    for line in log.splitlines():
        where = _location(line)
        if where is not None:
            mine = where in own
            if mine or not _INCLUDED.match(line):  # a header's include chain says nothing useful
                kept.append(line)
        elif mine or _STRUCTURAL.match(line):
            kept.append(line)
    if len(kept) > MAX_LINES:
        kept = kept[:MAX_LINES] + [f"... ({len(kept) - MAX_LINES} more lines)"]
    return "\n".join(kept).strip("\n")
