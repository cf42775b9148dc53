"""PyTorch compute called from a candidate's C++/CUDA host code (tree-sitter-cuda call nodes).

A `load_inline` wrapper can call `at::matmul` (or `x.sum()`, `torch::nn::functional::linear`) and
launch a token kernel beside it: the Python-side checks of `static_checks` never see it. This
module walks the `call_expression` nodes of every C++/CUDA source string of a candidate, so
comments and string literals inside the sources never count, and reports the calls of compute
ops (`COMPUTE_OPS`):
- qualified calls rooted in `at::` or `torch::` (`at::matmul`, `at::native::softmax`,
  `torch::nn::functional::linear`, `::at::mm`), or in a namespace alias of them
  (`namespace F = torch::nn::functional;` then `F::linear`);
- method calls on a receiver in host code, `t.sum(1)` / `t->relu_()`;
- unqualified calls after `using namespace at;` / `using torch::mm;` (names that are also C,
  C++ or CUDA math functions, `max`, `exp`, ..., and functions defined in the source excepted).
`#define` bodies, opaque to the parse, are parsed again as statements and scanned the same way.
Device code (`__global__` / `__device__` functions, `__device__` lambdas) is skipped: its
`max()` / `fmaxf()` / `a.x` are not torch. Names are compared after dropping a leading `_`, an
`_out` or in-place `_` suffix and an ATen backend prefix (`native_`, `cudnn_`, `linalg_`, ...):
`at::_softmax`, `at::mm_out`, `x.add_()` count. Allocation, views, moves and metadata
(`ALLOWED_OPS`, any `*_like`) never count. Operators on tensors (`a * b`) cannot be told apart
from arithmetic statically and are not reported.

Sources: every string literal of the Python file holding `__global__` / `__device__` (the kernels
and their wrappers), and every other literal that mentions `torch::`, `at::` or `#include` and
parses as C++ without errors (a `cpp_sources=` string can hold the host wrapper too). Lines are
lines of the candidate file (exact for literals without escaped newlines).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import tree_sitter

from kernelwright.cuda.spans import cuda_parser, is_device_function, walk
from kernelwright.pysource import parse_python

# Tensor compute: calling one from host code computes (part of) the answer with PyTorch.
COMPUTE_OPS = frozenset({
    # matrix products and contractions
    "matmul", "mm", "bmm", "addmm", "addmv", "addbmm", "baddbmm", "mv", "dot", "vdot", "einsum", "linear",
    "bilinear", "tensordot", "outer", "ger", "inner", "chain_matmul", "multi_dot", "kron", "gemm", "gemv",
    # convolutions (and any name starting conv1d / conv_ / convolution, see `_is_compute`)
    "conv1d", "conv2d", "conv3d", "convolution", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "conv_tbc", "conv_depthwise2d",
    # reductions
    "sum", "nansum", "mean", "nanmean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "aminmax",
    "var", "std", "var_mean", "std_mean", "norm", "vector_norm", "matrix_norm", "frobenius_norm", "logsumexp",
    "cumsum", "cumprod", "cummax", "cummin", "median", "mode", "sort", "argsort", "topk", "kthvalue",
    # normalisation and activations
    "softmax", "log_softmax", "layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm",
    "local_response_norm", "normalize", "relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu",
    "mish", "sigmoid", "logsigmoid", "hardsigmoid", "hardswish", "hardtanh", "softplus", "softsign", "tanh",
    "threshold", "glu", "prelu",
    # elementwise math
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide", "remainder",
    "fmod", "neg", "reciprocal", "pow", "square", "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2",
    "log10", "log1p", "abs", "sin", "cos", "tan", "erf", "erfc", "sign", "clamp", "clip", "minimum", "maximum",
    "where", "lerp", "addcmul", "addcdiv", "masked_fill", "round", "floor", "ceil", "trunc",
    # indexing, pooling, losses, fft
    "gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index_add", "index_put", "take",
    "embedding", "embedding_bag", "one_hot", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d",
    "avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "interpolate", "upsample_bilinear2d",
    "upsample_nearest2d", "pad", "dropout", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss",
    "huber_loss", "kl_div", "binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_similarity",
    "pairwise_distance", "cdist", "triplet_margin_loss", "hinge_embedding_loss", "margin_ranking_loss",
    "scaled_dot_product_attention", "fft", "ifft", "rfft", "irfft", "fft2", "rfft2",
})
# Allocation, views, moves and metadata: never reported (documentation; also wins over COMPUTE_OPS).
ALLOWED_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "view", "view_as", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose", "t",
    "expand", "expand_as", "narrow", "select", "slice", "contiguous", "to", "cuda", "cpu", "clone", "copy_",
    "fill_", "zero_", "data_ptr", "const_data_ptr", "mutable_data_ptr", "item", "size", "sizes", "stride",
    "strides", "numel", "dim", "ndimension", "options", "dtype", "device", "scalar_type", "is_contiguous",
    "is_cuda", "defined", "TORCH_CHECK", "getCurrentCUDAStream", "float", "half", "bfloat16",
})
# Also C, C++ or CUDA math / std functions: an unqualified call of one is not taken for torch.
SCALAR_LOOKALIKES = frozenset({
    "max", "min", "abs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "sqrt", "rsqrt", "tanh",
    "sin", "cos", "tan", "erf", "erfc", "floor", "ceil", "round", "trunc", "fmod", "remainder", "sort", "clamp",
    "dot", "norm", "sign", "square", "threshold", "normalize", "add", "sub", "mul", "div", "neg", "where",
})
TORCH_ROOTS = frozenset({"at", "torch"})
_PREFIXES = ("native_", "cudnn_", "miopen_", "mkldnn_", "linalg_", "special_", "fft_")
_CONV = re.compile(r"^conv(\d|_|olution)")
_MARKERS = ("torch::", "at::", "#include")
_MAX_SHOWN = 8
_MACRO_WRAP = "void __kw_macro__() {\n"


@dataclass(frozen=True)
class TorchCall:
    op: str  # the compute op, normalised (`at::mm_out` -> mm)
    call: str  # the callee as written, template arguments dropped (`at::mm_out`, `x.sum`)
    line: int  # line of the candidate file (or of the C++ source given to `scan_cpp`)


@dataclass(frozen=True)
class TorchCallScan:
    calls: tuple[TorchCall, ...] = ()

    @property
    def flagged(self) -> bool:
        return bool(self.calls)

    @property
    def detail(self) -> str:
        """`host code calls PyTorch compute: at::matmul (line 12), x.sum (line 15)`; empty if none."""
        if not self.calls:
            return ""
        shown = ", ".join(f"{c.call} (line {c.line})" for c in self.calls[:_MAX_SHOWN])
        more = f" and {len(self.calls) - _MAX_SHOWN} more" if len(self.calls) > _MAX_SHOWN else ""
        return f"host code calls PyTorch compute: {shown}{more}"


def _text(node: tree_sitter.Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _strip_templates(name: str) -> str:
    out, depth = [], 0
    for ch in name:
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">" and depth > 0
    return "".join(out)


def compute_op(name: str) -> str | None:
    """The compute op a callee name stands for (`_softmax` -> softmax, `add_` -> add), or None."""
    if name in ALLOWED_OPS or name.endswith("_like"):
        return None
    op = name.lstrip("_")
    op = op.removesuffix("_out").removesuffix("_")
    op = next((op.removeprefix(p) for p in _PREFIXES if op.startswith(p)), op)
    if op in ALLOWED_OPS:
        return None
    return op if op in COMPUTE_OPS or _CONV.match(op) else None


def _segments(callee: str) -> list[str]:
    return [s.strip() for s in _strip_templates(callee).split("::") if s.strip()]


@dataclass
class _Scope:
    """What the source says about torch names: aliases, using-directives and its own functions."""

    roots: set[str]  # namespaces whose qualified calls are torch: at, torch and their aliases
    unqualified: bool = False  # `using namespace at;` / `using namespace torch;`
    imported: frozenset[str] = frozenset()  # `using torch::mm;`
    defined: frozenset[str] = frozenset()  # names of the source's own functions


def _declared_name(fn: tree_sitter.Node) -> str:
    decl = fn.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    segs = _segments(_text(decl.child_by_field_name("declarator"))) if decl is not None else []
    return segs[-1] if segs else ""


def _torch_rooted(node: tree_sitter.Node | None) -> bool:
    segs = _segments(_text(node))
    return bool(segs) and segs[0] in TORCH_ROOTS


def _scope(root: tree_sitter.Node) -> _Scope:
    scope = _Scope(roots=set(TORCH_ROOTS))
    imported: set[str] = set()
    defined: set[str] = set()
    for node in walk(root):
        named = node.named_children
        if node.type == "namespace_alias_definition" and len(named) == 2 and _torch_rooted(named[1]):
            scope.roots.add(_text(named[0]))
        elif node.type == "using_declaration" and named and _torch_rooted(named[-1]):
            if any(c.type == "namespace" for c in node.children):
                scope.unqualified = True
            else:
                imported.add(_segments(_text(named[-1]))[-1])
        elif node.type == "function_definition":
            defined.add(_declared_name(node))
    scope.imported, scope.defined = frozenset(imported), frozenset(defined)
    return scope



def _is_device(node: tree_sitter.Node) -> bool:
    if node.type == "function_definition":
        return is_device_function(node)
    if node.type == "lambda_expression":
        return any(_text(c).strip() == "__device__" for c in node.children)
    return False


def _host_calls(root: tree_sitter.Node):
    """The `call_expression` nodes outside device code, in source order."""
    stack = [root]
    while stack:
        node = stack.pop()
        if _is_device(node):
            continue
        if node.type == "call_expression":
            yield node
        stack.extend(reversed(node.children))


def _call_op(fn: tree_sitter.Node, scope: _Scope) -> str | None:
    if fn.type == "qualified_identifier":
        segs = _segments(_text(fn))
        return compute_op(segs[-1]) if len(segs) > 1 and segs[0] in scope.roots else None
    if fn.type == "field_expression":
        return compute_op(_strip_templates(_text(fn.child_by_field_name("field"))).strip())
    if fn.type in ("identifier", "template_function"):
        name = _strip_templates(_text(fn)).strip()
        torch_name = name in scope.imported or (scope.unqualified and name not in SCALAR_LOOKALIKES)
        return compute_op(name) if torch_name and name not in scope.defined else None
    return None


def _call_text(fn: tree_sitter.Node) -> str:
    text = " ".join(_strip_templates(_text(fn)).split())
    return text if len(text) <= 60 else "..." + text[-57:]


def _macro_bodies(root: tree_sitter.Node):
    """(row of the body, body) of each `#define` with a body: opaque to the parse of the source."""
    for node in walk(root):
        body = node.child_by_field_name("value") if node.type in ("preproc_def", "preproc_function_def") else None
        if body is not None:
            yield body.start_point[0], _text(body)


def _scan_root(root: tree_sitter.Node, scope: _Scope, first_line: int) -> list[TorchCall]:
    found: list[TorchCall] = []
    for call in _host_calls(root):
        fn = call.child_by_field_name("function")
        op = _call_op(fn, scope) if fn is not None else None
        if op is not None and fn is not None:
            found.append(TorchCall(op, _call_text(fn), first_line + fn.start_point[0]))
    return found


def scan_cpp(source: str, first_line: int = 1) -> list[TorchCall]:
    """The PyTorch compute calls in the host code of one C++/CUDA source (macro bodies included);
    line 1 of `source` is `first_line`."""
    root = cuda_parser().parse(source.encode("utf-8")).root_node
    scope = _scope(root)
    found = _scan_root(root, scope, first_line)
    for row, body in _macro_bodies(root):
        wrapped = cuda_parser().parse(f"{_MACRO_WRAP}{body};\n}}\n".encode()).root_node
        found.extend(_scan_root(wrapped, scope, first_line + row - 1))
    return sorted(found, key=lambda c: c.line)


def _is_cpp_source(text: str) -> bool:
    if "__global__" in text or "__device__" in text:
        return True
    return any(m in text for m in _MARKERS) and not cuda_parser().parse(text.encode("utf-8")).root_node.has_error


def cpp_sources(py_source: str) -> list[tuple[int, str]]:
    """(line of the candidate file, text) of each string literal holding C++/CUDA source."""
    try:
        tree = parse_python(py_source)
    except SyntaxError:
        return []
    found = [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return sorted(item for item in found if _is_cpp_source(item[1]))


def scan_candidate(py_source: str) -> TorchCallScan:
    """The PyTorch compute calls of all C++/CUDA sources of a Python (KernelBench-format) candidate."""
    calls = [c for line, text in cpp_sources(py_source) for c in scan_cpp(text, line)]
    return TorchCallScan(tuple(dict.fromkeys(calls)))
