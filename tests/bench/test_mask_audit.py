"""bench/mask_audit.py: the kind of every character of an answer (free_choices.char_kinds), and of a token across
kinds."""

from __future__ import annotations

from bench.mask_audit import token_kind
from kernelwright.curation.free_choices import KINDS
from kernelwright.curation.free_choices import char_kinds as char_codes


def char_kinds(prompt: str, completion: str, common: frozenset[str] = frozenset()) -> list[str]:
    return [KINDS[code] for code in char_codes(prompt, completion, common)]


def test_characters_by_kind() -> None:
    kinds = char_kinds("x", "y = x + 32;")
    assert kinds[0] == "name_first_use" and kinds[4] == "name_reused" and kinds[8] == "number"
    assert {kinds[i] for i in (1, 2, 3, 5, 6, 7, 10)} == {"syntax"}


def test_a_token_across_kinds_takes_the_first_kind_in_order() -> None:
    kinds = char_codes("x", "x(y)")
    assert token_kind(kinds, 0, 2) == "name_reused"  # "x(": a name and a bracket
    assert token_kind(kinds, 1, 3) == "name_first_use"
    assert token_kind(kinds, 3, 4) == "syntax"
