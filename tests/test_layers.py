"""The layering rule: a stage never imports another stage; shared layers import no stage; no import cycle.

Layers, bottom up:
- base: errors, atomic, digest, config, workdir, tracking, code_state, prompting, code_norm, pysource,
  jsontext, loop_limits;
- shared: cuda (CUDA source tools), models, base_model (the pretrained base), seed, verifier, generation,
  decontaminate, infill_format, checkpoints, model_card;
- stages: synthesis, curation, training, evaluation, serving, rl;
- orchestration: pipeline, cli (and later serve, retrain), which alone compose stages.

Every import is checked, the ones inside functions included, and `importlib.import_module` /
`python -m` strings naming a kernelwright module.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kernelwright"
BASE = {"__init__", "errors", "atomic", "digest", "config", "workdir", "store", "tracking", "code_state", "prompting",
        "code_norm", "pysource", "jsontext", "loop_limits"}
SHARED = {"cuda", "models", "seed", "verifier", "generation", "decontaminate", "base_model", "infill_format",
          "checkpoints", "model_card"}
STAGES = {"curation", "training", "evaluation", "serving", "synthesis", "rl"}
ORCHESTRATION = {"pipeline", "cli", "serve", "retrain", "mlflow_server", "job_config"}
RANK = {**dict.fromkeys(BASE, 0), **dict.fromkeys(SHARED, 1), **dict.fromkeys(STAGES, 2),
        **dict.fromkeys(ORCHESTRATION, 3)}
MODULE_STRING = re.compile(r"^kernelwright\.(\w+)")
DATA_DIRS = ("seed/tasks", "evaluation/suite")


def top_of(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if parts[0] == "kernelwright" and len(parts) > 1 else None


def imported_tops(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """(line, top-level kernelwright part) of every import in the tree, at any depth."""
    found: list[tuple[int, str]] = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                names = [".".join(base + ([node.module] if node.module else []))]
            elif node.module == "kernelwright":
                names = [f"kernelwright.{a.name}" for a in node.names]
            elif node.module:
                names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.match(node.value):
            names = [node.value]
        found += [(node.lineno, top) for n in names if (top := top_of(n))]
    return found


def violations(root: Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(DATA_DIRS):
            continue
        module = "kernelwright." + rel[:-3].replace("/", ".")
        own = top_of(module)
        assert own in RANK, f"{rel}: not in any layer; add it to tests/test_layers.py"
        for line, top in imported_tops(ast.parse(path.read_text(encoding="utf-8")), module):
            if top == own or top not in RANK:
                continue
            if RANK[top] > RANK[own] or (RANK[own] == 2 and RANK[top] == 2):
                out.append(f"{rel}:{line}: {own} imports {top}")
    return out


def test_no_stage_imports_another_stage_and_no_layer_imports_upwards() -> None:
    assert violations(PACKAGE) == []


def test_checker_sees_function_level_relative_and_string_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "kernelwright"
    (pkg / "curation").mkdir(parents=True)
    (pkg / "cuda").mkdir()
    (pkg / "curation" / "a.py").write_text("def f():\n    from kernelwright.evaluation import stage\n")
    (pkg / "curation" / "b.py").write_text("from ..training import stage\n")
    (pkg / "cuda" / "c.py").write_text("import importlib\nimportlib.import_module('kernelwright.curation.stage')\n")
    (pkg / "cuda" / "d.py").write_text("from kernelwright import pipeline\n")
    (pkg / "curation" / "ok.py").write_text("from kernelwright.cuda import spans\nfrom . import a\n")
    found = violations(pkg)
    assert found == ["cuda/c.py:2: cuda imports curation", "cuda/d.py:1: cuda imports pipeline",
                     "curation/a.py:2: curation imports evaluation", "curation/b.py:1: curation imports training"]


@pytest.mark.parametrize("layer", sorted(RANK))
def test_every_layer_named_exists(layer: str) -> None:
    if layer in {"serve", "retrain"}:
        pytest.skip(f"{layer} is reserved for the orchestration layer")
    assert (PACKAGE / layer).is_dir() or (PACKAGE / f"{layer}.py").is_file()


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package modules it imports (at any depth, TYPE_CHECKING imports included).
    `from pkg import sub` names the submodule `pkg.sub`, not `pkg`; a package's own `__init__` is
    not an edge of its submodules (Python runs it first anyway)."""
    mods: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root.parent).as_posix()
        if rel.startswith(tuple(f"kernelwright/{d}" for d in DATA_DIRS)):
            continue
        name = rel[:-3].replace("/", ".").removesuffix(".__init__")
        mods[name] = path
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                names = subs if len(subs) == len(node.names) else [base, *subs]
            for name in names:
                while name and name not in mods:
                    name = name.rpartition(".")[0]
                if name and name != module and not module.startswith(name + "."):
                    graph[module].add(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_among_the_package_modules() -> None:
    assert cycles(import_graph(PACKAGE)) == []


def test_a_cycle_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "kernelwright"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from kernelwright.sub import a\n")
    type_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kernelwright.sub.b import X\n"
    (pkg / "sub" / "a.py").write_text(type_only)
    (pkg / "sub" / "b.py").write_text("from kernelwright.sub.a import Y\n")
    assert cycles(import_graph(pkg)) == [["kernelwright.sub.a", "kernelwright.sub.b"]]
