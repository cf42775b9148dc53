"""Hostile Python source: every way `ast.parse` fails is a SyntaxError; files decode as Python decodes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.pysource import compile_python, decode_python, parse_python, read_python

SEED = Path(__file__).parent.parent / "kernelwright" / "seed" / "tasks" / "elementwise_elu"

UNPARSABLE = {
    "lambdas nested past the parser's stack": "f = " + "lambda: " * 3000 + "0\n",  # MemoryError in ast.parse
    "an operator chain past the recursion limit": "x = " + "+".join(["1"] * 20000) + "\n",  # RecursionError
    "a null byte": "x = 1\x00\n",
    "a lone surrogate": "x = '\udcff'\n",
}


@pytest.mark.parametrize("source", list(UNPARSABLE.values()), ids=list(UNPARSABLE))
def test_whatever_keeps_python_from_parsing_is_a_syntax_error(source: str) -> None:
    with pytest.raises(SyntaxError):
        parse_python(source, "candidate.py")


@pytest.mark.parametrize("source", list(UNPARSABLE.values()), ids=list(UNPARSABLE))
def test_whatever_keeps_python_from_compiling_is_a_syntax_error(source: str) -> None:
    with pytest.raises(SyntaxError):
        compile_python(source, "candidate.py")
    compile_python("import torch\nx = " + "+".join(["1"] * 200) + "\n", "candidate.py")  # a long chain compiles


def test_a_parsable_file_gives_its_tree() -> None:
    assert [type(n).__name__ for n in parse_python("import torch\nx = 1\n").body] == ["Import", "Assign"]


def test_files_decode_as_python_decodes_them(tmp_path: Path) -> None:
    declared = tmp_path / "latin1.py"
    declared.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\nx = 1\n")
    assert "café" in read_python(declared)
    for data in (b"\x00\xff\xfe" * 10, b"# caf\xe9\nx = 1\n", b"# -*- coding: no-such-codec -*-\nx = 1\n"):
        with pytest.raises(SyntaxError):
            decode_python(data, "candidate.py")


@pytest.mark.parametrize("data, why", [
    (b"\x00\xff\xfe" * 1000, "invalid or missing encoding declaration"),
    (("f = " + "lambda: " * 3000 + "0\n").encode(), "nested too deeply"),
])
def test_verify_answers_a_hostile_candidate_with_a_usage_error(tmp_path: Path, capsys, data: bytes, why: str) -> None:
    candidate = tmp_path / "candidate.py"
    candidate.write_bytes(data)
    assert main(["verify", "--static", "--problem", str(SEED / "reference.py"), "--candidate", str(candidate)]) == 2
    err = capsys.readouterr().err
    assert "is not valid Python" in err and why in err and "Traceback" not in err


@pytest.mark.parametrize("data, why", [
    (b"\x00\xff\xfe" * 10, "invalid or missing encoding declaration"),
    (b"SHAPES = [" + b"-" * 1500 + b"1]\nclass Model: pass\ndef get_inputs(): pass\n"
     b"def get_init_inputs(): pass\n", None),
])
def test_a_hostile_problem_file_is_a_usage_error_or_loads(tmp_path: Path, data: bytes, why: str | None) -> None:
    """Problem files come from the user's suites: bytes that do not decode are a usage error naming the file;
    a literal nested past literal_eval leaves the problem without that setting."""
    from kernelwright.errors import UsageError
    from kernelwright.verifier.problems import load_problem

    path = tmp_path / "problem.py"
    path.write_bytes(data)
    if why is None:
        assert load_problem(path).shapes == [{}]
    else:
        with pytest.raises(UsageError, match=why):
            load_problem(path)
