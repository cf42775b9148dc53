"""Which completion tokens are free choices, the only ones reading B may mask (docs/cuset.md).

    .venv/bin/python -m pytest tests/curation/test_free_choices.py

Reading B masks uncertain boilerplate: "names, comments, stylistic choices where many answers are
right". Measured on curated answers, what a weak base is unsure of is mostly not that: syntax and
format (newlines, `=`, quotes, brackets, the answer's code fence) and the later uses of names, whose
spelling the first use fixed (the kernel launched under the name it was declared with, the
extension module under the name `load_inline` bound, an argument named as the reference names it).
A model that never learns those cannot write a file that parses. So a token is `free` only where
it overlaps a name written for the first time (not in the prompt, not earlier in the answer) or a
number literal (a block size, a constant); syntax, whitespace and a name's later uses are not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d[\dA-Za-z_.]*")  # 32, 0.5f, 1e-3, 0x1F, 256u


def free_tokens(prompt: str, completion: str, offsets: Sequence[tuple[int, int]]) -> list[bool]:
    """Per completion token (its character `offsets` in `completion`): whether it overlaps a first-use name
    or a number literal."""
    seen = set(NAME.findall(prompt))
    free_at = bytearray(len(completion))  # 1 on the characters of a free choice
    for match in NAME.finditer(completion):
        if match.group() not in seen:
            free_at[match.start():match.end()] = b"\x01" * (match.end() - match.start())
        seen.add(match.group())
    for match in NUMBER.finditer(completion):
        free_at[match.start():match.end()] = b"\x01" * (match.end() - match.start())
    return [any(free_at[max(start, 0):max(end, start)]) for start, end in offsets]
