"""Hostile Python source: every way `ast.parse` fails is a SyntaxError; files decode as Python decodes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.pysource import decode_python, parse_python, read_python

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
