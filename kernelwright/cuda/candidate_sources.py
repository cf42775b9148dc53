"""The C++/CUDA sources a KernelBench-format candidate passes to `load_inline`, read without running it.

A compile check answers untrusted code, so the candidate's Python is never executed (unlike
`split_build.capture_load_inline`). Each `load_inline(...)` call is read from the AST, and its
`cpp_sources`, `cuda_sources` and `functions` arguments are resolved statically: string literals,
names bound to one at any level of the file (the last binding wins), `+` concatenation, lists and
tuples of those, and f-strings whose fields are such constants (`f"#define TILE {TILE}"`).

When no call can be resolved, the string literals holding `__global__` / `__device__` code stand
in as the CUDA sources (`Build.resolved` is False), so the device code is still checked. But a
source argument that names a variable the file binds nowhere (`cuda_sources=cuda_src` beside
`cuda_source = ...`) is the candidate's own fault: the call raises NameError before anything
builds, so nothing is compiled and the refusal says so (`unbound_name`), as the build would.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

from kernelwright.cuda.spans import SpanResult, cuda_string_literals
from kernelwright.pysource import parse_python, syntax_message

_UNRESOLVED = object()


@dataclass
class Build:
    """One `load_inline` call: its sources as load_inline receives them."""

    cpp: list[str] = field(default_factory=list)
    cuda: list[str] = field(default_factory=list)
    functions: list[str] | None = None  # names bound by load_inline's generated module; None: none
    resolved: bool = True  # False: sources found by the literal scan, not from a load_inline call


@dataclass
class CandidateSources:
    builds: list[Build] = field(default_factory=list)
    problem: str | None = None  # why nothing could be checked (Python syntax error, no CUDA source, unbound name)
    unbound: list[tuple[str, str]] = field(default_factory=list)  # (load_inline argument, name it never binds)

    @property
    def cuda(self) -> list[str]:
        return [s for b in self.builds for s in b.cuda]


def dotted_name(node: ast.AST) -> str:
    """`a.b.c` of a name or attribute chain; "" for anything else (a call, a subscript), whose attributes
    still follow it (`f().load_inline`: ".load_inline"). `getattr(a, "b")` with a literal name reads as
    `a.b`: hiding an attribute behind getattr hides nothing. A loop: chains may be longer than recursion goes."""
    attrs: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        elif (named := _getattr_literal(node)) is not None:
            attrs.append(named[1])
            node = named[0]
        else:
            break
    head = node.id if isinstance(node, ast.Name) else ""
    return ".".join([head, *reversed(attrs)]) if attrs else head


def _getattr_literal(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(object, attribute) of `getattr(obj, "attr")` (a default allowed); None for anything else."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) in (2, 3) and not node.keywords and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)):
        return node.args[0], node.args[1].value
    return None


BUILDER_NAMES = frozenset({"load_inline", "load", "RawKernel", "RawModule", "SourceModule"})
EXTENSION_MODULE = "cpp_extension"
_PARTIAL = frozenset({"partial", "functools.partial"})
_ALIAS_DEPTH = 8  # alias chains followed (`a = load_inline; b = a`): longer ones are not an honest file's


def _is_builder(name: str) -> bool:
    head, _, last = name.rpartition(".")
    return last in BUILDER_NAMES and (last != "load" or head.endswith(EXTENSION_MODULE) or not head)


def builder_aliases(tree: ast.Module) -> dict[str, str]:
    """Local names that stand for a builder or for cpp_extension itself, mapped to what they stand for, so that
    a call through one is read as the builder's: an import under another name (`from torch.utils.cpp_extension
    import load_inline as li`: li -> load_inline; `import torch.utils.cpp_extension as ce`), or a name assigned
    a builder (`build = load_inline`, `build = getattr(cpp_extension, "load_inline")`,
    `build = functools.partial(load_inline, verbose=False)`)."""
    aliases: dict[str, str] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            aliases |= {a.asname: a.name for a in n.names
                        if a.asname and a.asname != a.name and (a.name in BUILDER_NAMES or a.name == EXTENSION_MODULE)}
        elif isinstance(n, ast.Import):
            aliases |= {a.asname: a.name for a in n.names if a.asname and a.name.endswith(EXTENSION_MODULE)}
    assigned = [(t.id, _builder_reference(n.value)) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)]
    for _ in range(_ALIAS_DEPTH):
        found = {target: resolved for target, value in assigned
                 if value and _is_builder(resolved := _resolve(value, aliases)) and aliases.get(target) != resolved}
        if not found:
            break
        aliases |= found
    return aliases


def _builder_reference(value: ast.expr) -> str:
    """The dotted name a right-hand side refers to, seeing through `functools.partial(f, ...)`; "" if none."""
    if isinstance(value, ast.Call) and dotted_name(value.func) in _PARTIAL and value.args:
        value = value.args[0]
    return "" if isinstance(value, ast.Call) and _getattr_literal(value) is None else dotted_name(value)


def _resolve(name: str, aliases: dict[str, str]) -> str:
    head, dot, rest = name.partition(".")
    return aliases[head] + dot + rest if head in aliases else name


def call_name(call: ast.Call, aliases: dict[str, str]) -> str:
    """`dotted_name` of what `call` calls, a name that stands for a builder read as the builder."""
    return _resolve(dotted_name(call.func), aliases)


def load_inline_calls(tree: ast.Module) -> list[ast.Call]:
    """Every call of `load_inline`, under whatever name the file imported it."""
    aliases = builder_aliases(tree)
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and call_name(n, aliases).endswith("load_inline")]


def _bindings(tree: ast.Module) -> dict[str, ast.expr]:
    """name -> the expression last assigned to it (plain `name = ...` / `name: T = ...` anywhere)."""
    found: dict[str, tuple[int, ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for t in targets:
            if isinstance(t, ast.Name):
                pos = (node.lineno << 16) + node.col_offset
                if t.id not in found or found[t.id][0] < pos:
                    found[t.id] = (pos, value)
    return {name: v for name, (_, v) in found.items()}


_DYNAMIC = {"exec", "eval", "globals", "locals", "vars", "setattr", "__import__"}  # bind names out of sight


def _bound_names(tree: ast.Module) -> set[str] | None:
    """Every name the file binds anywhere (assignments, imports, definitions, arguments, loop and
    `with` targets, handlers, globals); None where names may be bound out of sight (`import *`, or a
    call to exec, globals() and the like), so that nothing is called unbound."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store | ast.Del):
                bound.add(node.id)
            elif node.id in _DYNAMIC:
                return None
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound.update(node.names)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
    return bound


def unbound_source_names(tree: ast.Module, calls: list[ast.Call]) -> list[tuple[str, str]]:
    """(argument, name) of every `load_inline` source argument (cpp_sources, cuda_sources, functions)
    that reads a name the file binds nowhere and Python does not provide."""
    bound = _bound_names(tree)
    if bound is None:
        return []
    out = []
    for call in calls:
        for keyword, position in (("cpp_sources", 1), ("cuda_sources", 2), ("functions", 3)):
            arg = _argument(call, keyword, position)
            for node in ast.walk(arg) if arg is not None else ():
                if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound
                        and not hasattr(builtins, node.id)):
                    out.append((keyword, node.id))
    return out


class _Resolver:
    def __init__(self, bindings: dict[str, ast.expr]) -> None:
        self.bindings = bindings
        self.active: set[str] = set()  # names being resolved (a = a + "x" must not loop)

    def value(self, node: ast.expr) -> object:
        """The constant value of `node` (str, int, float, or a list of those), or _UNRESOLVED."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float):
            return node.value
        if isinstance(node, ast.Name) and node.id in self.bindings and node.id not in self.active:
            self.active.add(node.id)
            try:
                return self.value(self.bindings[node.id])
            finally:
                self.active.discard(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left), self.value(node.right)
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            if isinstance(left, list) and isinstance(right, list):
                return left + right
            return _UNRESOLVED
        if isinstance(node, ast.List | ast.Tuple):
            items = [self.value(e) for e in node.elts]
            return items if all(isinstance(i, str) for i in items) else _UNRESOLVED
        if isinstance(node, ast.JoinedStr):
            return self._fstring(node)
        return _UNRESOLVED

    def _fstring(self, node: ast.JoinedStr) -> object:
        parts: list[str] = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(v.value)
                continue
            if not isinstance(v, ast.FormattedValue) or v.conversion != -1 or v.format_spec is not None:
                return _UNRESOLVED
            inner = self.value(v.value)
            if not isinstance(inner, str | int | float):
                return _UNRESOLVED
            parts.append(str(inner))
        return "".join(parts)

    def strings(self, node: ast.expr | None) -> list[str] | None:
        """A str-or-list-of-str argument as a list; [] when absent, None when not resolvable."""
        if node is None or (isinstance(node, ast.Constant) and node.value is None):
            return []
        got = self.value(node)
        if isinstance(got, str):
            return [got]
        if isinstance(got, list):
            return [str(s) for s in got]
        return None


def _argument(call: ast.Call, keyword: str, position: int) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == keyword:
            return k.value
    return call.args[position] if len(call.args) > position else None


def _functions(resolver: _Resolver, node: ast.expr | None) -> list[str] | None:
    if isinstance(node, ast.Dict):
        keys = [resolver.value(k) for k in node.keys if k is not None]
        return [k for k in keys if isinstance(k, str)]
    got = resolver.strings(node)
    return got if got else None


def _build(call: ast.Call, resolver: _Resolver) -> Build | None:
    cpp = resolver.strings(_argument(call, "cpp_sources", 1))
    cuda = resolver.strings(_argument(call, "cuda_sources", 2))
    if cpp is None or cuda is None or not (cpp or cuda):
        return None
    return Build(cpp=cpp, cuda=cuda, functions=_functions(resolver, _argument(call, "functions", 3)))


def candidate_sources(py_source: str) -> CandidateSources:
    """Every `load_inline` build of a candidate file, its sources resolved without running it."""
    try:
        tree = parse_python(py_source)
    except SyntaxError as exc:
        return CandidateSources(problem=f"python_syntax: {syntax_message(exc)}")
    resolver = _Resolver(_bindings(tree))
    calls = load_inline_calls(tree)
    unbound = unbound_source_names(tree, calls)
    if unbound:
        named = ", ".join(f"{arg}={name}" for arg, name in unbound)
        return CandidateSources(problem=f"unbound_name: load_inline reads {named}, a name the file never binds "
                                        "(NameError before anything builds)", unbound=unbound)
    builds = [b for b in (_build(c, resolver) for c in calls) if b is not None]
    if builds and len(builds) == len(calls):
        return CandidateSources(builds=builds)
    literals = [text for _, text in cuda_string_literals(py_source, SpanResult())]
    if literals:
        return CandidateSources(builds=[Build(cuda=literals, resolved=False)])
    if builds:
        return CandidateSources(builds=builds)
    return CandidateSources(problem="no_cuda_source: no load_inline call with resolvable sources, "
                                    "and no string literal holding __global__ or __device__ code")
