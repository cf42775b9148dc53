"""Build fallbacks, found in a candidate's AST: a PyTorch path kept for when its own extension fails.

Two patterns, both reported as `fallback_try_except` by `static_checks.check_source`:

- a guarded build: a `try` whose body builds, with a handler that does not end by raising, or a
  `with contextlib.suppress(...)` block around a build. "Builds" means a build call (`load_inline`,
  cpp_extension's `load`, any `cpp_extension.*` call, cupy `RawKernel`/`RawModule`, pycuda
  `SourceModule`) or a call of anything in the file that builds when called: a function, a
  method, a lazy builder, the constructor of a class, or a property / cached property (read as an
  attribute), transitively. Wherever it is: module level, a helper, a class other than `ModelNew`
  (try/except inside `ModelNew` is flagged by `static_checks` itself).
- a missing build that selects PyTorch: an `if` (or conditional expression) that tests a build
  result for None or failure (`_ext is None`, `not _ext`, `hasattr(self, "has_ext")`,
  `getattr(_ext, "run", None)`), where the path taken when the build is missing computes (a
  PyTorch call, arithmetic, a returned value) instead of building or raising. Build results are
  the names bound to what builds (`_ext = load_inline(...)`, `self.ext = _get_ext()`, a call handed a
  builder to run: `fut = pool.submit(lambda: load_inline(...))`), what is read from them
  (`fn = getattr(_ext, "run", None)`, `fut.result()`, either arm of `a if c else b`), and the flags
  set beside a guarded build (`_HAS_EXT = False` in its handler).

A try around code that does not build (an optional import, a cache lookup) and a handler that
re-raises are not fallbacks.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from kernelwright.cuda.candidate_sources import dotted_name

PROPERTY_DECORATORS = frozenset({"property", "cached_property"})
TORCH_HEADS = ("torch.", "F.", "nn.functional.")
Scoped = tuple[ast.AST, str]  # a node and where it is ("module level", "function f", "class C", "C.f")


@dataclass(frozen=True)
class Fallback:
    line: int
    detail: str


def _callee(call: ast.Call) -> str:
    return dotted_name(call.func).rpartition(".")[2]


def _inner_scope(node: ast.AST, where: str, cls: str | None) -> tuple[str, str | None]:
    """(scope, enclosing class) of the nodes inside `node`, which is in scope `where`."""
    if isinstance(node, ast.ClassDef):
        return f"class {node.name}", node.name
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return (f"{cls}.{node.name}" if cls else f"function {node.name}"), None
    return where, cls


def _scoped(tree: ast.Module) -> Iterator[Scoped]:
    """Every node of the file, in source order (depth first), with the name of the scope it is in.
    Iterative: a candidate's expressions may nest deeper than a recursive walk may go."""
    stack: list[tuple[ast.AST, str, str | None]] = [
        (c, "module level", None) for c in reversed(list(ast.iter_child_nodes(tree)))]
    while stack:
        node, where, cls = stack.pop()
        yield node, where
        inner, inner_cls = _inner_scope(node, where, cls)
        stack.extend((c, inner, inner_cls) for c in reversed(list(ast.iter_child_nodes(node))))


class Builds:
    """What builds in one file: the build calls, and the names of its own callables that build."""

    def __init__(self, tree: ast.Module, build_calls: Sequence[ast.Call]) -> None:
        self.calls = {id(c) for c in build_calls}
        self.callables: set[str] = set()
        self.properties: set[str] = set()
        defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
        changed = True
        while changed:  # to a fixed point: a helper that calls a builder builds
            changed = False
            for d in defs:
                if d.name in self.callables or d.name.startswith("__") or not self._body_builds(d):
                    continue
                self.callables.add(d.name)
                if isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                        dotted_name(x).rpartition(".")[2] in PROPERTY_DECORATORS for x in d.decorator_list):
                    self.properties.add(d.name)
                changed = True

    def _body_builds(self, d: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
        if isinstance(d, ast.ClassDef):  # a class builds when its constructor does
            inits = [n for n in d.body if isinstance(n, ast.FunctionDef) and n.name in ("__init__", "__new__")]
            return any(self.builds(s) for n in inits for s in n.body)
        return any(self.builds(s) for s in d.body)

    def is_build(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Call):
            name = dotted_name(node.func)
            return id(node) in self.calls or _callee(node) in self.callables or ".cpp_extension." in f".{name}" \
                or any(isinstance(a, ast.Name | ast.Attribute) and dotted_name(a).rpartition(".")[2] in self.callables
                       for a in _arguments(node))  # a builder handed over by name: Thread(target=_build)
        return isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr in self.properties

    def builds(self, node: ast.AST) -> bool:
        """Whether running `node` builds (definitions nested in it are not run). Iterative: a candidate's
        expressions may nest deeper than Python's recursion limit allows a recursive walk."""
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                continue
            if self.is_build(n):
                return True
            if isinstance(n, ast.Call):  # a lambda handed to a call is run by it: pool.submit(lambda: ...)
                stack.extend(a.body for a in _arguments(n) if isinstance(a, ast.Lambda))
            stack.extend(ast.iter_child_nodes(n))
        return False


def _arguments(call: ast.Call) -> list[ast.expr]:
    return [*call.args, *(k.value for k in call.keywords)]


def reraises(handler: ast.ExceptHandler) -> bool:
    return bool(handler.body) and isinstance(handler.body[-1], ast.Raise)


def _assigned(nodes: Sequence[ast.stmt]) -> Iterator[tuple[str, ast.expr]]:
    for stmt in nodes:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Assign):
                yield from ((dotted_name(t), n.value) for t in n.targets if dotted_name(t))
            elif isinstance(n, ast.AnnAssign) and n.value is not None and dotted_name(n.target):
                yield dotted_name(n.target), n.value


