"""Line-preserving device and host views of a `load_inline` CUDA source, for the compile check.

Both views keep every line of the source where it was, so a compiler's line numbers are the
source's (each view is compiled behind a `#line 1 "<name>"` marker):

- `device_view`: what NVRTC compiles, chosen like `device_code.device_source` (kernels, device
  functions, types, constants; no torch glue), the dropped parts blanked to their newlines;
- `host_view`: what the host C++ compiler checks: the source with the bodies of `__global__` and
  `__device__` functions (not `__host__ __device__` ones) blanked, and every kernel launch
  `k<<<grid, block[, shmem[, stream]]>>>(args)` rewritten to the plain call
  `(::kw_launch_config(grid, block, ...), k)(args)`, so the configuration and the arguments are
  type-checked against the kernel's declaration. Launches inside `#define` bodies are rewritten
  the same way, by pattern.
"""

from __future__ import annotations

import re

import tree_sitter

from kernelwright.cuda.device_code import keeps_for_device
from kernelwright.cuda.spans import cuda_parser, walk

HOST_PRELUDE = "template <class... KwT> inline void kw_launch_config(const KwT&...) {}\n"
_MACRO_LAUNCH = re.compile(r"([A-Za-z_]\w*(?:\s*<[^<>;()]*>)?)\s*<<<(.*?)>>>", re.DOTALL)


def _blank(data: bytes) -> bytes:
    """Only the newlines of `data` (line numbers after it stay where they were)."""
    return b"\n" * data.count(b"\n")


def _apply(data: bytes, edits: list[tuple[int, int, bytes]]) -> str:
    out: list[bytes] = []
    pos = 0
    for start, end, repl in sorted(edits):
        if start < pos:  # nested in an edit already made
            continue
        out += [data[pos:start], repl]
        pos = end
    out.append(data[pos:])
    return b"".join(out).decode("utf-8", "replace")


def device_view(cuda_source: str) -> str:
    """The device half of `cuda_source`, every line in place (see `device_code.device_source`)."""
    data = cuda_source.encode("utf-8")
    root = cuda_parser().parse(data).root_node
    edits = [(c.start_byte, c.end_byte, _blank(data[c.start_byte:c.end_byte]))
             for c in root.children if not keeps_for_device(c)]
    return _apply(data, edits)


def _device_only(fn: tree_sitter.Node) -> bool:
    kinds = {c.type for c in fn.children}
    return bool(kinds & {"__global__", "__device__"}) and "__host__" not in kinds


def _launch_edit(data: bytes, call: tree_sitter.Node) -> tuple[int, int, bytes] | None:
    config = next((c for c in call.children if c.type == "kernel_call_syntax"), None)
    callee = call.child_by_field_name("function")
    if config is None or callee is None:
        return None
    inner = data[config.start_byte:config.end_byte].strip()
    if not (inner.startswith(b"<<<") and inner.endswith(b">>>")):
        return None
    name = data[callee.start_byte:callee.end_byte]
    repl = b"(::kw_launch_config(" + inner[3:-3] + b"), " + name + b")"
    return callee.start_byte, config.end_byte, repl


def _macro_edit(data: bytes, node: tree_sitter.Node) -> tuple[int, int, bytes] | None:
    body = node.child_by_field_name("value")
    if body is None or b"<<<" not in data[body.start_byte:body.end_byte]:
        return None
    text = data[body.start_byte:body.end_byte].decode("utf-8", "replace")
    new = _MACRO_LAUNCH.sub(lambda m: f"(::kw_launch_config({m.group(2)}), {m.group(1)})", text)
    return body.start_byte, body.end_byte, new.encode("utf-8")


def host_view(cuda_source: str) -> str:
    """The host half of `cuda_source` for a C++ compiler, every line in place (module docstring)."""
    data = cuda_source.encode("utf-8")
    root = cuda_parser().parse(data).root_node
    bodies: list[tuple[int, int, bytes]] = []
    launches: list[tuple[int, int, bytes]] = []
    for node in walk(root):
        if node.type == "function_definition" and _device_only(node):
            body = node.child_by_field_name("body")
            if body is not None:
                blank = _blank(data[body.start_byte:body.end_byte])
                bodies.append((body.start_byte, body.end_byte, b"{ __builtin_unreachable();" + blank + b"}"))
        elif node.type == "call_expression":
            edit = _launch_edit(data, node)
            if edit is not None:
                launches.append(edit)
        elif node.type in ("preproc_def", "preproc_function_def"):
            edit = _macro_edit(data, node)
            if edit is not None:
                launches.append(edit)
    inside = [(s, e) for s, e, _ in bodies]
    outside = [ed for ed in launches if not any(s <= ed[0] < e for s, e in inside)]
    return _apply(data, bodies + outside)
