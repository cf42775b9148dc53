"""Compile check of KernelBench-format candidates: does the CUDA extension they build compile?

    from kernelwright.cuda.compile_check import CompileCheckSettings, check_candidate, check_many
    result = check_candidate(py_source, CompileCheckSettings(cache_dir=Path("cache")))
    result.ok, result.device.status, result.device.log, result.host.status, result.to_json()

The shared layer behind every place that answers a generated kernel with a compile verdict, on a
machine without a GPU:

1. sources: the `cpp_sources` / `cuda_sources` / `functions` of each `load_inline` call, read from
   the AST without running the candidate (`candidate_sources`);
2. includes: every `#include` is checked against the system, CUDA and torch headers before
   anything compiles (`include_policy`); a refusal fails both stages;
3. device stage: NVRTC of the device half of each CUDA source, in worker processes with a memory
   and CPU-time limit and a wall timeout (`compile_stages`, `compile_workers`);
4. host stage: `g++ -fsyntax-only` of the host half of the CUDA sources, the cpp_sources and the
   generated bindings, with a precompiled torch/extension.h, under the same limits (`host_compile`);
5. logs keep the candidate's own lines, the messages and locations, never other files' text
   (`compile_log`); results are cached on disk by content hash, so checking the same code again
   compiles nothing (`StageResult.cached`).

Statuses: `ok`, `failed` (including a compile stopped by a limit: the log says which),
`unavailable` (NVRTC does not load here / no C++ compiler or host CUDA headers: never ok), and
`skipped` (host stage turned off). `ok` on the result: both stages compiled.
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
from kernelwright.cuda.nvrtc import include_dirs as nvrtc_include_dirs

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
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


def _named_sources(found: CandidateSources) -> list[tuple[str, str]]:
    named: list[tuple[str, str]] = []
    first = 0
    for build in found.builds:
        named += [(f"cuda_sources[{first + i}]", s) for i, s in enumerate(build.cuda)]
        named += [(f"cpp_sources[{i}]", s) for i, s in enumerate(build.cpp)]
        first += len(build.cuda)
    return named


def _refusal(found: CandidateSources, settings: CompileCheckSettings) -> str | None:
    """The refusal log of a candidate that cannot be compiled (None: compile it)."""
    if found.problem:
        return found.problem
    names = [f for b in found.builds for f in b.functions or []]
    bad = [f for f in names if not _IDENTIFIER.fullmatch(f)]
    if bad:  # they are pasted into the generated bindings
        return f"functions_refused: not C++ identifiers: {', '.join(repr(f[:60]) for f in bad)}"
    refused = refused_includes(_named_sources(found), allowed_roots(settings))
    return "\n".join(r.log_line() for r in refused) if refused else None


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


def _failed(found: CandidateSources, log: str) -> CompileResult:
    return CompileResult(False, StageResult(FAILED, log), StageResult(FAILED, log), found.cuda)


def check_many(sources: Sequence[str], settings: CompileCheckSettings | None = None) -> list[CompileResult]:
    """Compile-check several candidates (Python files), `settings.workers` compiles at a time."""
    settings = settings or CompileCheckSettings()
    found = [candidate_sources(s) for s in sources]
    refusals = [_refusal(f, settings) for f in found]
    with ThreadPoolExecutor(max_workers=max(1, settings.workers), thread_name_prefix="kw-compile") as pool:
        jobs = [None if r else _stage_jobs(pool, f, settings) for f, r in zip(found, refusals, strict=True)]
        results: list[CompileResult] = []
        for f, refusal, job in zip(found, refusals, jobs, strict=True):
            if job is None:
                results.append(_failed(f, refusal or ""))
                continue
            device = _combine([j.result() for j in job[0]])
            host = _combine([j.result() for j in job[1]]) if settings.host else StageResult(SKIPPED)
            results.append(CompileResult(combined_ok(device, host), device, host, f.cuda))
    return results


def check_candidate(py_source: str, settings: CompileCheckSettings | None = None) -> CompileResult:
    """Compile-check one candidate (module docstring); both stages run at once when workers > 1."""
    return check_many([py_source], settings)[0]
