"""The nvcc build skipped where NVRTC already rejected the candidate's device code, and could be trusted to.

NVRTC (the compile check's device stage: each CUDA source's device view, one program per source,
in worker processes, cached by content) takes well under a second; the runner's build of the
same candidate takes tens of CPU-seconds of nvcc, up to three times over (split, slim header, as
written). A rejection is trusted, and the build skipped with the verdict `compile_error` and
NVRTC's log, only where NVRTC sees what nvcc would see:

- every `load_inline` call's sources were read statically (not guessed from string literals), and
  its `extra_cuda_cflags` are a literal list of flags that do not change what compiles (no
  `-D`/`-U`/`-I`/`-include`, language or architecture flags: `SAFE_FLAGS`), with no
  `extra_include_paths`;
- every `#include` left in the device code names a header found under NVRTC's include folders (a
  C++ library header such as `<limits>` is not there; nvcc finds it);
- the device code names nothing from namespaces that torch's headers open for nvcc and NVRTC's
  prelude does not (`std::`, `at::`, `c10::`, `torch::`, and `using` them);
- NVRTC itself reached the result (no time or memory limit stopped it), and every error it reports
  is located in the candidate's own sources (an error inside a header is an environment's gap).

Anything else is left to the build, as before. bench/nvrtc_vs_nvcc_agreement.py measures how
often NVRTC rejects what nvcc accepts, by these classes (docs/results/nvrtc_vs_nvcc_agreement_cpu.json).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from kernelwright.cuda.candidate_sources import candidate_sources, load_inline_calls
from kernelwright.cuda.compile_result import FAILED, CompileCheckSettings
from kernelwright.cuda.compile_stages import device_check
from kernelwright.cuda.include_policy import refused_includes
from kernelwright.cuda.nvrtc.program import include_dirs
from kernelwright.cuda.source_views import device_view
from kernelwright.cuda.spans import cuda_parser
from kernelwright.pysource import parse_python
from kernelwright.verifier.build_failure import BuildFailure, first_error
from kernelwright.verifier.verdict import Verdict

SAFE_FLAGS = re.compile(r"^(?:-O[0-3s]?|--?use_fast_math|-lineinfo|-g|-G|-v|--expt-relaxed-constexpr|"
                        r"-Xptxas(?:=.*)?|--ptxas-options=.*|-maxrregcount(?:=\d+)?|--maxrregcount=\d+|"
                        r"--ftz=(?:true|false)|--prec-div=(?:true|false)|--prec-sqrt=(?:true|false)|"
                        r"--fmad=(?:true|false)|-Xcompiler(?:=.*)?|--compiler-options(?:=.*)?|-w|"
                        r"-Wno-deprecated-gpu-targets|--resource-usage|-res-usage)$")
TORCH_NAMESPACES = frozenset({"std", "at", "c10", "torch", "caffe2", "pybind11"})
_EDG_ERROR = re.compile(r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\): (?:catastrophic )?error")


@dataclass(frozen=True)
class NvrtcOutcome:
    """What NVRTC said of a candidate's device code, and whether its rejection can stand for nvcc's."""

    rejected: bool  # NVRTC compiled the device code and rejected it
    untrusted: str  # why the rejection cannot stand for nvcc's ("" when it can, or when nothing was rejected)
    log: str  # NVRTC's log, filtered to the candidate's own lines (compile_log)

    @property
    def trusted_rejection(self) -> bool:
        return self.rejected and not self.untrusted


def _flags_problem(tree: ast.Module) -> str:
    """Why a load_inline call's flags may change what nvcc compiles ("" when none do)."""
    for call in load_inline_calls(tree):
        for kw in call.keywords:
            if kw.arg is None:
                return "load_inline gets **keyword arguments"
            if kw.arg == "extra_include_paths":
                return "extra_include_paths"
            if kw.arg == "extra_cuda_cflags":
                try:
                    flags = ast.literal_eval(kw.value)
                except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                    return "extra_cuda_cflags not a literal"
                flags = [flags] if isinstance(flags, str) else flags
                if flags is not None and not isinstance(flags, list | tuple):
                    return "extra_cuda_cflags not a list of strings"
                bad = [f for f in flags or [] if not (isinstance(f, str) and SAFE_FLAGS.match(f))]
                if bad:
                    return f"extra_cuda_cflags {bad[0]!r}"
    return ""


