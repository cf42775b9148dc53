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
otherwise; bytes that do not decode are a `SyntaxError` too, and so is a file larger than
`MAX_SOURCE_BYTES`, read no further (a 3 GB candidate took 6 GB of memory and 20 s of a judge's
process to be called invalid).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

MAX_SOURCE_BYTES = 16 << 20  # a candidate or problem file larger than this is not read


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


def read_source_bytes(path: Path) -> bytes:
    """A source file's bytes; a `SyntaxError` when it holds more than MAX_SOURCE_BYTES (OSError when it cannot
    be read)."""
    with open(path, "rb") as f:
        data = f.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise SyntaxError(f"larger than {MAX_SOURCE_BYTES >> 20} MiB, more than any kernel's source: not read",
                          (str(path), None, None, None))
    return data


def read_python(path: Path) -> str:
    """`decode_python` of a file (`read_source_bytes`: a SyntaxError past the size limit; OSError when it cannot
    be read)."""
    return decode_python(read_source_bytes(path), str(path))


def source_text(path: Path) -> str:
    """A source file's text for a scan that takes anything (undecodable bytes replaced); "" past the size
    limit, which `read_python` rejects with its reason."""
    try:
        return read_source_bytes(path).decode("utf-8", errors="replace")
    except SyntaxError:
        return ""
