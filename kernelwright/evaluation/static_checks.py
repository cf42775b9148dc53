"""Static checks of a candidate file (AST only; nothing is imported or run).

One implementation, shared by curation (filters) and evaluation (`verify --static`):
- `no_kernel`: no `__global__` function in a CUDA source passed to `load_inline`/`load`, or no
  `<<<...>>>` launch of one;
- `fallback_try_except`: `ModelNew` wraps work in try/except (the classic silent fallback);
- `fallback_torch_op`: `ModelNew`'s methods call PyTorch compute ops (matmul, conv, F.*, ...)
  instead of the custom kernels. Allocation, views and dtype/device moves are allowed. (Python
  operators on tensors, `x * 2`, cannot be told apart statically: the profiler check catches them.)
- `harness_tampering`: assignments to attributes of `torch`, `time`, `ctypes` or `builtins`
  (patching timers, events, comparison functions) anywhere in the file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

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

    @property
    def ok(self) -> bool:
        return not self.reasons

    def flag(self, reason: str, detail: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)
        self.details.append(detail)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _string_constants(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _check_kernels(tree: ast.Module, report: StaticReport) -> None:
    builds = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
              and _dotted(n.func).split(".")[-1] in ("load_inline", "load", "compile", "RawKernel", "RawModule")]
    sources = [s for s in _string_constants(tree) if "__global__" in s]
    report.kernels = sum(s.count("__global__") for s in sources)
    report.launches = sum(s.count("<<<") for s in sources)
    if not builds or not report.kernels:
        report.flag("no_kernel", "no __global__ kernel is built with load_inline")
    elif not report.launches and not any("RawKernel" in _dotted(b.func) for b in builds):
        report.flag("no_kernel", "a __global__ kernel is defined but never launched with <<<...>>>")


def _run_time_nodes(cls: ast.ClassDef):
    """Every node of ModelNew except its constructor (which may initialise weights with torch ops)."""
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            yield from (n for n in ast.walk(item) if isinstance(n, ast.Try))
            continue
        yield from ast.walk(item)


def _check_model_new(cls: ast.ClassDef, report: StaticReport) -> None:
    for node in _run_time_nodes(cls):
        if isinstance(node, ast.Try):
            report.flag("fallback_try_except", f"line {node.lineno}: try/except in ModelNew")
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        head, _, attr = name.rpartition(".")
        if head in TORCH_NAMESPACES or head.startswith(("torch.", "F.", "nn.functional")):
            if attr not in ALLOWED_TORCH and not attr[:1].isupper():
                report.flag("fallback_torch_op", f"line {node.lineno}: calls {name}")
        elif head and attr in COMPUTE_METHODS:
            report.flag("fallback_torch_op", f"line {node.lineno}: calls .{attr}()")


TAMPER_ROOTS = frozenset({"torch", "time", "ctypes", "builtins", "sys", "F", "nn"})


def _check_tampering(tree: ast.Module, report: StaticReport) -> None:
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and _dotted(node.func) == "setattr" and node.args:
            targets = [node.args[0]]
        for t in targets:
            root = _dotted(t).split(".")[0]
            if root in TAMPER_ROOTS and (isinstance(t, ast.Attribute) or isinstance(node, ast.Call)):
                report.flag("harness_tampering", f"line {getattr(node, 'lineno', 0)}: assigns to {_dotted(t)}")


def check_source(source: str) -> StaticReport:
    """Run every static check on a candidate's Python source."""
    report = StaticReport()
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        report.flag("syntax_error", f"line {exc.lineno}: {exc.msg}")
        return report
    _check_tampering(tree, report)
    _check_kernels(tree, report)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    if not classes:
        report.flag("no_model_new", "no class ModelNew")
    for cls in classes:
        _check_model_new(cls, report)
    return report
