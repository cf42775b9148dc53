"""Candidates nested deeper than a recursive walk can go: every check answers, none raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.cuda.candidate_sources import candidate_sources, dotted_name
from kernelwright.cuda.static_checks import check_source
from kernelwright.cuda.torch_calls import cpp_sources
from kernelwright.verifier.verify import static_verdict

SOLUTION = (Path(__file__).parent.parent.parent / "kernelwright" / "seed" / "tasks" / "elementwise_elu"
            / "solution.py").read_text()
DEPTH = 1500  # parses (Python's own limit is a few thousand), and overflowed the recursive walks
SHAPES = {
    "operator chain": "x = " + "+".join(['"a"'] * DEPTH),
    "attribute chain": "x = a" + ".b" * DEPTH,
    "call chain": "x = f" + "()" * DEPTH,
    "subscript chain": "x = a" + "[0]" * DEPTH,
    "unary chain": "x = " + "-" * DEPTH + "1",
    "conditional chain": "x = " + "1 if y else " * DEPTH + "0",
    "nested calls": "x = " + "f(" * 190 + ")" * 190,  # within the tokenizer's 200 brackets
    "nested lambdas": "f = " + "lambda: " * DEPTH + "0",
}


@pytest.mark.parametrize("line", list(SHAPES.values()), ids=list(SHAPES))
def test_a_deep_but_valid_file_is_checked_like_any_other(line: str) -> None:
    source = f"{line}\n{SOLUTION}"
    assert check_source(source).reasons == check_source(SOLUTION).reasons
    found = candidate_sources(source)
    assert found.problem is None and len(found.builds) == 1
    assert cpp_sources(source)
    assert static_verdict(source) is None


def test_a_file_too_deep_for_python_is_a_syntax_error() -> None:
    source = "x = " + "+".join(["1"] * 20000) + "\n" + SOLUTION
    assert check_source(source).reasons == ["syntax_error"]
    assert (candidate_sources(source).problem or "").startswith("python_syntax")
    verdict = static_verdict(source)
    assert verdict is not None and verdict.reason == "syntax_error"


def test_dotted_names_keep_what_follows_a_call() -> None:
    import ast

    names = {e: dotted_name(ast.parse(e, mode="eval").body) for e in ("a.b.c", "f().load_inline", "x[0].y", "f()")}
    assert names == {"a.b.c": "a.b.c", "f().load_inline": ".load_inline", "x[0].y": ".y", "f()": ""}
