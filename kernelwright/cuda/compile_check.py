"""Compile check of KernelBench-format candidates: does the CUDA extension they build compile?

    from kernelwright.cuda.compile_check import CompileCheckSettings, check_candidate, check_many
    result = check_candidate(py_source, CompileCheckSettings(cache_dir=Path("cache")))
    result.ok, result.device.status, result.device.log, result.host.status, result.to_json()

The shared layer behind every place that answers a generated kernel with a compile verdict, on a
machine without a GPU:

1. sources: the `cpp_sources` / `cuda_sources` / `functions` of each `load_inline` call, read from
   the AST without running the candidate (`candidate_sources`);
2. includes: every `#include` is checked against the system, CUDA and torch headers before
   anything compiles (`include_policy`); a refusal fails the stage of the source it is in
   (cuda_sources: device, cpp_sources: host), and nothing compiles;
3. device stage: NVRTC of the device half of each CUDA source, in worker processes with a memory
   and CPU-time limit and a wall timeout (`compile_stages`, `nvrtc.pool`);
4. host stage: `g++ -fsyntax-only` of the host half of the CUDA sources, the cpp_sources and the
   generated bindings, with a precompiled torch/extension.h, under the same limits (`host_compile`);
5. logs keep the candidate's own lines, the messages and locations, never other files' text
   (`compile_log`); results are cached on disk by content hash, so checking the same code again
   compiles nothing (`StageResult.cached`).

Statuses: `ok`, `failed` (including a compile stopped by a limit: the log says which),
`unavailable` (NVRTC does not load here / no C++ compiler or host CUDA headers: never ok), and
`skipped` (the stage did not run: its log says why, e.g. the host stage is turned off, or the
candidate was refused before compiling). A candidate refused before compiling reports the stage
its fault belongs to as `failed` with the reason (a Python source that does not parse, or holds no
CUDA source: the device stage; function names unfit for the bindings: the host stage) and the
other stage `skipped`. `ok` on the result: both stages compiled (the device stage alone when the
host stage is turned off).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from kernelwright.cuda import host_compile as hc
from kernelwright.cuda.candidate_sources import CandidateSources, candidate_sources
from kernelwright.cuda.compile_result import (
    FAILED,
    OK,
    SKIPPED,
    UNAVAILABLE,
    CompileCheckSettings,
    CompileResult,
    StageResult,
    combined_ok,
)
from kernelwright.cuda.compile_stages import device_stage, host_stage, tool_dir
from kernelwright.cuda.host_shims import shims_dir
from kernelwright.cuda.include_policy import refused_includes
from kernelwright.cuda.nvrtc.program import include_dirs as nvrtc_include_dirs
from kernelwright.pysource import parse_python

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
HOST_OFF = "the host stage is turned off (CompileCheckSettings.host)"
__all__ = ["CompileCheckSettings", "CompileResult", "StageResult", "allowed_roots", "check_candidate",
           "check_many"]


def allowed_roots(settings: CompileCheckSettings) -> tuple[str, ...]:
    """Folders an `#include` name may resolve under (include_policy): system, CUDA, torch."""
    roots = [*nvrtc_include_dirs(), *hc.torch_include_dirs(), str(shims_dir(tool_dir(settings)))]
    cuda = hc.cuda_host_include()
    if cuda:
        roots.append(cuda)
    cxx = hc.find_compiler()
    roots += hc.system_include_dirs(cxx) if cxx else ["/usr/include", "/usr/local/include"]
    return tuple(dict.fromkeys(roots))


def _named_sources(found: CandidateSources) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The candidate's (cuda_sources, cpp_sources), each source with its name in the logs."""
    cuda: list[tuple[str, str]] = []
    cpp: list[tuple[str, str]] = []
    first = 0
    for build in found.builds:
        cuda += [(f"cuda_sources[{first + i}]", s) for i, s in enumerate(build.cuda)]
        cpp += [(f"cpp_sources[{i}]", s) for i, s in enumerate(build.cpp)]
        first += len(build.cuda)
    return cuda, cpp


