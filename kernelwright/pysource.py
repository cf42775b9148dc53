"""Parsing Python source that nobody vouches for: a candidate kernel, a model's answer, a problem file.

    from kernelwright.pysource import compile_python, parse_python, read_python
    tree = parse_python(source, "candidate.py")   # SyntaxError for anything Python could not run
    compile_python(source, "candidate.py")        # the same, and the compiler's limits too
    source = read_python(path)                     # the text as Python would decode it

`ast.parse` fails in more ways than `SyntaxError` on hostile text: nesting deeper than the
parser's stack (`MemoryError`) or the recursion limit (`RecursionError`), a lone surrogate
(`UnicodeEncodeError`), a null byte (`ValueError` on some versions). Python could not compile
or run such a file either, so `parse_python` raises each as a `SyntaxError` naming the cause,
which every caller already reports (`syntax_error`, or "not valid Python"). The walks over a
parsed tree are iterative where a candidate controls the depth (nested calls, attribute and
operator chains), so a tree that parses can also be checked.

A file is decoded as Python decodes it (`read_python`): UTF-8 unless a PEP 263 coding line says
otherwise; bytes that do not decode are a `SyntaxError` too.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path


def parse_python(source: str, filename: str = "<unknown>") -> ast.Module:
    """The module's tree; a `SyntaxError` for anything that keeps Python from compiling it."""
    try:
        return ast.parse(source, filename)
    except SyntaxError:
        raise
    except (RecursionError, MemoryError):
        raise SyntaxError("nested too deeply for Python's parser", (filename, None, None, None)) from None
    except (ValueError, UnicodeError) as exc:  # null bytes, lone surrogates
        raise SyntaxError(f"not Python source text ({type(exc).__name__}: {str(exc)[:120]})",
                          (filename, None, None, None)) from None


def compile_python(source: str, filename: str = "<unknown>") -> None:
    """Compile the source as Python would before running it; a `SyntaxError` for whatever stops that, the
    compiler's own recursion limit on a tree `parse_python` took included."""
    tree = parse_python(source, filename)
    try:
        compile(tree, filename, "exec")
    except (RecursionError, MemoryError):
        raise SyntaxError("nested too deeply for Python's compiler", (filename, None, None, None)) from None


def syntax_message(exc: SyntaxError) -> str:
    """`line N: what` of a SyntaxError, or `what` alone when it names no line."""
    return f"line {exc.lineno}: {exc.msg}" if exc.lineno else str(exc.msg)


def decode_python(data: bytes, filename: str = "<unknown>") -> str:
    """The text of a source file's bytes, decoded as Python decodes it (its coding line, else UTF-8)."""
    try:
        return importlib.util.decode_source(data)
    except SyntaxError:
        raise
    except (UnicodeError, LookupError) as exc:  # bytes that do not decode; an unknown coding name
        raise SyntaxError(f"not decodable as Python source ({type(exc).__name__}: {str(exc)[:120]})",
                          (filename, None, None, None)) from None


def read_python(path: Path) -> str:
    """`decode_python` of a file (OSError when it cannot be read)."""
    return decode_python(path.read_bytes(), str(path))
