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
Nor is a name common across the corpus (`common_names`: in at least 5% of the answers and 3 of
them): that is an API's or the language's word (`extra_cuda_cflags`, `cudaGetLastError`,
`__restrict__`), fixed by what it names, not chosen by the answer.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d[\dA-Za-z_.]*")  # 32, 0.5f, 1e-3, 0x1F, 256u

COMMON_SHARE = 0.05  # a name in at least this share of the answers (and COMMON_MIN of them) is no choice
COMMON_MIN = 3


def common_names(completions: Iterable[str]) -> frozenset[str]:
    """The names that occur in at least COMMON_SHARE of `completions` and in COMMON_MIN of them."""
    counts: Counter[str] = Counter()
    n = 0
    for text in completions:
        counts.update(set(NAME.findall(text)))
        n += 1
    need = max(COMMON_MIN, math.ceil(COMMON_SHARE * n))
    return frozenset(name for name, k in counts.items() if k >= need)


# the kind of each character of an answer, as a code (its index here): what reading B may mask are the last two
KINDS = ("syntax", "name_reused", "name_common", "name_first_use", "number")
SYNTAX, NAME_REUSED, NAME_COMMON, NAME_FIRST_USE, NUMBER_LITERAL = range(len(KINDS))


def char_kinds(prompt: str, completion: str, common: frozenset[str] = frozenset()) -> bytearray:
    """The kind of each character of `completion` (a code of KINDS): a name already in the prompt or earlier in the
    answer, a `common` name, a name's first use, a number literal, or syntax (anything else)."""
    kinds = bytearray(len(completion))  # SYNTAX
    seen = set(NAME.findall(prompt))
    for match in NAME.finditer(completion):
        name = match.group()
        kind = NAME_REUSED if name in seen else NAME_COMMON if name in common else NAME_FIRST_USE
        kinds[match.start():match.end()] = bytes([kind]) * (match.end() - match.start())
        seen.add(name)
    for match in NUMBER.finditer(completion):
        kinds[match.start():match.end()] = bytes([NUMBER_LITERAL]) * (match.end() - match.start())
    return kinds


def free_tokens(prompt: str, completion: str, offsets: Sequence[tuple[int, int]],
                common: frozenset[str] = frozenset()) -> list[bool]:
    """Per completion token (its character `offsets` in `completion`): whether it overlaps a first-use name
    that is not `common`, or a number literal."""
    kinds = char_kinds(prompt, completion, common)
    return [max(kinds[max(start, 0):max(end, start)], default=SYNTAX) >= NAME_FIRST_USE for start, end in offsets]
