"""Static checks of a candidate file (AST only; nothing is imported or run).

One implementation, shared by curation (filters) and evaluation (`verify --static`):
- `no_kernel`: no real kernel: no `__global__` function in a CUDA source built with `load_inline`,
  cpp_extension `load`, cupy `RawKernel`/`RawModule` or pycuda `SourceModule`; or no kernel of it
  is launched (`<<<...>>>`, `cudaLaunch*`, a `RawKernel` name or `get_function`); or the Python
  code never calls what was built (the `functions=` bindings / `m.def` names of the extension, or
  the `RawKernel` object; only with `require_call=True`, which curation sets: verification sees
  the kernels run and judges the rest at run time). Names built from non-literal expressions are
  not held against a file;
- `fallback_try_except`: a silent fallback: `ModelNew` wraps work in try/except; or, anywhere in the
  file, a failed build is swallowed (try/except or `contextlib.suppress` around a build call or
  anything that builds) or a missing build result selects another path (`build_fallbacks`);
- `fallback_torch_op`: `ModelNew`'s methods call PyTorch compute ops (matmul, conv, F.*, ...)
  instead of the custom kernels. Allocation, views and dtype/device moves are allowed. (Python
  operators on tensors, `x * 2`, cannot be told apart statically: the profiler check catches them.)
- `harness_tampering`: assignments to attributes of `torch`, `time`, `ctypes` or `builtins`
  (patching timers, events, comparison functions) anywhere in the file.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import TypeGuard

from kernelwright.cuda.build_fallbacks import build_fallbacks, suppresses, swallowing
from kernelwright.cuda.candidate_sources import builder_aliases, call_name, dotted_name
from kernelwright.pysource import parse_python, syntax_message

# Calls that only allocate, reshape or move data: allowed in ModelNew's Python code.
ALLOWED_TORCH = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "tensor", "as_tensor", "arange", "device", "Size", "is_tensor", "no_grad", "inference_mode", "get_default_dtype",
    "cuda", "float32", "float16", "bfloat16", "int8", "int32", "int64", "uint8", "bool", "float", "long", "half",
})
TORCH_NAMESPACES = frozenset({"torch", "F", "nn", "functional", "torch.nn.functional", "torch.linalg", "torch.fft"})
# Tensor methods that compute: calling one in ModelNew is a PyTorch fallback.
COMPUTE_METHODS = frozenset({
    "matmul", "mm", "bmm", "addmm", "mul", "add", "sub", "div", "sum", "mean", "max", "min", "softmax",
    "log_softmax", "exp", "log", "relu", "sigmoid", "tanh", "pow", "sqrt", "rsqrt", "norm", "var", "std",
    "argmax", "argmin", "cumsum", "prod", "abs", "clamp", "conv1d", "conv2d", "conv3d", "linear", "einsum",
    "gather", "scatter", "index_select", "masked_fill", "where", "topk", "sort", "round", "layer_norm",
})


@dataclass
class StaticReport:
    reasons: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    kernels: int = 0
    launches: int = 0
    by_reason: dict[str, list[str]] = field(default_factory=dict)  # the details of each reason
    torch_ops: list[tuple[int, str]] = field(default_factory=list)  # (line, call) of each fallback_torch_op

    @property
    def ok(self) -> bool:
        return not self.reasons

    def flag(self, reason: str, detail: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)
        self.details.append(detail)
        self.by_reason.setdefault(reason, []).append(detail)


def _string_constants(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


BUILDERS = frozenset({"load_inline", "RawKernel", "RawModule", "SourceModule"})
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^()]*\)")
_GLOBAL_FN = re.compile(r"__global__\s+[^;{}()]*?(\w+)\s*\(")
_CHEVRON_LAUNCH = re.compile(r"\b(\w+)\s*(?:<[^<>;()]*>)?\s*<<<")
_API_LAUNCH = re.compile(r"\bcudaLaunch\w*\s*\(([^;]*)")
_PYBIND_DEF = re.compile(r"\.def\s*\(\s*\"(\w+)\"")


def _cpp_extension_imports(tree: ast.Module) -> set[str]:
    """The names a file imports from cpp_extension, as cpp_extension names them (`call_name` reads an
    alias as its builder's name)."""
    return {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            and (n.module or "").endswith("cpp_extension") for a in n.names}


def _build_calls(tree: ast.Module, aliases: dict[str, str]) -> list[ast.Call]:
    """Calls that build device code: load_inline, cpp_extension.load, cupy RawKernel/RawModule, SourceModule
    (under the names `aliases` reads as builders)."""
    from_ext = _cpp_extension_imports(tree)
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        name = call_name(n, aliases)
        head, _, last = name.rpartition(".")
        if last in BUILDERS or (last == "load" and (head.endswith("cpp_extension") or (not head and name in from_ext))):
            out.append(n)
    return out


def _str_args(call: ast.Call, keyword: str, position: int | None = None) -> list[str] | None:
    """String literal(s) passed as `keyword` (or positional `position`); None if absent or not literal."""
    node = next((k.value for k in call.keywords if k.arg == keyword), None)
    if node is None and position is not None and len(call.args) > position:
        node = call.args[position]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.List | ast.Tuple) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


