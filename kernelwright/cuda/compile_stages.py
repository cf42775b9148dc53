"""The two stages of the compile check, for one `load_inline` build of a candidate.

Device: each CUDA source's `device_view` behind `#line 1 "cuda_sources[i]"`, compiled by NVRTC in
a worker process (`nvrtc.pool.NvrtcPool`), one program per source as load_inline builds one
.cu file per source. Implicit headers of load_inline (`torch/types.h`, `cuda.h`, `cuda_runtime.h`)
become the NVRTC shims.

Host: one translation unit holding, in order, the `host_view` of each CUDA source, the
cpp_sources and the bindings load_inline generates (`m.def("f", torch::wrap_pybind_function(f),
"f")` per function), each behind its own `#line`, after the precompiled torch/extension.h and
`cuda.h` / `cuda_runtime.h`; checked by libclang when it is installed (`clang_host`: its header
keeps torch's instantiated templates, ~2 s a check), else with `g++ -fsyntax-only` (most of its
~8 s is g++ instantiating the header's pending templates again, not reading the PCH).
When that unit fails with a redefinition-type error (two sources defining the same name, fine
in separate files), the sources are checked again as the separate files load_inline builds.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from kernelwright.cuda import clang_host
from kernelwright.cuda import compile_workers as workers
from kernelwright.cuda import host_compile as hc
from kernelwright.cuda.candidate_sources import Build
from kernelwright.cuda.compile_log import filter_log
from kernelwright.cuda.compile_result import FAILED, OK, UNAVAILABLE, CompileCheckSettings, StageResult
from kernelwright.cuda.nvrtc import cache
from kernelwright.cuda.nvrtc.pool import nvrtc_pool
from kernelwright.cuda.nvrtc.program import include_dirs, nvrtc_version
from kernelwright.cuda.source_views import HOST_PRELUDE, device_view, host_view

CHECK_VERSION = 1  # part of every cache key: bump when views, flags or log filtering change
DEVICE_PRELUDE = "#include <kw_torch_prelude.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
CUDA_HOST_INCLUDES = "#include <cuda.h>\n#include <cuda_runtime.h>\n"
_CONFLICT = re.compile(r"redefinition of|conflicting declaration|redeclared as different kind|"
                       r"previous definition|multiple definition")
_LIMIT_LOG = {
    "timeout": "timeout: the compile ran past the {t:g} s limit (timeout_s) and was stopped",
    "cpu_limit": "cpu_limit: the compile used more than the {t:g} s of CPU time allowed (timeout_s) and was stopped",
    "memory_limit": "memory_limit: the compile ran out of the {m} MiB allowed (memory_mb)",
    "crashed": "crashed: the compiler process died",
}


def _limit_line(limit: str, settings: CompileCheckSettings) -> str:
    return _LIMIT_LOG.get(limit, limit).format(t=settings.timeout_s, m=settings.memory_mb)


def _cached_or(settings: CompileCheckSettings, key: str, stage: str,
               compile_fn: Callable[[], tuple[StageResult, bool]]) -> StageResult:
    """The cached result for `key`, or `compile_fn()` (counted, and cached unless a limit stopped it)."""
    return _cached_or_definite(settings, key, stage, compile_fn)[0]


def _cached_or_definite(settings: CompileCheckSettings, key: str, stage: str,
                        compile_fn: Callable[[], tuple[StageResult, bool]]) -> tuple[StageResult, bool]:
    """`_cached_or`, and whether the result is the compiler's own (cached, or not stopped by a limit)."""
    hit = cache.get(settings.cache_dir, key)
    if hit is not None:
        result = StageResult.from_dict(hit)
        result.cached = True
        return result, True
    workers.count_compile(stage)
    result, definite = compile_fn()
    if definite:
        cache.put(settings.cache_dir, key, result.to_dict())
    return result, definite


# ------------------------------------------------------------------------------------ device


def device_options(arch: str) -> list[str]:
    opts = [f"--gpu-architecture={arch}", "-std=c++20", "--device-as-default-execution-space"]
    return opts + [f"-I{d}" for d in include_dirs()]


