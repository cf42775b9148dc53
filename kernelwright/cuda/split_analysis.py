"""Analysis of a CUDA source for the split build: each top-level item's side, and the launches to rewrite.

`analyse` parses the source with tree-sitter and sorts its top-level items: includes, #defines,
constants and types go to both sides (torch ones to the host only, device-only headers to the
device only), kernels and `__device__` functions and variables to the device, host functions to
the host, where every `K<<<g, b[, s[, st]]>>>(args)` becomes a call of K's launcher
`kw_launch_K(g, b, s, st, args)` (`split_codegen` writes the launchers and the two sources).

Anything out of scope raises `NotSplittable` ("build as written"): templated kernels or launches
of templates, kernels used other than by a launch (function attributes, occupancy queries),
launches in macros, device symbols or device functions used by host code (`cudaMemcpyToSymbol`),
host functions used by device code, dynamic parallelism, namespaces, `extern "C"`, mutable
globals, `__CUDACC__` tests in host code, a torch API in device code, or any parse error. Its
message says which.
"""

from __future__ import annotations

import dataclasses
import re

import tree_sitter

from kernelwright.cuda.device_code import TORCH_API, TORCH_INCLUDE
from kernelwright.cuda.spans import cuda_parser
from kernelwright.cuda.split_syntax import (
    DEVICE_SPACE,
    NotSplittable,
    declared_name,
    device_body_error,
    fn_of,
    identifiers,
    kernel_params,
    node_text,
    space_of,
    type_names,
    walk,
)

# Headers only device code needs; the host compiler (g++) cannot always parse them.
DEVICE_ONLY_INCLUDE = re.compile(r"#\s*include\s*[<\"](mma\.h|cooperative_groups|cuda_pipeline|cuda/|cub/|"
                                 r"sm_\d+_intrinsics|crt/|device_functions|cuda_awbarrier)")
DEVICE_QUALIFIERS = ("__device__", "__global__", "__constant__", "__shared__", "__managed__")
CONST = re.compile(r"\b(const|constexpr)\b")
PREPROC_DEFS = ("preproc_def", "preproc_function_def", "preproc_call")
# what a top-level #if may hold: preprocessor lines and their expressions, no code
CONDITIONAL_PARTS = ("preproc_def", "preproc_function_def", "preproc_call", "preproc_include", "preproc_else",
                     "preproc_elif", "comment", "identifier", "preproc_defined", "binary_expression",
                     "unary_expression", "number_literal", "parenthesized_expression", "call_expression",
                     "argument_list", "preproc_arg", "system_lib_string", "string_literal", "string_content",
                     "escape_sequence")
TYPE_ITEMS = ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier", "type_definition",
              "alias_declaration", "using_declaration")
DEVICE_SIDES = ("both", "device", "devfn", "devtype", "kernel")  # the items the device TU holds


@dataclasses.dataclass
class Analysis:
    """The top-level items of a splittable source by side, its kernels and the host code's launch rewrites."""

    # (side, node): side is 'both', 'device', 'host', 'kernel', 'devfn', 'hostfn', 'devtype'
    items: list[tuple[str, tree_sitter.Node]] = dataclasses.field(default_factory=list)
    kernels: dict[str, tree_sitter.Node] = dataclasses.field(default_factory=dict)
    kernel_protos: set[str] = dataclasses.field(default_factory=set)
    dev_names: set[str] = dataclasses.field(default_factory=set)  # device functions and variables, device-only types
    host_fns: set[str] = dataclasses.field(default_factory=set)
    # per host function node id: (start, end, launcher call), byte offsets within the function's text
    edits: dict[int, list[tuple[int, int, str]]] = dataclasses.field(default_factory=dict)


def analyse(cuda_source: str) -> Analysis:
    """The items of `cuda_source` by side, with the launches of its host code rewritten; raises
    `NotSplittable` when it must be built as written."""
    root = _parse(cuda_source)
    found = Analysis()
    for node in root.named_children:
        _classify(node, found)
    if not found.kernels:
        raise NotSplittable("no kernel definition")
    if found.kernel_protos - set(found.kernels):
        raise NotSplittable("kernel declared but not defined")
    launched = _rewrite_launches(found)
    _check_host_code(found, launched)
    _check_device_code(found)
    return found


def _parse(cuda_source: str) -> tree_sitter.Node:
    data = cuda_source.encode("utf-8")
    root = cuda_parser().parse(data).root_node
    for node in root.named_children:  # tree-sitter misreads e.g. `#pragma unroll` between nested loops:
        if node.has_error and not device_body_error(node):  # fine inside a device function body (copied as is)
            raise NotSplittable("parse error")
    if "<<<" not in cuda_source:
        raise NotSplittable("no kernel launch")
    return root


def _classify(node: tree_sitter.Node, found: Analysis) -> None:
    t, text = node.type, node_text(node)
    if t == "comment":
        return
    if t == "preproc_include":
        if TORCH_INCLUDE.search(text):
            found.items.append(("host", node))
        elif DEVICE_ONLY_INCLUDE.search(text):
            found.items.append(("device", node))
        else:
            found.items.append(("both", node))
    elif t in PREPROC_DEFS:
        if "<<<" in text:
            raise NotSplittable("kernel launch in a macro")
        found.items.append(("both", node))
    elif t in ("preproc_ifdef", "preproc_if"):
        if any(n.type not in CONDITIONAL_PARTS for n in walk(node) if n.is_named and n is not node):
            raise NotSplittable("code inside a top-level #if")
        if "<<<" in text or "__CUDACC__" in text or "__CUDA_ARCH__" in text:
            raise NotSplittable("CUDA-specific top-level #if")
        found.items.append(("both", node))
    elif t in ("function_definition", "template_declaration"):
        _classify_function(node, text, found)
    elif t == "declaration":
        _classify_declaration(node, text, found)
    elif t in TYPE_ITEMS:
        if DEVICE_SPACE.search(text):
            found.dev_names.update(type_names(node))
            found.items.append(("devtype", node))
        elif TORCH_API.search(text) or re.search(r"\bnamespace\s+(torch|at|c10)\b", text):
            found.items.append(("host", node))
        else:
            found.items.append(("both", node))
    else:
        raise NotSplittable(f"top-level {t}")