def kernel_names(cuda_source: str) -> list[str]:
    """Names of the `__global__` functions of a CUDA source."""
    return _GLOBAL_FN.findall(_LAUNCH_BOUNDS.sub("", cuda_source))


def _launched(sources: list[str], kernels: set[str], tree: ast.Module, builds: list[ast.Call],
              aliases: dict[str, str]) -> set[str]:
    text = "\n".join(sources)
    found = {m for m in _CHEVRON_LAUNCH.findall(text) if m in kernels}
    for args in _API_LAUNCH.findall(text):
        found |= {k for k in kernels if re.search(rf"\b{re.escape(k)}\b", args)}
    for b in builds:  # cupy RawKernel(code, "name") launches by name when called (under any name for RawKernel)
        if call_name(b, aliases).endswith("RawKernel"):
            found |= set(_str_args(b, "name", 1) or []) & kernels
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and dotted_name(n.func).endswith("get_function"):
            found |= set(_str_args(n, "name", 0) or []) & kernels
    return found


def _built_callables(tree: ast.Module, builds: list[ast.Call], sources: list[str],
                     aliases: dict[str, str]) -> set[str] | None:
    """Names through which Python calls what was built; None when they cannot be read statically."""
    names: set[str] = set()
    for b in builds:
        if call_name(b, aliases).endswith(("load_inline", "load")):
            bound = _str_args(b, "functions")
            if bound is None and not any(_PYBIND_DEF.search(s) for s in sources):
                return None
            names |= set(bound or [])
    names |= {m for s in sources for m in _PYBIND_DEF.findall(s)}
    build_ids = {id(b) for b in builds}
    for n in ast.walk(tree):  # k = cp.RawKernel(...) / mod.get_function(...): calls go through `k`
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and (
                id(n.value) in build_ids or dotted_name(n.value.func).endswith("get_function")):
            names |= {dotted_name(t).rpartition(".")[2] for t in n.targets if dotted_name(t)}
    return names


def _calls_any(tree: ast.Module, names: set[str]) -> bool:
    return any(isinstance(n, ast.Call) and dotted_name(n.func).rpartition(".")[2] in names for n in ast.walk(tree))


def _check_kernels(tree: ast.Module, report: StaticReport, builds: list[ast.Call], aliases: dict[str, str]) -> None:
    sources = [s for s in _string_constants(tree) if "__global__" in s]
    kernels = {k for s in sources for k in kernel_names(s)}
    report.kernels = sum(s.count("__global__") for s in sources)
    report.launches = sum(s.count("<<<") for s in sources)
    if not builds or not report.kernels:
        report.flag("no_kernel", "no __global__ kernel is built (load_inline, cpp_extension.load, RawKernel, ...)")
        return
    if kernels and not _launched(sources, kernels, tree, builds, aliases):
        report.flag("no_kernel", f"__global__ {', '.join(sorted(kernels))} defined but never launched")


