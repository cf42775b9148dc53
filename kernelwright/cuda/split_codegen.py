"""The two sources of a split build: a device translation unit without torch headers, and host code.

A candidate's .cu file mixes kernels with host wrappers that take `torch::Tensor`; nvcc then parses
the torch headers three times (cudafe++, cicc, the host compiler), which costs ~40 s per candidate
while the kernels themselves take well under a second. `split_sources` cuts the file in two
(`split_analysis.analyse` sorts its items and rewrites its launches):

- a DEVICE translation unit with no torch include: the non-torch #includes, #defines, constants,
  types, `__device__`/`__global__` functions, and per kernel K a C++ launcher
  `void kw_launch_K(dim3, dim3, size_t, cudaStream_t, <K's params>)` that runs `K<<<...>>>`
  unless the exported `kw_skip_own_launches` is set (the verifier's decoy check);
- a HOST source for the C++ side (compiled by g++ with the precompiled `torch/extension.h`): the
  #includes, #defines, constants and types the host code needs, the launcher declarations and the
  host functions with every `K<<<g, b[, s[, st]]>>>(args)` rewritten to `kw_launch_K(g, b, s, st, args)`.

A source out of scope makes `split_sources` return None ("build as written"); `split_reason` says
why (`split_analysis` lists what is out of scope).
"""

from __future__ import annotations

import dataclasses

from kernelwright.cuda.split_analysis import DEVICE_SIDES, Analysis, analyse
from kernelwright.cuda.split_syntax import (
    DEVICE_SPACE,
    IDENT,
    NotSplittable,
    declared_name,
    fn_of,
    kernel_params,
    node_text,
)

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


@dataclasses.dataclass(frozen=True)
class Split:
    device: str  # the device translation unit (nvcc, no torch headers)
    host: str  # the host functions with launches rewritten (append to cpp_sources)
    kernels: tuple[str, ...]


def split_reason(cuda_source: str) -> str | None:
    """Why `cuda_source` is not splittable (None: it is)."""
    try:
        make_split(cuda_source)
    except NotSplittable as exc:
        return str(exc)
    return None


def split_sources(cuda_source: str) -> Split | None:
    """The device TU and the host source of `cuda_source`, or None when it must be built as written."""
    try:
        return make_split(cuda_source)
    except NotSplittable:
        return None


def make_split(cuda_source: str) -> Split:
    """The device TU and the host source of `cuda_source`; raises `NotSplittable` when out of scope."""
    found = analyse(cuda_source)
    launchers, decls = _launchers(found)
    return _assemble(found, launchers, decls)


def _launchers(found: Analysis) -> tuple[dict[str, str], dict[str, str]]:
    """Per kernel, its launcher's definition (device TU) and declaration (host source)."""
    launchers, decls = {}, {}
    for name, fn in found.kernels.items():
        params, pnames = kernel_params(fn)
        head = f"void kw_launch_{name}(dim3 kw_grid, dim3 kw_block, size_t kw_shmem, cudaStream_t kw_stream"
        head += f", {params})" if params else ")"
        launchers[name] = (f"{head} {{\n    if ({SKIP_FLAG}) return;\n"
                           f"    {name}<<<kw_grid, kw_block, kw_shmem, kw_stream>>>({', '.join(pnames)});\n}}")
        decls[name] = head + ";"
        if DEVICE_SPACE.search(params) or set(IDENT.findall(params)) & found.dev_names:
            raise NotSplittable("kernel parameter of a device-only type")
    return launchers, decls


def _assemble(found: Analysis, launchers: dict[str, str], decls: dict[str, str]) -> Split:
    """The items in source order, each on its side(s), a kernel followed by its launcher."""
    device = [DEVICE_PRELUDE]
    host = [HOST_PRELUDE]
    for side, node in found.items:
        text = node_text(node)
        if node.next_sibling is not None and node.next_sibling.type == ";":  # `struct S {...}` `;`
            text += ";"
        if side in DEVICE_SIDES:
            device.append(text)
        if side == "kernel":
            name = declared_name(fn_of(node).child_by_field_name("declarator"))  # type: ignore[union-attr]
            assert name is not None
            device.append(launchers[name])
            host.append(decls[name])
        if side in ("both", "host"):
            host.append(text)
        elif side == "hostfn":
            out = text.encode("utf-8")
            for s, e, call in sorted(found.edits.get(node.id, []), reverse=True):
                out = out[:s] + call.encode("utf-8") + out[e:]
            host.append(out.decode("utf-8"))
    return Split(device="\n".join(device) + "\n", host="\n".join(host) + "\n", kernels=tuple(found.kernels))