def device_units(build: Build, first: int = 0) -> list[tuple[str, str]]:
    """(name, NVRTC source) of each CUDA source of `build`; `first`: index of its first source."""
    units = []
    for i, src in enumerate(build.cuda, start=first):
        name = f"cuda_sources[{i}]"
        units.append((name, f'{DEVICE_PRELUDE}#line 1 "{name}"\n{device_view(src)}'))
    return units


def _device_compile(units: list[tuple[str, str]], settings: CompileCheckSettings) -> tuple[StageResult, bool]:
    pool = nvrtc_pool(settings.workers, settings.memory_mb)
    logs: list[str] = []
    statuses: set[str] = set()
    seconds, limited = 0.0, False
    for name, source in units:
        reply = pool.compile(source, "kw_device.cu", device_options(settings.arch), settings.timeout_s)
        seconds += float(reply.get("seconds", 0.0))
        statuses.add(str(reply["status"]))
        if reply.get("limit"):
            logs.append(_limit_line(str(reply["limit"]), settings))
            limited = True
        if reply.get("log"):
            logs.append(filter_log(str(reply["log"]), own={name, "kw_device.cu"}))
    status = UNAVAILABLE if UNAVAILABLE in statuses else FAILED if statuses - {OK} else OK
    definite = not limited and status != UNAVAILABLE
    return StageResult(status, "\n".join(x for x in logs if x), round(seconds, 4)), definite


def device_stage(build: Build, settings: CompileCheckSettings, first: int = 0) -> StageResult:
    return device_check(build, settings, first)[0]


def device_check(build: Build, settings: CompileCheckSettings, first: int = 0) -> tuple[StageResult, bool]:
    """`device_stage`, and whether NVRTC itself reached the result (False: NVRTC unavailable, no
    CUDA source, or a time or memory limit stopped the compile)."""
    version = nvrtc_version()
    if version is None:
        return StageResult(UNAVAILABLE, "NVRTC could not be loaded on this machine (cuda-bindings, "
                                        "nvidia-cuda-nvrtc)"), False
    if not build.cuda:
        return StageResult(FAILED, "no_cuda_source: the load_inline call has no cuda_sources"), False
    units = device_units(build, first)
    key = cache.content_key("device", CHECK_VERSION, version, device_options(settings.arch), units)
    return _cached_or_definite(settings, key, "device", lambda: _device_compile(units, settings))


# -------------------------------------------------------------------------------------- host


def _bindings(functions: list[str] | None) -> str:
    if not functions:
        return ""
    defs = "".join(f'm.def("{f}", torch::wrap_pybind_function({f}), "{f}");\n' for f in functions)
    return f"PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{defs}}}\n"


def own_sources(build: Build, first: int = 0) -> dict[str, str]:
    """The candidate's sources by the names `#line` gives them (g++ quotes its lines from these)."""
    named = {f"cuda_sources[{i}]": s for i, s in enumerate(build.cuda, start=first)}
    named |= {f"cpp_sources[{i}]": s for i, s in enumerate(build.cpp)}
    bindings = _bindings(build.functions)
    return named | ({"bindings": bindings} if bindings else {})


def _chunk(name: str, text: str) -> str:
    return f'#line 1 "{name}"\n{text}' + ("" if text.endswith("\n") else "\n")


def host_units(build: Build, pch: bool, merged: bool, first: int = 0) -> list[tuple[str, str]]:
    """(file name, text) of the host translation units of `build` (module docstring)."""
    torch = "" if pch else "#include <torch/extension.h>\n"
    cuda = [_chunk(f"cuda_sources[{i}]", host_view(s)) for i, s in enumerate(build.cuda, start=first)]
    main = "".join(_chunk(f"cpp_sources[{i}]", s) for i, s in enumerate(build.cpp))
    bindings = _bindings(build.functions)
    main += _chunk("bindings", bindings) if bindings else ""
    cuda_head = torch + CUDA_HOST_INCLUDES + HOST_PRELUDE
    if merged:
        return [("kw_host.cpp", cuda_head + "".join(cuda) + main)]
    units = [("kw_main.cpp", torch + main)] if main else []
    return units + [(f"kw_cuda_{i}.cpp", cuda_head + c) for i, c in enumerate(cuda)]


Toolchain = tuple[str, list[str], Path | None]  # compiler, flags, precompiled header