def _check_called(tree: ast.Module, report: StaticReport, builds: list[ast.Call], aliases: dict[str, str]) -> None:
    """What was built must be called. Run last: a fallback already flagged is the more precise reason."""
    if report.reasons:
        return
    sources = [s for s in _string_constants(tree) if "__global__" in s]
    callables = _built_callables(tree, builds, sources, aliases)
    if callables is not None and not _calls_any(tree, callables):
        what = ", ".join(sorted(callables)) or "the built module"
        report.flag("no_kernel", f"{what} built but never called from Python")


def _swallows(node: ast.AST) -> TypeGuard[ast.Try | ast.TryStar | ast.With | ast.AsyncWith]:
    """A statement that can swallow an exception: try/except (`except*` too) or a `contextlib.suppress` block."""
    return isinstance(node, ast.Try | ast.TryStar) or (isinstance(node, ast.With | ast.AsyncWith) and suppresses(node))


def _run_time_nodes(cls: ast.ClassDef):
    """Every node of ModelNew except its constructor (which may initialise weights with torch ops)."""
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            yield from (n for n in ast.walk(item) if _swallows(n))
            continue
        yield from ast.walk(item)


def _built_names(tree: ast.Module, build_calls: list[ast.Call]) -> frozenset[str]:
    """Names bound to what a build call returns (`_ext = load_inline(...)`, `self.ext = load(...)`):
    their methods are the candidate's own functions, whatever they are called (`_ext.relu`)."""
    builds = {id(b) for b in build_calls}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and id(node.value) in builds:
            names.update(dotted_name(t) for t in node.targets)
    return frozenset(n for n in names if n)


def _torch_compute(node: ast.Call, built: frozenset[str]) -> str | None:
    """The PyTorch compute `node` calls (e.g. "torch.matmul", ".sum()"), or None."""
    name = dotted_name(node.func)
    head, _, attr = name.rpartition(".")
    if head in TORCH_NAMESPACES or head.startswith(("torch.", "F.", "nn.functional")):
        return name if attr not in ALLOWED_TORCH and not attr[:1].isupper() else None
    return f".{attr}()" if head and attr in COMPUTE_METHODS and head not in built else None


def _check_model_new(cls: ast.ClassDef, report: StaticReport, built: frozenset[str] = frozenset()) -> None:
    for node in _run_time_nodes(cls):
        if _swallows(node):
            what = "try/except" if isinstance(node, ast.Try | ast.TryStar) else "contextlib.suppress"
            report.flag("fallback_try_except", f"line {node.lineno}: {what} in ModelNew")
        if isinstance(node, ast.Call) and (call := _torch_compute(node, built)) is not None:
            _torch_op(report, node.lineno, call)


def _check_swallowed_calls(tree: ast.Module, report: StaticReport, model_new: list[ast.ClassDef],
                           built: frozenset[str]) -> None:
    """A failed call of the built extension swallowed outside ModelNew (inside it every try is flagged): a
    try whose body calls it with a handler that does not re-raise, or a suppress block around it, in a
    helper function or class that ModelNew calls instead of the kernel."""
    inside = {id(n) for cls in model_new for n in ast.walk(cls)}
    for node in ast.walk(tree):
        guard = None if id(node) in inside else swallowing(node)
        if guard is None:
            continue
        calls = [c for stmt in guard.body for c in ast.walk(stmt) if isinstance(c, ast.Call)]
        if any(dotted_name(c.func).rpartition(".")[0] in built for c in calls):
            report.flag("fallback_try_except", f"line {guard.node.lineno}: a failed call of the built extension is "
                                               "swallowed (try/except or suppress around it)")


def _check_build_fallbacks(tree: ast.Module, report: StaticReport, builds: list[ast.Call],
                           built: frozenset[str]) -> None:
    for found in build_fallbacks(tree, builds, lambda call: _torch_compute(call, built) is not None):
        report.flag("fallback_try_except", found.detail)


