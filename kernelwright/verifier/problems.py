"""Problems: KernelBench-style files read as they are (kernelwright's own suite uses the same format).

A problem file defines `Model`, `get_inputs()` and `get_init_inputs()` (KernelBench). The
suite's files add `CATEGORY`, `DTYPE`, `SHAPES` (keyword arguments of `get_inputs`, the first
being its defaults), and `flops(**shape)` / `bytes_moved(**shape)` for the roofline. Metadata is
read from the AST (literals only): nothing of a problem runs in the evaluator's own process.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.errors import UsageError
from kernelwright.pysource import parse_python, read_python, syntax_message

LEVEL_DIR = re.compile(r"^level\d+$")


@dataclass(frozen=True)
class Problem:
    id: str
    path: Path
    category: str
    dtype: str
    shapes: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    has_roofline: bool = False
    level: str | None = None


def _literal(tree: ast.Module, name: str) -> Any:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):  # not a plain literal
                return None
    return None


def _functions(tree: ast.Module) -> set[str]:
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}


def parse_problem_source(source: str, path: Path) -> ast.Module:
    try:
        tree = parse_python(source, str(path))
    except SyntaxError as exc:
        raise UsageError(f"problem {path} is not valid Python ({syntax_message(exc)})") from None
    missing = {"Model", "get_inputs", "get_init_inputs"} - _functions(tree)
    if missing:
        raise UsageError(f"problem {path} lacks {', '.join(sorted(missing))} (KernelBench format)")
    return tree


def load_problem(path: Path, level: str | None = None) -> Problem:
    if not path.is_file():
        raise UsageError(f"problem file not found: {path}")
    try:
        source = read_python(path)
    except SyntaxError as exc:
        raise UsageError(f"problem {path} is not valid Python ({exc.msg})") from None
    tree = parse_problem_source(source, path)
    shapes = _literal(tree, "SHAPES")
    if not (isinstance(shapes, list) and shapes and all(isinstance(s, dict) for s in shapes)):
        shapes = [{}]
    category = _literal(tree, "CATEGORY") or (level or "uncategorised")
    return Problem(
        id=f"{level}/{path.stem}" if level else path.stem,
        path=path,
        category=str(category),
        dtype=str(_literal(tree, "DTYPE") or "float32"),
        shapes=shapes,
        has_roofline={"flops", "bytes_moved"} <= _functions(tree),
        level=level,
    )


def load_problems(folder: Path) -> list[Problem]:
    """Every problem of a folder: `levelN/*.py` sub-folders, category sub-folders, or flat files."""
    if not folder.is_dir():
        raise UsageError(f"problem folder not found: {folder}")
    problems: list[Problem] = []
    for path in sorted(folder.rglob("*.py")):
        if path.name.startswith("_") or not path.is_file():  # a FIFO or device would never be read to its end
            continue
        parent = path.parent.name if path.parent != folder else None
        level = parent if parent and LEVEL_DIR.match(parent) else None
        problems.append(load_problem(path, level))
    if not problems:
        raise UsageError(f"no problem files (*.py) under {folder}")
    return problems