def _namespaces(source: str) -> Iterator[str]:
    """The namespaces the device view of a CUDA source qualifies names with, or brings in by `using`."""
    stack = [cuda_parser().parse(device_view(source).encode("utf-8")).root_node]
    while stack:
        node = stack.pop()
        if node.type == "namespace_identifier" and node.text:
            yield node.text.decode("utf-8", "replace")
        elif node.type == "using_declaration" and node.text:
            yield from re.findall(r"[A-Za-z_]\w*", node.text.decode("utf-8", "replace"))[1:2]
        stack.extend(node.children)


def _untrusted_sources(cuda: list[str]) -> str:
    named = [(f"cuda_sources[{i}]", device_view(s)) for i, s in enumerate(cuda)]
    refused = refused_includes(named, include_dirs())
    if refused:
        return f"{refused[0].directive} is not an NVRTC header"
    used = sorted({ns for s in cuda for ns in _namespaces(s)} & TORCH_NAMESPACES)
    return f"the device code uses {used[0]}:: names that torch's headers make visible" if used else ""


def _foreign_errors(log: str, own: set[str]) -> list[str]:
    """Where NVRTC's errors are, outside the candidate's own sources (none found: ["no error line"])."""
    places = [m.group("file") for m in map(_EDG_ERROR.match, log.splitlines()) if m]
    return [p for p in places if p not in own] if places else ["no error line"]


def default_settings() -> CompileCheckSettings:
    """The compile check's device stage as the gate runs it: its result cache, a worker per 4 cores."""
    return CompileCheckSettings(host=False, workers=max(2, (os.cpu_count() or 2) // 4))


def nvrtc_outcome(source: str, settings: CompileCheckSettings | None = None) -> NvrtcOutcome | None:
    """NVRTC on a candidate's device code (module docstring); None when there is nothing NVRTC can check."""
    found = candidate_sources(source)
    if found.problem or not found.builds or not any(b.cuda for b in found.builds):
        return None
    settings = settings or default_settings()
    first, logs, rejected, reached = 0, [], False, True
    for build in found.builds:
        result, definite = device_check(build, settings, first)
        reached &= definite
        rejected |= result.status == FAILED
        if result.log:
            logs.append(result.log)
        first += len(build.cuda)
    log = "\n".join(logs)
    if not rejected:
        return NvrtcOutcome(False, "", log)
    own = {f"cuda_sources[{i}]" for i in range(first)}
    foreign = _foreign_errors(log, own)
    why = ("sources guessed from string literals" if not all(b.resolved for b in found.builds) else
           "NVRTC did not finish (a limit, or unavailable)" if not reached else
           _flags_problem(parse_python(source)) or _untrusted_sources(found.cuda) or
           (f"an error outside the candidate's sources ({os.path.basename(foreign[0])})" if foreign else ""))
    return NvrtcOutcome(True, why, log)


def nvrtc_verdict(source: str, settings: CompileCheckSettings | None = None) -> Verdict | None:
    """`compile_error` with NVRTC's log where NVRTC's rejection stands for nvcc's (the build is then
    skipped); None: build and run the candidate."""
    outcome = nvrtc_outcome(source, settings)
    if outcome is None or not outcome.trusted_rejection:
        return None
    failure = BuildFailure("nvrtc (device code; the nvcc build was skipped)", "",
                           *first_error(outcome.log.splitlines(), "nvrtc"))
    return Verdict.of("compile_error", failure.detail())