def _torch_op(report: StaticReport, line: int, call: str) -> None:
    report.flag("fallback_torch_op", f"line {line}: calls {call}")
    report.torch_ops.append((line, call))


TAMPER_ROOTS = frozenset({"torch", "time", "ctypes", "builtins", "sys", "F", "nn"})


def _check_tampering(tree: ast.Module, report: StaticReport) -> None:
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and dotted_name(node.func) == "setattr" and node.args:
            targets = [node.args[0]]
        for t in targets:
            root = dotted_name(t).split(".")[0]
            if root in TAMPER_ROOTS and (isinstance(t, ast.Attribute) or isinstance(node, ast.Call)):
                report.flag("harness_tampering", f"line {getattr(node, 'lineno', 0)}: assigns to {dotted_name(t)}")


def model_new_classes(tree: ast.Module) -> list[ast.ClassDef]:
    """The classes whose code runs as ModelNew: the module-level class of that name, or what the module binds
    to it from its own code: a class (`ModelNew = FusedModel`), the classes a factory function of the file
    defines (`ModelNew = make_model()`), the bases of a `type("ModelNew", (Base,), {...})`; and the file's
    own classes they inherit from, transitively (a forward in a base class runs as ModelNew's). Empty: the
    file binds no ModelNew of its own code."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    for value in _model_new_values(tree):
        if isinstance(value, ast.Name) and value.id in defs:
            found.append(defs[value.id])
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in functions:
            nested = [n for n in ast.walk(functions[value.func.id]) if isinstance(n, ast.ClassDef)]
            found += nested
            defs |= {n.name: n for n in nested if n.name not in defs}
        elif isinstance(value, ast.Call) and dotted_name(value.func) == "type" and len(value.args) == 3 and \
                isinstance(value.args[1], ast.Tuple):
            found += [defs[b.id] for b in value.args[1].elts if isinstance(b, ast.Name) and b.id in defs]
    out: list[ast.ClassDef] = []
    while found:
        cls = found.pop()
        if cls not in out:
            out.append(cls)
            found += [defs[b.id] for b in cls.bases if isinstance(b, ast.Name) and b.id in defs]
    return out


def _model_new_values(tree: ast.Module) -> list[ast.expr]:
    """What module-level assignments bind to the name ModelNew."""
    return [n.value for n in tree.body if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in n.targets)]


def _no_model_new_detail(tree: ast.Module) -> str:
    values = _model_new_values(tree)
    if not values:
        return "no class ModelNew"
    value = values[-1]  # named without unparsing it: a candidate's expression may nest past recursion's limit
    named = dotted_name(value.func if isinstance(value, ast.Call) else value)
    what = f"{named[:80]}()" if named and isinstance(value, ast.Call) else named[:80] or f"a {type(value).__name__}"
    return f"ModelNew is bound to {what}, which is no class this file defines"


def check_source(source: str, require_call: bool = False) -> StaticReport:
    """Run every static check on a candidate's Python source (`require_call`: see `no_kernel` above)."""
    report = StaticReport()
    try:
        tree = parse_python(source)
    except SyntaxError as exc:
        report.flag("syntax_error", syntax_message(exc))
        return report
    _check_tampering(tree, report)
    aliases = builder_aliases(tree)  # read once: a chain of names for a builder takes several passes
    builds = _build_calls(tree, aliases)  # one walk for every check that needs the build calls
    _check_kernels(tree, report, builds, aliases)
    classes = model_new_classes(tree)
    if not classes:
        report.flag("no_model_new", _no_model_new_detail(tree))
    built = _built_names(tree, builds)
    for cls in classes:
        _check_model_new(cls, report, built)
    _check_swallowed_calls(tree, report, classes, built)
    _check_build_fallbacks(tree, report, builds, built)
    if require_call:
        _check_called(tree, report, builds, aliases)
    return report