@dataclass(frozen=True)
class Swallowing:
    """A statement that swallows a failure of its body: a try with handlers that do not re-raise (`lax`), or
    a `contextlib.suppress` block (no handlers)."""

    node: ast.Try | ast.TryStar | ast.With | ast.AsyncWith
    lax: list[ast.ExceptHandler]

    @property
    def body(self) -> list[ast.stmt]:
        return self.node.body

    def what(self) -> str:
        return f"try/except ({_caught(self.lax[0])})" if self.lax else "contextlib.suppress"


def swallowing(node: ast.AST) -> Swallowing | None:
    """What `node` swallows failures of, if it does (`Swallowing`); None for any other statement."""
    if isinstance(node, ast.Try | ast.TryStar):
        lax = [h for h in node.handlers if not reraises(h)]
        return Swallowing(node, lax) if lax else None
    if isinstance(node, ast.With | ast.AsyncWith) and suppresses(node):
        return Swallowing(node, [])
    return None


def _guarded(tree: ast.Module, builds: Builds) -> tuple[list[Fallback], set[str]]:
    """Guarded builds (a try in ModelNew is left to static_checks), and the names that the guarded bodies
    and handlers set (flags)."""
    found: list[Fallback] = []
    flags: set[str] = set()
    for node, where in _scoped(tree):
        guard = swallowing(node)
        if guard is None or not any(builds.builds(s) for s in guard.body):
            continue
        in_model_new = where == "class ModelNew" or where.startswith("ModelNew.")  # static_checks flags its tries
        if not guard.lax or not in_model_new:  # a suppress block anywhere, a try outside ModelNew
            line = guard.node.lineno
            found.append(Fallback(line, f"line {line}: {guard.what()} around a build at {where}: "
                                        "a failed build is swallowed"))
        flags |= {name for name, _ in _assigned([*guard.body, *[s for h in guard.lax for s in h.body]])}
    return found, flags


def _caught(handler: ast.ExceptHandler) -> str:
    return f"except {ast.unparse(handler.type)}" if handler.type is not None else "bare except"


def suppresses(node: ast.With | ast.AsyncWith) -> bool:
    """A `with` block that swallows exceptions: `contextlib.suppress(...)` among its context managers."""
    return any(isinstance(i.context_expr, ast.Call) and _callee(i.context_expr) == "suppress" for i in node.items)


def _results(tree: ast.Module, builds: Builds, flags: set[str]) -> set[str]:
    """Names that hold a build result: bound to what builds, read from such a name, or flags."""
    names = set(flags)
    pairs = list(_assigned(tree.body))
    changed = True
    while changed:
        changed = False
        for name, value in pairs:
            if name not in names and (builds.builds(value) or _reads_result(value, names)):
                names.add(name)
                changed = True
    return names


def _reads_result(value: ast.expr, names: set[str]) -> bool:
    """`value` reads a build result: an attribute of one, `getattr` of one, a method of one called
    (`future.result()`), or either arm of a conditional expression that does."""
    arms = [value]  # iterative: a candidate's conditional chains may nest past the recursion limit
    while arms:
        v = arms.pop()
        if isinstance(v, ast.IfExp):
            arms += [v.body, v.orelse]
        elif isinstance(v, ast.Attribute):
            if dotted_name(v.value) in names:
                return True
        elif isinstance(v, ast.Call):
            if _callee(v) == "getattr":
                if v.args and dotted_name(v.args[0]) in names:
                    return True
            elif isinstance(v.func, ast.Attribute) and dotted_name(v.func.value) in names:
                return True
    return False


