"""CUDA-critical spans of a completion, found with tree-sitter-cuda (docs/cuset.md, "c_t").

In the KernelBench format the CUDA source sits inside Python string literals: the Python `ast`
finds them, tree-sitter-cuda parses their contents, and span offsets are mapped back to character
offsets of the completion text. Macro bodies are opaque to tree-sitter: a `#define` body is parsed
again as a statement fragment (the common case: index and launch helpers); bodies that still do
not parse are counted in `SpanResult.macros_unparsed`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import lru_cache

import tree_sitter
import tree_sitter_cuda

from kernelwright.prompting import code_span
from kernelwright.pysource import parse_python

KINDS = (
    "barrier",
    "shared_decl",
    "thread_index",
    "global_access",
    "bounds_guard",
    "launch_config",
    "atomic",
    "warp_intrinsic",
    "launch_bounds",
    "memory_api",
)
BARRIERS = re.compile(r"^(__syncthreads(_count|_and|_or)?|__syncwarp|__threadfence(_block|_system)?|__barrier_sync)$")
WARP = re.compile(r"^(__shfl(_up|_down|_xor)?_sync|__ballot_sync|__any_sync|__all_sync|__activemask|"
                  r"__reduce_\w+_sync|__match_\w+_sync)$")
MEMORY_API = re.compile(r"^cuda(Malloc\w*|Memcpy\w*|Memset\w*|Free\w*|Stream\w*|Event\w*|FuncSetAttribute|"
                        r"DeviceSynchronize|LaunchKernel\w*)$")
INDEX_BUILTINS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})
COMPARISONS = frozenset({"<", "<=", ">", ">="})
_EXPR_PARENTS = frozenset({"binary_expression", "parenthesized_expression", "cast_expression", "unary_expression"})
_MACRO_WRAP = "void __kw_macro__() {\n"
_STRING_PREFIX = re.compile(r"^([rRuUbBfF]*)(\"\"\"|'''|\"|')")


@dataclass(frozen=True)
class Span:
    start: int  # character offset, inclusive
    end: int  # character offset, exclusive
    kind: str


@dataclass
class SpanResult:
    spans: list[Span] = field(default_factory=list)
    cuda_strings: int = 0
    strings_skipped: int = 0  # string literals with escapes whose offsets cannot be mapped exactly
    macros_parsed: int = 0
    macros_unparsed: int = 0
    python_ok: bool = True


@lru_cache(maxsize=1)
def cuda_parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_cuda.language()))


def _name(node: tree_sitter.Node) -> str:
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


def is_device_function(fn: tree_sitter.Node) -> bool:
    """A `__global__` or `__device__` function (definition or declaration node)."""
    return any(c.type in ("__global__", "__device__") for c in fn.children)


def _pointer_params(fn: tree_sitter.Node) -> set[str]:
    names: set[str] = set()
    decl = fn.child_by_field_name("declarator")
    params = decl.child_by_field_name("parameters") if decl is not None else None
    for p in params.named_children if params is not None else []:
        d = p.child_by_field_name("declarator")
        if d is not None and d.type == "pointer_declarator":
            while d is not None and d.type == "pointer_declarator":
                d = d.child_by_field_name("declarator")
            if d is not None and d.type == "identifier":
                names.add(_name(d))
    return names


def _outer_expression(node: tree_sitter.Node) -> tree_sitter.Node:
    while node.parent is not None and node.parent.type in _EXPR_PARENTS:
        node = node.parent
    return node


def _has_comparison(node: tree_sitter.Node) -> bool:
    if node.type == "binary_expression":
        op = node.child_by_field_name("operator")
        if op is not None and op.type in COMPARISONS:
            return True
    return any(_has_comparison(c) for c in node.children)


def _call_kind(node: tree_sitter.Node) -> tuple[str, tree_sitter.Node] | None:
    if any(c.type == "kernel_call_syntax" for c in node.children):
        cfg = next(c for c in node.children if c.type == "kernel_call_syntax")
        return "launch_config", cfg
    fn = node.child_by_field_name("function")
    name = _name(fn) if fn is not None else ""
    if BARRIERS.match(name):
        return "barrier", node
    if name.startswith("atomic"):
        return "atomic", node
    if WARP.match(name):
        return "warp_intrinsic", node
    if MEMORY_API.match(name):
        return "memory_api", node
    return None


def _node_spans(root: tree_sitter.Node) -> list[tuple[int, int, str]]:
    """(start_byte, end_byte, kind) for every CUDA-critical construct under `root`."""
    out: list[tuple[int, int, str]] = []
    stack: list[tuple[tree_sitter.Node, set[str] | None]] = [(root, None)]
    while stack:
        node, ptrs = stack.pop()
        t = node.type
        if t == "function_definition":
            ptrs = _pointer_params(node) if is_device_function(node) else None
        if t == "call_expression":
            hit = _call_kind(node)
            if hit:
                out.append((hit[1].start_byte, hit[1].end_byte, hit[0]))
        elif t == "declaration" and any(c.type == "type_qualifier" and _name(c) == "__shared__" for c in node.children):
            out.append((node.start_byte, node.end_byte, "shared_decl"))
        elif t == "launch_bounds":
            out.append((node.start_byte, node.end_byte, "launch_bounds"))
        elif t == "field_expression":
            arg = node.child_by_field_name("argument")
            if arg is not None and _name(arg) in INDEX_BUILTINS:
                outer = _outer_expression(node)
                out.append((outer.start_byte, outer.end_byte, "thread_index"))
        elif t == "subscript_expression" and ptrs:
            arg = node.child_by_field_name("argument")
            if arg is not None and arg.type == "identifier" and _name(arg) in ptrs:
                out.append((node.start_byte, node.end_byte, "global_access"))
        elif t in ("if_statement", "for_statement", "while_statement") and ptrs is not None:
            cond = node.child_by_field_name("condition")
            if cond is not None and _has_comparison(cond):
                out.append((cond.start_byte, cond.end_byte, "bounds_guard"))
        stack.extend((c, ptrs) for c in node.children)
    return out


def _macro_spans(root: tree_sitter.Node, result: SpanResult) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    for node in _iter(root):
        if node.type not in ("preproc_def", "preproc_function_def"):
            continue
        body = node.child_by_field_name("value")
        if body is None:
            continue
        wrapped = _MACRO_WRAP.encode() + body.text + b";\n}\n" if body.text else b""
        tree = cuda_parser().parse(wrapped)
        if tree.root_node.has_error:
            result.macros_unparsed += 1
            continue
        result.macros_parsed += 1
        shift = body.start_byte - len(_MACRO_WRAP.encode())
        for s, e, kind in _node_spans(tree.root_node):
            out.append((s + shift, e + shift, kind))
    return out


def walk(node: tree_sitter.Node, in_order: bool = True):
    """Every node below `node` (itself first), depth first; `in_order`: in source order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children) if in_order else n.children)