def _classify_function(node: tree_sitter.Node, text: str, found: Analysis) -> None:
    """A function definition or a template (of a function or of a class)."""
    fn = fn_of(node)
    if fn is None:  # a class template
        if DEVICE_SPACE.search(text):
            found.dev_names.update(type_names(node))
            found.items.append(("devtype", node))
        else:
            found.items.append(("both", node))
        return
    space = space_of(fn)
    name = declared_name(fn.child_by_field_name("declarator"))
    if not name:
        raise NotSplittable("function with a qualified name")
    if space == "global":
        if node.type == "template_declaration":
            raise NotSplittable("template kernel")
        if fn.type != "function_definition":
            raise NotSplittable("kernel declaration")
        if name in found.kernels:
            raise NotSplittable("overloaded kernel")
        found.kernels[name] = fn
        found.items.append(("kernel", node))
    elif space == "device":
        found.dev_names.add(name)
        found.items.append(("devfn", node))
    else:
        found.host_fns.add(name)
        found.items.append(("hostfn", node))


def _classify_declaration(node: tree_sitter.Node, text: str, found: Analysis) -> None:
    """A function prototype or a global variable."""
    fdecl = node.child_by_field_name("declarator")
    space = space_of(node)
    names = {nm for d in node.children_by_field_name("declarator") if (nm := declared_name(d))}
    if fdecl is not None and fdecl.type == "function_declarator":
        if space == "global":
            found.kernel_protos.update(names)
            found.items.append(("device", node))
        elif space == "device":
            found.dev_names.update(names)
            found.items.append(("devfn", node))
        else:
            found.host_fns.update(names)
            found.items.append(("hostfn", node))
    elif any(q in text.split("=")[0] for q in DEVICE_QUALIFIERS):
        found.dev_names.update(names)
        found.items.append(("device", node))
    elif CONST.search(text.split("=")[0]):
        found.items.append(("host" if TORCH_API.search(text) else "both", node))
    else:
        raise NotSplittable("mutable global variable")


def _rewrite_launches(found: Analysis) -> set[int]:
    """Record in `found.edits` each launch of the host functions as its launcher call; the ids of the
    launched kernels' name nodes."""
    launched: set[int] = set()
    for node in (n for side, n in found.items if side == "hostfn"):
        for n in walk(node):
            if n.type != "call_expression" or not any(c.type == "kernel_call_syntax" for c in n.children):
                continue
            callee = n.child_by_field_name("function")
            if callee is None or callee.type != "identifier" or node_text(callee) not in found.kernels:
                raise NotSplittable("launch of a template or unknown kernel")
            call = _launcher_call(n, node_text(callee), found.kernels[node_text(callee)])
            found.edits.setdefault(node.id, []).append((n.start_byte - node.start_byte, n.end_byte - node.start_byte,
                                                        call))
            launched.add(callee.id)
    if not launched:
        raise NotSplittable("no launch in host code")
    return launched


def _launcher_call(launch: tree_sitter.Node, name: str, kernel: tree_sitter.Node) -> str:
    """`kw_launch_K(g, b, s, st, args)` for the launch `K<<<g, b[, s[, st]]>>>(args)`."""
    config = [node_text(c) for c in next(c for c in launch.children if c.type == "kernel_call_syntax").named_children
              if c.type != "comment"]
    if not 2 <= len(config) <= 4:
        raise NotSplittable("launch configuration of unexpected size")
    config += ["0"] * (4 - len(config))
    args_node = launch.child_by_field_name("arguments")
    args = [node_text(a) for a in args_node.named_children if a.type != "comment"] if args_node else []
    if len(args) != len(kernel_params(kernel)[1]):
        raise NotSplittable("launch argument count differs from the kernel's parameters")
    return f"kw_launch_{name}({', '.join(config + args)})"


def _check_host_code(found: Analysis, launched: set[int]) -> None:
    """Host code may use the kernels only by the launches rewritten, and no device symbol."""
    host_uses: set[str] = set()
    for n in (n for side, n in found.items if side in ("both", "host", "hostfn")):
        host_uses |= identifiers(n, launched)
        if n.type != "preproc_include" and re.search(r"\b(__CUDACC__|__CUDA_ARCH__|__device__|__global__)\b",
                                                     node_text(n)):
            raise NotSplittable("CUDA-only construct in host code")
    if host_uses & set(found.kernels):
        raise NotSplittable("kernel used other than by a launch")
    if host_uses & found.dev_names:
        raise NotSplittable("host code uses a device symbol")


def _check_device_code(found: Analysis) -> None:
    """Device code launches nothing, calls no torch API and no host function."""
    device_uses: set[str] = set()
    for side, n in ((side, n) for side, n in found.items if side in DEVICE_SIDES):
        device_uses |= identifiers(n)
        if side != "both" and "<<<" in node_text(n):
            raise NotSplittable("dynamic parallelism")
        if side in ("devfn", "devtype", "kernel", "device") and TORCH_API.search(node_text(n)):
            raise NotSplittable("torch API in device code")
    if device_uses & found.host_fns:
        raise NotSplittable("device code uses a host function")