def _not_run(reason: str) -> StageResult:
    return StageResult(SKIPPED, f"not run: {reason}")


def _parses(py_source: str) -> bool:
    try:
        parse_python(py_source)
    except SyntaxError:
        return False
    return True


def _refusal(py_source: str, found: CandidateSources,
             settings: CompileCheckSettings) -> tuple[StageResult, StageResult] | None:
    """(device, host) of a candidate refused before compiling, None to compile it: the stage the refusal
    belongs to fails with its log, a stage that did not run is skipped with the reason."""
    if found.problem:
        reason = ("the Python source did not parse" if not _parses(py_source) else
                  "a load_inline source is a name the file never binds" if found.unbound
                  else "no CUDA source was found")
        return StageResult(FAILED, found.problem), _not_run(f"{reason} (see the device stage)")
    names = [f for b in found.builds for f in b.functions or []]
    bad = [f for f in names if not _IDENTIFIER.fullmatch(f)]
    if bad:  # they are pasted into the generated bindings, host code
        log = f"functions_refused: not C++ identifiers: {', '.join(repr(f[:60]) for f in bad)}"
        return _not_run("the functions named for the bindings were refused (see the host stage)"), \
            StageResult(FAILED, log)
    cuda, cpp = _named_sources(found)
    roots = allowed_roots(settings)
    refused = [refused_includes(cuda, roots), refused_includes(cpp, roots)]
    if not any(refused):
        return None
    logs = ["\n".join(r.log_line() for r in stage) for stage in refused]
    device = StageResult(FAILED, logs[0]) if refused[0] else _not_run("an #include was refused (see the host stage)")
    host = StageResult(FAILED, logs[1]) if refused[1] else _not_run("an #include was refused (see the device stage)")
    return device, host


def _combine(parts: list[StageResult]) -> StageResult:
    statuses = {p.status for p in parts}
    status = FAILED if FAILED in statuses else UNAVAILABLE if UNAVAILABLE in statuses else OK
    if statuses == {SKIPPED}:
        status = SKIPPED
    return StageResult(status, "\n".join(p.log for p in parts if p.log), round(sum(p.seconds for p in parts), 4),
                       cached=all(p.cached for p in parts))


def _stage_jobs(pool: ThreadPoolExecutor, found: CandidateSources,
                settings: CompileCheckSettings) -> tuple[list[Future[StageResult]], list[Future[StageResult]]]:
    device: list[Future[StageResult]] = []
    host: list[Future[StageResult]] = []
    first = 0
    for build in found.builds:
        device.append(pool.submit(device_stage, build, settings, first))
        if settings.host:
            host.append(pool.submit(host_stage, build, settings, first))
        first += len(build.cuda)
    return device, host


def check_many(sources: Sequence[str], settings: CompileCheckSettings | None = None) -> list[CompileResult]:
    """Compile-check several candidates (Python files), `settings.workers` compiles at a time."""
    settings = settings or CompileCheckSettings()
    found = [candidate_sources(s) for s in sources]
    refusals = [_refusal(s, f, settings) for s, f in zip(sources, found, strict=True)]
    with ThreadPoolExecutor(max_workers=max(1, settings.workers), thread_name_prefix="kw-compile") as pool:
        jobs = [None if r else _stage_jobs(pool, f, settings) for f, r in zip(found, refusals, strict=True)]
        results: list[CompileResult] = []
        for f, refusal, job in zip(found, refusals, jobs, strict=True):
            if refusal is not None:  # nothing compiled
                results.append(CompileResult(False, *refusal, f.cuda))
            elif job is not None:
                device = _combine([j.result() for j in job[0]])
                host = _combine([j.result() for j in job[1]]) if settings.host else _not_run(HOST_OFF)
                results.append(CompileResult(combined_ok(device, host), device, host, f.cuda))
    return results


def check_candidate(py_source: str, settings: CompileCheckSettings | None = None) -> CompileResult:
    """Compile-check one candidate (module docstring); both stages run at once when workers > 1."""
    return check_many([py_source], settings)[0]