def _iter(node: tree_sitter.Node):
    return walk(node, in_order=False)


def cuda_source_spans(cuda: str, result: SpanResult | None = None) -> list[Span]:
    """Spans (character offsets into `cuda`) of the CUDA-critical constructs of a CUDA source."""
    result = result if result is not None else SpanResult()
    data = cuda.encode("utf-8")
    root = cuda_parser().parse(data).root_node
    raw = sorted(set(_node_spans(root) + _macro_spans(root, result)))
    if len(data) == len(cuda):  # ASCII: bytes are characters
        return [Span(s, e, k) for s, e, k in raw]
    char_at = _byte_to_char(cuda)
    return [Span(char_at[s], char_at[e], k) for s, e, k in raw]


def _byte_to_char(text: str) -> list[int]:
    table: list[int] = []
    for i, ch in enumerate(text):
        table.extend([i] * len(ch.encode("utf-8")))
    table.append(len(text))
    return table


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for m in re.finditer("\n", text):
        starts.append(m.end())
    return starts


def _char_offset(text: str, line_starts: list[int], lineno: int, col_bytes: int) -> int:
    start = line_starts[lineno - 1]
    line = text[start : start + col_bytes + 4 * col_bytes]  # enough chars for col_bytes bytes
    return start + len(line.encode("utf-8")[:col_bytes].decode("utf-8", "ignore"))


def cuda_string_literals(py_source: str, result: SpanResult) -> list[tuple[int, str]]:
    """(character offset of the contents, contents) of each string literal holding CUDA code."""
    try:
        tree = parse_python(py_source)
    except SyntaxError:
        result.python_ok = False
        return []
    starts = _line_starts(py_source)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if "__global__" not in node.value and "__device__" not in node.value:
            continue
        assert node.end_lineno is not None and node.end_col_offset is not None
        start = _char_offset(py_source, starts, node.lineno, node.col_offset)
        end = _char_offset(py_source, starts, node.end_lineno, node.end_col_offset)
        literal = py_source[start:end]
        m = _STRING_PREFIX.match(literal)
        if m is None or not literal.endswith(m.group(2)):
            result.strings_skipped += 1
            continue
        inner = literal[m.end() : len(literal) - len(m.group(2))]
        if inner != node.value:
            result.strings_skipped += 1
            continue
        found.append((start + m.end(), inner))
    result.cuda_strings += len(found)
    return found


def cuda_source_of(py_source: str) -> str:
    """All CUDA source string literals of a Python file, joined (empty when there are none)."""
    return "\n".join(text for _, text in cuda_string_literals(py_source, SpanResult()))


def python_file_spans(py_source: str) -> SpanResult:
    """All CUDA-critical spans of a Python (KernelBench-format) file, in its character offsets."""
    result = SpanResult()
    for offset, cuda in cuda_string_literals(py_source, result):
        for s in cuda_source_spans(cuda, result):
            result.spans.append(Span(s.start + offset, s.end + offset, s.kind))
    result.spans.sort(key=lambda s: (s.start, s.end))
    return result


def completion_spans(completion: str) -> SpanResult:
    """Spans of an assistant completion: the fenced Python file inside it, offsets into `completion`."""
    code, offset = code_span(completion)
    result = python_file_spans(code)
    result.spans = [Span(s.start + offset, s.end + offset, s.kind) for s in result.spans]
    return result


def cuda_spans(cuda: str, before: str = "", after: str = "") -> SpanResult:
    """Spans of raw CUDA text (not a Python file: an infill answer, say), in character offsets of `cuda`.

    `before` and `after` are the CUDA source around the text where it goes (the rest of its kernel and
    file): they are parsed with it, so that what depends on context is found (a bounds guard or a
    pointer access is one only inside a kernel). Spans are clipped to `cuda`; those outside it dropped.
    """
    result = SpanResult(cuda_strings=1)
    lo, hi = len(before), len(before) + len(cuda)
    for s in cuda_source_spans(before + cuda + after, result):
        if s.start < hi and s.end > lo:
            result.spans.append(Span(max(s.start, lo) - lo, min(s.end, hi) - lo, s.kind))
    result.spans.sort(key=lambda s: (s.start, s.end))
    return result