def _host_run(units: list[tuple[str, str]], own: dict[str, str], tools: Toolchain,
              settings: CompileCheckSettings) -> tuple[int | None, str, float, str | None]:
    cxx, flags, pch = tools
    with tempfile.TemporaryDirectory(prefix="kw_host_") as tmp:
        for name, text in [*own.items(), *units]:
            Path(tmp, name).write_text(text, encoding="utf-8")
        limits = workers.Limits(settings.timeout_s, settings.memory_mb)
        files = [n for n, _ in units]
        rc, out, seconds, limit = (clang_host.run_check(flags, pch, files, tmp, limits) if cxx == clang_host.FRONTEND
                                   else hc.run_check(cxx, flags, pch, files, tmp, limits))
    names = set(own) | {n for n, _ in units}
    return rc, filter_log(out, names, scrub=[tmp]), seconds, limit


def _host_compile(build: Build, first: int, tools: Toolchain,
                  settings: CompileCheckSettings) -> tuple[StageResult, bool]:
    own = own_sources(build, first)
    pch = tools[2] is not None
    rc, log, seconds, limit = _host_run(host_units(build, pch, True, first), own, tools, settings)
    if rc not in (0, None) and limit is None and _CONFLICT.search(log):
        rc, log, more, limit = _host_run(host_units(build, pch, False, first), own, tools, settings)
        seconds += more
    if limit is not None:
        log = _limit_line(limit, settings) + ("\n" + log if log else "")
    return StageResult(OK if rc == 0 else FAILED, log, round(seconds, 4)), limit is None


def tool_dir(settings: CompileCheckSettings) -> Path:
    """Where the precompiled header and the host shims live."""
    return settings.pch_dir or settings.cache_dir / "pch"


def host_toolchain(settings: CompileCheckSettings) -> tuple[str, list[str]] | str:
    """(compiler, flags) of the host stage, or why it is unavailable."""
    cxx = hc.find_compiler()
    if cxx is None:
        return "no C++ compiler found (g++, c++, or $CXX)"
    cuda_include = hc.cuda_host_include()
    if cuda_include is None:
        return "no CUDA headers for the host compiler (crt/host_config.h: nvidia-cuda-crt or a CUDA toolkit)"
    flags = hc.host_flags(tool_dir(settings), cuda_include)
    if settings.host_frontend == "gcc" or (settings.host_frontend == "auto" and clang_host.version() is None):
        return cxx, flags
    if clang_host.version() is None:
        return "host_frontend is libclang, but the libclang package is not installed (pip install libclang)"
    return clang_host.FRONTEND, clang_host.clang_flags(cxx, flags)


def frontend_id(cxx: str) -> str:
    """The host checker and its version (part of every cache key)."""
    return clang_host.frontend_id() if cxx == clang_host.FRONTEND else hc.compiler_id(cxx)


def toolchain(settings: CompileCheckSettings) -> Toolchain | str:
    """`host_toolchain` with the precompiled header, built first if it is missing."""
    tools = host_toolchain(settings)
    if isinstance(tools, str):
        return tools
    cxx, flags = tools
    if cxx == clang_host.FRONTEND:
        pch = clang_host.ensure_pch(tool_dir(settings), flags)
        if pch is not None or settings.host_frontend == "libclang":
            return cxx, flags, pch
        # auto: without its header libclang would parse all of torch's headers in every check; g++ instead
        tools = host_toolchain(dataclasses.replace(settings, host_frontend="gcc"))
        assert not isinstance(tools, str)  # the same compiler and headers were found a moment ago
        cxx, flags = tools
    return cxx, flags, hc.ensure_pch(tool_dir(settings), cxx, flags)


def host_stage(build: Build, settings: CompileCheckSettings, first: int = 0) -> StageResult:
    tools = host_toolchain(settings)
    if isinstance(tools, str):
        return StageResult(UNAVAILABLE, tools)
    cxx, flags = tools
    key = cache.content_key("host", CHECK_VERSION, frontend_id(cxx), flags, hc.torch_version(),
               host_units(build, True, True, first))

    def compile_now() -> tuple[StageResult, bool]:
        full = toolchain(settings)  # the header is needed only now, on a cache miss
        assert not isinstance(full, str)
        return _host_compile(build, first, full, settings)

    return _cached_or(settings, key, "host", compile_now)
