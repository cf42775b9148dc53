"""Reading B's guard: only first-use names and numbers are free choices the mask may take."""

from __future__ import annotations

from kernelwright.curation.free_choices import common_names, free_tokens


def _pieces(text: str) -> list[tuple[int, int]]:
    """One 'token' per space-separated piece (offsets), the way a tokenizer's offsets mapping gives them."""
    out, at = [], 0
    for piece in text.split(" "):
        out.append((at, at + len(piece)))
        at += len(piece) + 1
    return out


def test_a_name_is_free_where_first_written_and_fixed_after() -> None:
    prompt = "def forward(self, x): return torch.relu(x)"
    completion = "_ext = load_inline(name) ; y = _ext.run(x) ; z = _ext2"
    flags = dict(zip(completion.split(" "), free_tokens(prompt, completion, _pieces(completion)), strict=True))
    assert flags["_ext"] is True  # first written here: a free choice
    assert flags["load_inline(name)"] is True and flags["y"] is True and flags["_ext2"] is True
    assert flags["=" ] is False and flags[";"] is False  # syntax
    assert flags["_ext.run(x)"] is True  # overlaps `run`, a first use, though `_ext` and `x` are fixed


def test_later_uses_and_syntax_are_fixed_numbers_free() -> None:
    prompt = "kw_scale"
    completion = "kw_scale = kw_scale * 256;"
    # "kw_", "scale", " = ", "kw_", "scale", " * ", "256", ";"
    offsets = [(0, 3), (3, 8), (8, 11), (11, 14), (14, 19), (19, 22), (22, 25), (25, 26)]
    assert free_tokens(prompt, completion, offsets) == [False, False, False, False, False, False, True, False]


def test_number_literals_but_not_digits_inside_names() -> None:
    completion = "blk32 = 0.5f + 1e-3 + 0x1F"
    flags = free_tokens("blk32", completion, _pieces(completion))
    assert flags == [False, False, True, False, True, False, True]  # blk32 fixed by the prompt; "1e-3": "1e" and "3"


def test_empty_and_zero_width_offsets() -> None:
    assert free_tokens("", "", []) == []
    assert free_tokens("", "a", [(0, 0), (0, 1)]) == [False, True]


def test_a_name_common_across_answers_is_no_choice() -> None:
    answers = [f"load_inline(name='k{i}', verbose=False)" for i in range(40)] + ["mine = 1"]
    common = common_names(answers)
    assert {"load_inline", "name", "verbose", "False"} <= common and "mine" not in common and "k0" not in common
    completion = "verbose = mine"
    assert free_tokens("", completion, [(0, 7), (8, 9), (10, 14)], common) == [False, False, True]
    assert common_names(["x = 1", "x = 2"]) == frozenset()  # fewer answers than COMMON_MIN hold it
