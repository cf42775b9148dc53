"""JSON from outside the process, parsed so that no input raises anything but `ValueError`.

What kernelwright reads as JSON often comes from outside: a request body, a candidate runner's reply,
a teacher engine's answer, a JSONL row, a cache or record file another run (or a user) wrote. The
standard parser raises `json.JSONDecodeError` on text that is no JSON and `UnicodeDecodeError` on
bytes that are no UTF-8 (both `ValueError`s), but `RecursionError` on arrays or objects nested past
the interpreter's recursion limit (`[[[[...` a few thousand deep), which a reader catching
`ValueError` lets through: a crash of whatever process read it. `loads` turns that into a
`json.JSONDecodeError` too, so every reader catches one type.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def loads(text: str | bytes | bytearray) -> Any:
    """`json.loads`, raising `json.JSONDecodeError` (a `ValueError`) for JSON nested past the recursion limit."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError(f"nested more than ~{sys.getrecursionlimit()} levels deep", "", 0) from None


def number(value: Any) -> float | None:
    """`value` as a float where parsed JSON holds a number there; None for anything else, `true` and `false`
    included (Python counts a bool as an int)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
