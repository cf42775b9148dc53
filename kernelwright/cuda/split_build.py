"""Split build of a `load_inline` CUDA source: device code without torch headers, host code with the PCH.

A candidate's .cu file mixes kernels with host wrappers that take `torch::Tensor`; nvcc then parses
the torch headers three times (cudafe++, cicc, the host compiler), which costs ~40 s per candidate
while the kernels themselves take well under a second. `split_sources` cuts the file in two:

- a DEVICE translation unit with no torch include: the non-torch #includes, #defines, constants,
  types, `__device__`/`__global__` functions, and per kernel K a C++ launcher
  `void kw_launch_K(dim3, dim3, size_t, cudaStream_t, <K's params>)` that runs `K<<<...>>>`
  unless the exported `kw_skip_own_launches` is set (the verifier's decoy check);
- a HOST source for the C++ side (compiled by g++ with the precompiled `torch/extension.h`): the
  #includes, #defines, constants and types the host code needs, the launcher declarations and the
  host functions with every `K<<<g, b[, s[, st]]>>>(args)` rewritten to `kw_launch_K(g, b, s, st, args)`.

Anything out of scope makes `split_sources` return None ("build as written"): templated kernels or
launches of templates, kernels used other than by a launch (function attributes, occupancy
queries), launches in macros, device symbols or device functions used by host code
(`cudaMemcpyToSymbol`), host functions used by device code, dynamic parallelism, namespaces,
`extern "C"`, mutable globals, `__CUDACC__` tests in host code, a torch API in device code, or any
parse error. `split_reason` says which.

Differences from the as-written build to keep in mind: the host wrappers are compiled by g++ with
torch's main.cpp flags (no -O: -O0, where nvcc compiled them with the candidate's
`extra_cuda_cflags`, usually -O3) and without `__CUDACC__`; kernels and their launches are the same.
`try_split_build` builds in `<build_directory>/split` and returns None on any failure, so the caller
builds as written.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import tree_sitter

from kernelwright.cuda.device_code import TORCH_API, TORCH_INCLUDE
from kernelwright.cuda.spans import cuda_parser

DEVICE_PRELUDE = """\
#include <cstdint>
#include <cstddef>
#include <cmath>
#include <cfloat>
#include <climits>
#include <algorithm>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __attribute__((visibility("default"))) int kw_skip_own_launches = 0;
"""
SKIP_FLAG = "kw_skip_own_launches"  # the verifier's decoy check sets it: every launcher returns at once
HOST_PRELUDE = "#include <cuda_runtime.h>\n"
# Headers only device code needs; the host compiler (g++) cannot always parse them.
DEVICE_ONLY_INCLUDE = re.compile(r"#\s*include\s*[<\"](mma\.h|cooperative_groups|cuda_pipeline|cuda/|cub/|"
                                 r"sm_\d+_intrinsics|crt/|device_functions|cuda_awbarrier)")
DEVICE_QUALIFIERS = ("__device__", "__global__", "__constant__", "__shared__", "__managed__")
IDENT = re.compile(r"[A-Za-z_]\w*")
DEVICE_SPACE = re.compile(r"\b(__device__|__host__|__global__|__CUDA_ARCH__)\b")
CONST = re.compile(r"\b(const|constexpr)\b")


@dataclasses.dataclass(frozen=True)
class Split:
    device: str  # the device translation unit (nvcc, no torch headers)
    host: str  # the host functions with launches rewritten (append to cpp_sources)
    kernels: tuple[str, ...]


class _NotSplittable(Exception):
    pass


def _text(node: tree_sitter.Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _walk(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _declared_name(decl: tree_sitter.Node | None) -> str | None:
    """The identifier a (function/pointer/array/init/reference) declarator declares."""
    while decl is not None:
        if decl.type in ("identifier", "field_identifier"):
            return _text(decl)
        if decl.type in ("qualified_identifier", "operator_name", "destructor_name"):
            return None
        inner = decl.child_by_field_name("declarator")
        if inner is None:
            inner = next((c for c in decl.named_children if c.type.endswith("declarator") or c.type == "identifier"),
                         None)
        decl = inner
    return None


def _fn_of(node: tree_sitter.Node) -> tree_sitter.Node | None:
    if node.type == "function_definition":
        return node
    if node.type == "template_declaration":
        return next((c for c in node.named_children if c.type in ("function_definition", "declaration")), None)
    return None


def _device_body_error(node: tree_sitter.Node) -> bool:
    """The parse error of `node` lies only in the body of a `__global__`/`__device__` function."""
    fn = _fn_of(node)
    if fn is None or fn.type != "function_definition" or _space(fn) == "host":
        return False
    declarator = fn.child_by_field_name("declarator")
    return declarator is not None and not declarator.has_error and not any(
        c.has_error for c in node.children if c is not fn and c.type != "compound_statement") and not any(
        c.has_error for c in fn.children if c.type != "compound_statement")


def _space(node: tree_sitter.Node) -> str:
    """'global', 'device' or 'host' for a function definition or declaration."""
    kinds = {c.type for c in node.children} | {_text(c) for c in node.children if c.type == "type_qualifier"}
    if "__global__" in kinds:
        return "global"
    if "__device__" in kinds:
        return "device"
    return "host"


def _identifiers(node: tree_sitter.Node, skip: set[int] | None = None) -> set[str]:
    out: set[str] = set()
    for n in _walk(node):
        if skip and n.id in skip:
            continue
        if n.type in ("identifier", "type_identifier", "namespace_identifier"):
            out.add(_text(n))
        elif n.type in ("preproc_arg", "ERROR"):
            out.update(IDENT.findall(_text(n)))
    return out


def _params(fn: tree_sitter.Node) -> tuple[str, list[str]]:
    decl = fn.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    if plist is None:
        raise _NotSplittable("kernel without a parameter list")
    names: list[str] = []
    for p in plist.named_children:
        if p.type == "comment":
            continue
        if p.type != "parameter_declaration":
            raise _NotSplittable(f"kernel parameter of kind {p.type}")
        name = _declared_name(p.child_by_field_name("declarator"))
        if not name:
            raise _NotSplittable("unnamed kernel parameter")
        names.append(name)
    params = _text(plist)[1:-1].strip()
    return ("" if params == "void" else params), names


def split_reason(cuda_source: str) -> str | None:
    """Why `cuda_source` is not splittable (None: it is)."""
    try:
        _split(cuda_source)
    except _NotSplittable as exc:
        return str(exc)
    return None


def split_sources(cuda_source: str) -> Split | None:
    """The device TU and the host source of `cuda_source`, or None when it must be built as written."""
    try:
        return _split(cuda_source)
    except _NotSplittable:
        return None


def _split(cuda_source: str) -> Split:  # noqa: C901, PLR0912, PLR0915 - one pass over the top-level items
    data = cuda_source.encode("utf-8")
    root = cuda_parser().parse(data).root_node
    for node in root.named_children:  # tree-sitter misreads e.g. `#pragma unroll` between nested loops:
        if node.has_error and not _device_body_error(node):  # fine inside a device function body (copied as is)
            raise _NotSplittable("parse error")
    if "<<<" not in cuda_source:
        raise _NotSplittable("no kernel launch")
    # (side, node): side is 'both', 'device', 'host', 'kernel', 'devfn', 'hostfn', 'devtype'
    items: list[tuple[str, tree_sitter.Node]] = []
    kernels: dict[str, tree_sitter.Node] = {}
    kernel_protos: set[str] = set()
    dev_names: set[str] = set()  # device functions, device variables, device-only types
    host_fns: set[str] = set()
    for node in root.named_children:
        t, text = node.type, _text(node)
        if t == "comment":
            continue
        if t == "preproc_include":
            if TORCH_INCLUDE.search(text):
                items.append(("host", node))
            elif DEVICE_ONLY_INCLUDE.search(text):
                items.append(("device", node))
            else:
                items.append(("both", node))
        elif t in ("preproc_def", "preproc_function_def", "preproc_call"):
            if "<<<" in text:
                raise _NotSplittable("kernel launch in a macro")
            items.append(("both", node))
        elif t in ("preproc_ifdef", "preproc_if"):
            if any(n.type not in ("preproc_def", "preproc_function_def", "preproc_call", "preproc_include",
                                  "preproc_else", "preproc_elif", "comment", "identifier", "preproc_defined",
                                  "binary_expression", "unary_expression", "number_literal", "parenthesized_expression",
                                  "call_expression", "argument_list", "preproc_arg", "system_lib_string",
                                  "string_literal", "string_content", "escape_sequence")
                   for n in _walk(node) if n.is_named and n is not node):
                raise _NotSplittable("code inside a top-level #if")
            if "<<<" in text or "__CUDACC__" in text or "__CUDA_ARCH__" in text:
                raise _NotSplittable("CUDA-specific top-level #if")
            items.append(("both", node))
        elif t in ("function_definition", "template_declaration"):
            fn = _fn_of(node)
            if fn is None:  # a class template
                if DEVICE_SPACE.search(text):
                    dev_names.update(_type_names(node))
                    items.append(("devtype", node))
                else:
                    items.append(("both", node))
                continue
            space = _space(fn)
            name = _declared_name(fn.child_by_field_name("declarator"))
            if not name:
                raise _NotSplittable("function with a qualified name")
            if space == "global":
                if t == "template_declaration":
                    raise _NotSplittable("template kernel")
                if fn.type != "function_definition":
                    raise _NotSplittable("kernel declaration")
                if name in kernels:
                    raise _NotSplittable("overloaded kernel")
                kernels[name] = fn
                items.append(("kernel", node))
            elif space == "device":
                dev_names.add(name)
                items.append(("devfn", node))
            else:
                host_fns.add(name)
                items.append(("hostfn", node))
        elif t == "declaration":
            fdecl = node.child_by_field_name("declarator")
            space = _space(node)
            names = {nm for d in node.children_by_field_name("declarator") if (nm := _declared_name(d))}
            if fdecl is not None and fdecl.type == "function_declarator":
                if space == "global":
                    kernel_protos.update(names)
                    items.append(("device", node))
                elif space == "device":
                    dev_names.update(names)
                    items.append(("devfn", node))
                else:
                    host_fns.update(names)
                    items.append(("hostfn", node))
            elif any(q in text.split("=")[0] for q in DEVICE_QUALIFIERS):
                dev_names.update(names)
                items.append(("device", node))
            elif CONST.search(text.split("=")[0]):
                items.append(("host" if TORCH_API.search(text) else "both", node))
            else:
                raise _NotSplittable("mutable global variable")
        elif t in ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier", "type_definition",
                   "alias_declaration", "using_declaration"):
            if DEVICE_SPACE.search(text):
                dev_names.update(_type_names(node))
                items.append(("devtype", node))
            elif TORCH_API.search(text) or re.search(r"\bnamespace\s+(torch|at|c10)\b", text):
                items.append(("host", node))
            else:
                items.append(("both", node))
        else:
            raise _NotSplittable(f"top-level {t}")
    if not kernels:
        raise _NotSplittable("no kernel definition")
    if kernel_protos - set(kernels):
        raise _NotSplittable("kernel declared but not defined")

    # host code: launches rewritten, every other use of device symbols refused
    host_items = [n for side, n in items if side in ("both", "host", "hostfn")]
    edits: dict[int, list[tuple[int, int, str]]] = {}
    launched: set[int] = set()
    for node in (n for side, n in items if side == "hostfn"):
        for n in _walk(node):
            if n.type != "call_expression" or not any(c.type == "kernel_call_syntax" for c in n.children):
                continue
            callee = n.child_by_field_name("function")
            if callee is None or callee.type != "identifier" or _text(callee) not in kernels:
                raise _NotSplittable("launch of a template or unknown kernel")
            name = _text(callee)
            config = [_text(c) for c in next(c for c in n.children if c.type == "kernel_call_syntax").named_children
                      if c.type != "comment"]
            if not 2 <= len(config) <= 4:
                raise _NotSplittable("launch configuration of unexpected size")
            config += ["0"] * (4 - len(config))
            args_node = n.child_by_field_name("arguments")
            args = [_text(a) for a in args_node.named_children if a.type != "comment"] if args_node else []
            if len(args) != len(_params(kernels[name])[1]):
                raise _NotSplittable("launch argument count differs from the kernel's parameters")
            call = f"kw_launch_{name}({', '.join(config + args)})"
            edits.setdefault(node.id, []).append((n.start_byte - node.start_byte, n.end_byte - node.start_byte, call))
            launched.add(callee.id)
    if not launched:
        raise _NotSplittable("no launch in host code")
    host_uses: set[str] = set()
    for n in host_items:
        host_uses |= _identifiers(n, launched)
        if n.type != "preproc_include" and re.search(r"\b(__CUDACC__|__CUDA_ARCH__|__device__|__global__)\b", _text(n)):
            raise _NotSplittable("CUDA-only construct in host code")
    if host_uses & set(kernels):
        raise _NotSplittable("kernel used other than by a launch")
    if host_uses & dev_names:
        raise _NotSplittable("host code uses a device symbol")

    device_items = [(side, n) for side, n in items if side in ("both", "device", "devfn", "devtype", "kernel")]
    device_uses: set[str] = set()
    for side, n in device_items:
        device_uses |= _identifiers(n)
        if side != "both" and "<<<" in _text(n):
            raise _NotSplittable("dynamic parallelism")
        if side in ("devfn", "devtype", "kernel", "device") and TORCH_API.search(_text(n)):
            raise _NotSplittable("torch API in device code")
    if device_uses & host_fns:
        raise _NotSplittable("device code uses a host function")

    launchers, decls = {}, {}
    for name, fn in kernels.items():
        params, pnames = _params(fn)
        head = f"void kw_launch_{name}(dim3 kw_grid, dim3 kw_block, size_t kw_shmem, cudaStream_t kw_stream"
        head += f", {params})" if params else ")"
        launchers[name] = (f"{head} {{\n    if ({SKIP_FLAG}) return;\n"
                           f"    {name}<<<kw_grid, kw_block, kw_shmem, kw_stream>>>({', '.join(pnames)});\n}}")
        decls[name] = head + ";"
        if DEVICE_SPACE.search(params) or set(IDENT.findall(params)) & dev_names:
            raise _NotSplittable("kernel parameter of a device-only type")

    device = [DEVICE_PRELUDE]
    host = [HOST_PRELUDE]
    for side, node in items:
        text = _text(node)
        if node.next_sibling is not None and node.next_sibling.type == ";":  # `struct S {...}` `;`
            text += ";"
        if side in ("both", "device", "devfn", "devtype", "kernel"):
            device.append(text)
        if side == "kernel":
            name = _declared_name(_fn_of(node).child_by_field_name("declarator"))  # type: ignore[union-attr]
            assert name is not None
            device.append(launchers[name])
            host.append(decls[name])
        if side in ("both", "host"):
            host.append(text)
        elif side == "hostfn":
            out = text.encode("utf-8")
            for s, e, call in sorted(edits.get(node.id, []), reverse=True):
                out = out[:s] + call.encode("utf-8") + out[e:]
            host.append(out.decode("utf-8"))
    return Split(device="\n".join(device) + "\n", host="\n".join(host) + "\n", kernels=tuple(kernels))


def _type_names(node: tree_sitter.Node) -> set[str]:
    out = set()
    for n in _walk(node):
        if n.type in ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier"):
            name = n.child_by_field_name("name")
            if name is not None:
                out.add(_text(name))
        elif n.type in ("type_definition", "alias_declaration"):
            out.update(_text(c) for c in n.children_by_field_name("declarator") if c.type == "type_identifier")
            name = n.child_by_field_name("name")
            if name is not None:
                out.add(_text(name))
    return out


# ---------------------------------------------------------------- load_inline arguments

_HOST_FLAG = re.compile(r"^(-D|-U|-I|-include|--define-macro|--undefine-macro|--include-path|-isystem)")


def split_arguments(cpp_sources: Any, cuda_sources: Any, kw: dict[str, Any]) -> tuple[list[str], list[str]] | str:
    """(cpp_sources, cuda_sources) for a split build with `no_implicit_headers=True`, or why not."""
    if kw.get("no_implicit_headers") or kw.get("with_cuda") is False or kw.get("sycl_sources"):
        return "unsupported load_inline options"
    if any(_HOST_FLAG.match(str(f)) for f in kw.get("extra_cuda_cflags") or []):
        return "preprocessor flags only for nvcc"
    cpp = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources or [])
    cuda = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources or [])
    if len(cuda) != 1 or not all(isinstance(s, str) for s in cpp + cuda):
        return "not exactly one CUDA source"
    # load_inline would prepend torch/types.h, cuda.h and cuda_runtime.h to the .cu file
    source = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" + cuda[0]
    try:
        split = _split(source)
    except _NotSplittable as exc:
        return str(exc)
    cpp_defs = _defined_names("\n".join(cpp))
    if cpp_defs & _defined_names(split.host):
        return "cpp_sources defines a name the host code defines"
    return ["#include <torch/extension.h>", *cpp, split.host], [split.device]


def _defined_names(source: str) -> set[str]:
    root = cuda_parser().parse(source.encode("utf-8")).root_node
    out: set[str] = set()
    for node in root.named_children:
        fn = _fn_of(node)
        if fn is not None and fn.type == "function_definition":
            out.add(_declared_name(fn.child_by_field_name("declarator")) or "")
        elif node.type in ("struct_specifier", "class_specifier", "type_definition", "alias_declaration"):
            out |= _type_names(node)
        elif node.type == "declaration" and "=" in _text(node):
            out |= {nm for d in node.children_by_field_name("declarator") if (nm := _declared_name(d))}
    return out - {""}


def try_split_build(original: Callable[..., Any], name: str, cpp_sources: Any, cuda_sources: Any,
                    kw: dict[str, Any]) -> Any:
    """The module built split, or None (not splittable, or the split build failed: build as written)."""
    args = split_arguments(cpp_sources, cuda_sources, kw)
    if isinstance(args, str):
        return None
    cpp, cuda = args
    kw = {**kw, "no_implicit_headers": True}
    if kw.get("build_directory"):  # its own folder: the as-written build keeps its cached objects
        kw["build_directory"] = str(Path(kw["build_directory"]) / "split")
        Path(kw["build_directory"]).mkdir(parents=True, exist_ok=True)
    try:
        return original(name, cpp, cuda, **kw)
    except Exception:  # noqa: BLE001 - any failure of the split build: the caller builds as written
        return None


def split_load_inline(original: Callable[..., Any]) -> Callable[..., Any]:
    """`load_inline` that tries the split build first and falls back to `original` as written."""

    def load_inline(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> Any:
        module = try_split_build(original, name, cpp_sources, cuda_sources, kw)
        return module if module is not None else original(name, cpp_sources, cuda_sources, **kw)

    return load_inline


class _Captured(Exception):
    pass


def capture_load_inline(path: Path) -> dict[str, Any]:
    """The arguments of the first `load_inline` call of a module file ({} if there is none): the file
    is run with a `load_inline` that records them and stops it there (nothing is built). Keys:
    name, cpp, cuda (the sources as given) and kw (the other keyword arguments)."""
    import torch.utils.cpp_extension as ext

    got: dict[str, Any] = {}

    def fake(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> Any:
        got.update(name=name, cpp=cpp_sources, cuda=cuda_sources, kw=kw)
        raise _Captured

    saved = ext.load_inline
    ext.load_inline = fake  # type: ignore[assignment]
    try:
        exec(compile(path.read_text(), str(path), "exec"), {"__name__": "kw_capture"})  # noqa: S102
    except _Captured:
        pass
    finally:
        ext.load_inline = saved
    return got
