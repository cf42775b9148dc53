"""The split build with torch's `load_inline`: device code without torch headers, host code with the PCH.

`split_load_inline` wraps `load_inline`: `try_split_build` builds a candidate's single CUDA source
as the two sources of `split_codegen` (a device translation unit for nvcc, with no torch header,
and host code appended to `cpp_sources`, compiled by g++ with the precompiled `torch/extension.h`)
and the wrapper falls back to the build as written when that fails. `split_arguments` gives the
split build's `load_inline` sources, or why the call is not splittable; `capture_load_inline`
records the `load_inline` arguments of a module file without building anything.

Differences from the as-written build to keep in mind: the host wrappers are compiled by g++ with
torch's main.cpp flags (no -O: -O0, where nvcc compiled them with the candidate's
`extra_cuda_cflags`, usually -O3) and without `__CUDACC__`; kernels and their launches are the same.
`try_split_build` builds in `<build_directory>/split` and returns None on any failure, so the caller
builds as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kernelwright.cuda.host_bindings import bound_functions, shim
from kernelwright.cuda.slim_header import BARE_ENOUGH, host_sources
from kernelwright.cuda.spans import cuda_parser
from kernelwright.cuda.split_codegen import make_split
from kernelwright.cuda.split_syntax import NotSplittable, declared_name, fn_of, node_text, type_names

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
        split = make_split(source)
    except NotSplittable as exc:
        return str(exc)
    cpp_defs = _defined_names("\n".join(cpp))
    if cpp_defs & _defined_names(split.host):
        return "cpp_sources defines a name the host code defines"
    return ["#include <torch/extension.h>", *cpp, split.host], [split.device]


def _defined_names(source: str) -> set[str]:
    root = cuda_parser().parse(source.encode("utf-8")).root_node
    out: set[str] = set()
    for node in root.named_children:
        fn = fn_of(node)
        if fn is not None and fn.type == "function_definition":
            out.add(declared_name(fn.child_by_field_name("declarator")) or "")
        elif node.type in ("struct_specifier", "class_specifier", "type_definition", "alias_declaration"):
            out |= type_names(node)
        elif node.type == "declaration" and "=" in node_text(node):
            out |= {nm for d in node.children_by_field_name("declarator") if (nm := declared_name(d))}
    return out - {""}


def try_split_build(original: Callable[..., Any], name: str, cpp_sources: Any, cuda_sources: Any,
                    kw: dict[str, Any], slim_header: str | None = None,
                    bare: tuple[str, str] | None = None) -> tuple[Any, str] | None:
    """(the module built split, how: `split_bare`, `split_slim` or `split`), or None (not splittable,
    or the split build failed: build as written). The host file is built after the smallest header
    that serves it, each failure falling back to the next: with `bare` (slim_header.bare_ready(): the
    bare header and the generic bindings object) and `functions` the generic bindings convert, after
    torch/types.h alone with no pybind11 in the file (host_bindings.py); with `slim_header`, after
    torch/types.h and torch/python.h; last after torch's own extension.h."""
    args = split_arguments(cpp_sources, cuda_sources, kw)
    if isinstance(args, str):
        return None
    cpp, cuda = args
    # its own folder: the as-written build keeps its cached objects
    kw = _in_subfolder({**kw, "no_implicit_headers": True}, "split")
    for sources, attempt_kw, how in _attempts(cpp, kw, slim_header, bare):
        try:
            return original(name, sources, cuda, **attempt_kw), how
        except Exception:  # noqa: BLE001 - this header was not enough: the next one (after the last: as written)
            pass
    return None


def _attempts(cpp: list[str], kw: dict[str, Any], slim_header: str | None, bare: tuple[str, str] | None
              ) -> Iterator[tuple[list[str], dict[str, Any], str]]:
    """The split build's host sources, `load_inline` arguments and name, smallest header first; each
    made only when the one before it failed. The smaller headers build in sub-folders of their own
    (ninja sees other flags)."""
    if bare is not None and (bare_build := bare_arguments(cpp, kw, bare)) is not None:
        yield bare_build[0], _in_subfolder(bare_build[1], "bare"), "split_bare"
    if slim_header and (slim_cpp := host_sources(cpp, slim_header)) is not None:
        yield slim_cpp, _in_subfolder({**kw, "use_pch": False}, "slim"), "split_slim"
    yield cpp, kw, "split"


def bare_arguments(cpp: list[str], kw: dict[str, Any], bare: tuple[str, str]
                   ) -> tuple[list[str], dict[str, Any]] | None:
    """The host sources and `load_inline` arguments of the bare build (the generic bindings linked
    in, none written into the file), or None when the file or its functions are out of its scope."""
    ldflags = kw.get("extra_ldflags") or []
    if not isinstance(ldflags, (list, tuple)):
        return None
    bound = bound_functions(cpp, kw.get("functions"))
    if isinstance(bound, str):
        return None
    sources = host_sources(cpp, bare[0], BARE_ENOUGH)
    if sources is None:
        return None
    return [*sources, shim(bound)], {**kw, "use_pch": False, "functions": None,
                                     "extra_ldflags": [*ldflags, bare[1]]}


def _in_subfolder(kw: dict[str, Any], sub: str) -> dict[str, Any]:
    """`kw` (load_inline's keyword arguments, a copy the caller owns) building in `<build_directory>/sub`,
    made; unchanged without a build_directory."""
    if kw.get("build_directory"):
        kw["build_directory"] = str(Path(kw["build_directory"]) / sub)
        Path(kw["build_directory"]).mkdir(parents=True, exist_ok=True)
    return kw


def split_load_inline(original: Callable[..., Any]) -> Callable[..., Any]:
    """`load_inline` that tries the split build first and falls back to `original` as written."""

    def load_inline(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> Any:
        built = try_split_build(original, name, cpp_sources, cuda_sources, kw)
        return built[0] if built is not None else original(name, cpp_sources, cuda_sources, **kw)

    return load_inline


class _Captured(Exception):
    pass


def capture_load_inline(path: Path) -> dict[str, Any]:
    """The arguments of the first `load_inline` call of a module file ({} if there is none): the file
    is run with a `load_inline` that records them and stops it there (nothing is built). Keys:
    name, cpp, cuda (the sources as given) and kw (the other keyword arguments)."""
    return capture_load_inline_source(path.read_text(), str(path))


def capture_load_inline_source(source: str, filename: str = "<source>") -> dict[str, Any]:
    """`capture_load_inline` of a module's source text."""
    import torch.utils.cpp_extension as ext

    got: dict[str, Any] = {}

    def fake(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> Any:
        got.update(name=name, cpp=cpp_sources, cuda=cuda_sources, kw=kw)
        raise _Captured

    saved = ext.load_inline
    ext.load_inline = fake  # type: ignore[assignment]
    try:
        exec(compile(source, filename, "exec"), {"__name__": "kw_capture"})  # noqa: S102
    except _Captured:
        pass
    finally:
        ext.load_inline = saved
    return got