def _attr_name(node: ast.expr) -> str:
    """The attribute a `getattr`/`hasattr` names ("" unless a string literal)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def _is_result(expr: ast.expr, names: set[str]) -> bool:
    """`expr` reads a build result: a name of one, or `getattr` of one (`getattr(self, "ext", None)`)."""
    if dotted_name(expr) in names:
        return True
    if isinstance(expr, ast.Call) and _callee(expr) == "getattr" and len(expr.args) >= 2:
        first = dotted_name(expr.args[0])
        return first in names or f"{first}.{_attr_name(expr.args[1])}" in names
    return False


def _missing_makes(test: ast.expr, names: set[str]) -> bool | None:
    """The truth of `test` when the build is missing (None: it does not test a build result)."""
    if _is_result(test, names):
        return False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _missing_makes(test.operand, names)
        return None if inner is None else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        sides = [test.left, test.comparators[0]]
        if any(_is_result(s, names) for s in sides) and any(_is_none(s) for s in sides):
            return isinstance(test.ops[0], ast.Is | ast.Eq)
        return None
    if isinstance(test, ast.Call) and test.args:
        name, first = _callee(test), test.args[0]
        if name == "hasattr" and len(test.args) == 2:
            attr = f"{dotted_name(first)}.{_attr_name(test.args[1])}"
            return False if attr in names or dotted_name(first) in names else None
        return _missing_makes(first, names) if name in ("callable", "bool") else None
    if isinstance(test, ast.BoolOp):
        parts = [_missing_makes(v, names) for v in test.values]
        order = (False, True) if isinstance(test.op, ast.And) else (True, False)
        return next((p for p in order if p in parts), None)
    return None


def _ends(body: Sequence[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Return | ast.Raise | ast.Continue | ast.Break)


class _Paths:
    """The statements or expression run when the build is missing, and whether they compute."""

    def __init__(self, builds: Builds, is_compute: Callable[[ast.Call], bool]) -> None:
        self.builds, self.is_compute = builds, is_compute

    def computes(self, nodes: Sequence[ast.AST]) -> bool:
        if any(self.builds.builds(n) for n in nodes):
            return False  # a lazy build: the missing build is made
        walked = [x for n in nodes for x in ast.walk(n)]
        if any(isinstance(x, ast.Raise) for x in walked):
            return False
        return any(isinstance(x, ast.BinOp) or (isinstance(x, ast.Call) and self.is_compute(x)) or
                   (isinstance(x, ast.Return) and x.value is not None and not _is_none(x.value)) or
                   (isinstance(x, ast.Attribute) and f"{dotted_name(x)}.".startswith(TORCH_HEADS)
                    and isinstance(x.ctx, ast.Load) and isinstance(n, ast.expr))
                   for n in nodes for x in ast.walk(n))


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _selections(tree: ast.Module, names: set[str], paths: _Paths) -> list[Fallback]:
    found: list[Fallback] = []
    place = {id(stmt): (block, i) for node in ast.walk(tree) for block in _blocks(node)
             for i, stmt in enumerate(block)}
    for node, where in _scoped(tree):
        if isinstance(node, ast.If) and (missing := _missing_makes(node.test, names)) is not None:
            block, i = place[id(node)]
            rest = block[i + 1:] if _ends(node.body) else []  # run when the test fails, as the orelse
            if paths.computes(node.body if missing else [*node.orelse, *rest]):
                found.append(_selection(node, where, names))
        elif isinstance(node, ast.IfExp) and (missing := _missing_makes(node.test, names)) is not None:
            if paths.computes([node.body if missing else node.orelse]):
                found.append(_selection(node, where, names))
    return found


def _blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    if isinstance(node, ast.Try | ast.TryStar):
        yield from (h.body for h in node.handlers)
    if isinstance(node, ast.Match):
        yield from (c.body for c in node.cases)


def _selection(node: ast.If | ast.IfExp, where: str, names: set[str]) -> Fallback:
    tested = sorted({dotted_name(x) for x in ast.walk(node.test) if dotted_name(x) in names} or
                    {ast.unparse(node.test)[:60]})
    return Fallback(node.lineno, f"line {node.lineno}: {where} computes without the build when "
                                 f"{', '.join(tested)} says it is missing")


def build_fallbacks(tree: ast.Module, build_calls: Sequence[ast.Call],
                    is_compute: Callable[[ast.Call], bool]) -> list[Fallback]:
    """Every build fallback of a parsed candidate (module docstring); `is_compute(call)`: the call is
    PyTorch compute (static_checks' rule for ModelNew)."""
    builds = Builds(tree, build_calls)
    guarded, flags = _guarded(tree, builds)
    names = _results(tree, builds, flags)
    return sorted(guarded + _selections(tree, names, _Paths(builds, is_compute)), key=lambda f: f.line)
