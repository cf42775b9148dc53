"""Device code of a `load_inline` CUDA source, for NVRTC: the host half stripped with tree-sitter.

Kept: preprocessor directives (but torch/ATen/c10/pybind11 includes), `__global__`/`__device__`
functions (templated or not), type definitions, `__constant__`/`__device__` variables and other
declarations that do not mention the torch API. Dropped: host functions (the launchers that take
`torch::Tensor`), torch includes and `using` declarations of torch namespaces. The device code
always starts with `kw_torch_prelude.h`, the C and CUDA headers torch makes visible to kernels:
load_inline puts `#include <torch/types.h>` before every CUDA source, so a source that includes
nothing itself still sees them under nvcc (`INFINITY`, `FLT_MAX`, `__half`).
"""

from __future__ import annotations

import re

import tree_sitter

from kernelwright.cuda.spans import cuda_parser, is_device_function

TORCH_INCLUDE = re.compile(r"#\s*include\s*[<\"](torch/|ATen/|c10/|pybind11/|Python\.h)")
TORCH_API = re.compile(r"\b(torch|at|c10|pybind11|py)::|\bTORCH_|\bAT_DISPATCH")


def keeps_for_device(node: tree_sitter.Node) -> bool:
    """Whether a top-level node of a CUDA source belongs in its device half (see the module doc)."""
    text = node.text.decode("utf-8", "replace") if node.text else ""
    t = node.type
    if t == "preproc_include":
        return not TORCH_INCLUDE.search(text)
    if t == "function_definition":
        return is_device_function(node)
    if t == "template_declaration":
        fns = [c for c in node.named_children if c.type == "function_definition"]
        return all(is_device_function(f) for f in fns) and (bool(fns) or not TORCH_API.search(text))
    if t in ("declaration", "using_declaration", "alias_declaration", "namespace_definition", "expression_statement"):
        return not TORCH_API.search(text) and "namespace torch" not in text
    if t in ("preproc_ifdef", "preproc_if"):
        return not TORCH_API.search(text)
    return True


def device_source(cuda_source: str) -> str:
    """The parts of `cuda_source` NVRTC can compile: everything but the host-side torch glue."""
    data = cuda_source.encode("utf-8")
    root = cuda_parser().parse(data).root_node
    kept = [data[c.start_byte:c.end_byte].decode("utf-8", "replace") for c in root.children if keeps_for_device(c)]
    return "\n".join(["#include <kw_torch_prelude.h>", *kept]) + "\n"
