"""Check every candidate of an evaluation: static checks and NVRTC here, the rest on a GPU.

The static checks and an NVRTC compile of the device code run on any machine. With a CUDA
device, every candidate that passes the static checks (PyTorch compute in ModelNew is only a
warning there: the run-time custom-kernel share decides) goes through the verification protocol
(`verify.run_workers`: one worker process each, builds in parallel, timing one at a time). Without one,
rows say `gpu_verified: false` and carry no correctness or speed figure.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.cuda.compile_result import FAILED
from kernelwright.cuda.nvrtc.device import compile_many
from kernelwright.cuda.spans import cuda_source_of
from kernelwright.errors import UsageError
from kernelwright.evaluation.candidates import Candidate
from kernelwright.pysource import source_text
from kernelwright.verifier.build_failure import first_error
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.verdict import Verdict
from kernelwright.verifier.verify import read_inputs, source_warnings, static_verdict, with_warnings

NVRTC_FAILED = "the device code does not compile (NVRTC)"
NEVER_COMPILED = frozenset({"syntax_error", "no_candidate", "compile_error"})

# runs the candidates that passed `pre_verdict` (so it need not check them again)
Verifier = Callable[[Sequence[VerifyConfig], int], list[Verdict]]


@dataclass
class Row:
    """One candidate's result: where it came from, how far it got, and its verdict."""

    problem_id: str
    category: str
    sample: int
    candidate: str
    nvrtc_ok: bool
    compiled: bool
    gpu_verified: bool
    verdict: Verdict

    def flat(self) -> dict[str, Any]:
        """One table row: these fields and the verdict's (per-shape results left out)."""
        out = {k: getattr(self, k) for k in ("problem_id", "category", "sample", "candidate", "nvrtc_ok",
                                             "compiled", "gpu_verified")}
        out |= {k: v for k, v in self.verdict.to_json().items() if k != "per_shape"}
        out["detail"] = str(out["detail"])[:500]
        return out


def _source(c: Candidate) -> str:
    return source_text(c.path) if c.path else ""  # "" past the size limit: read_inputs gives the reason


@dataclass(frozen=True)
class Compiles:
    """Whether a candidate's code compiles here; where not, the stage that failed and its first error."""

    ok: bool
    why: str = ""


def failed(what: str, log: str, stage: str) -> Compiles:
    """Not compiled: `what` failed, with its log's first error line (build_failure.first_error's, without the
    excerpt lines under it), at most 300 characters."""
    return Compiles(False, f"{what}: {first_error(log.splitlines(), stage)[0].splitlines()[0][:300]}")


def _has_kernel(source: str) -> bool:
    return bool(source.strip()) and "__global__" in source


def nvrtc_checks(cands: Sequence[Candidate], cache_dir: Path | None = None) -> list[Compiles]:
    """Device code of each candidate compiled with NVRTC (no CUDA string with a kernel: not compiled); results
    are kept in `cache_dir` (None: in this process only)."""
    sources = [cuda_source_of(_source(c)) for c in cands]
    it = iter(compile_many([s for s in sources if _has_kernel(s)], os.cpu_count() or 1, cache_dir=cache_dir).results)
    out = []
    for s in sources:
        if not _has_kernel(s):
            out.append(Compiles(False, "no CUDA source with a __global__ kernel to compile"))
            continue
        r = next(it)
        out.append(Compiles(True) if r.ok else failed(NVRTC_FAILED, r.log, "nvrtc"))
    return out


def host_checks(cands: Sequence[Candidate], checks: list[Compiles]) -> list[Compiles]:
    """On a machine without a GPU, a candidate compiles only where the whole compile check passes
    too (`cuda.compile_check`: its load_inline sources resolved, the device and the host stage):
    NVRTC's device compile never sees host code (an infill task's launch configuration, a launcher
    passing a pointer where a scalar goes) nor a source argument the file never binds, and counting
    NVRTC alone doubled the compile rate of one model's held-out compositions against the GPU's.
    A failure says which stage it was and that stage's first error."""
    from kernelwright.cuda.compile_check import check_many

    todo = [i for i, c in enumerate(cands) if c.path is not None and checks[i].ok]
    if not todo:
        return checks
    out = list(checks)
    for i, r in zip(todo, check_many([_source(cands[i]) for i in todo]), strict=True):
        if r.ok:
            continue
        if r.device.status == FAILED:
            out[i] = failed(NVRTC_FAILED, r.device.log, "nvrtc")
        elif r.host.status == FAILED:
            out[i] = failed("the host code does not compile (host compiler)", r.host.log, "host_compiler")
        else:
            out[i] = failed("the compile check could not build it", r.device.log or r.host.log, "")
    return out


def pre_verdict(c: Candidate) -> Verdict | None:
    """The verdict reached without a GPU: a missing file, bad Python or a static rejection."""
    if c.path is None:
        return Verdict.of("no_candidate", "no candidate file for this sample")
    try:
        source = read_inputs(c.problem.path, c.path)
    except UsageError as exc:
        return Verdict.of("syntax_error", str(exc))
    return static_verdict(source)


def _compiled(v: Verdict, nvrtc_ok: bool, ran_on_gpu: bool) -> bool:
    """Built by the worker; or, where no build was attempted, the NVRTC compile of its device code."""
    if v.reason in NEVER_COMPILED:
        return False
    return v.compile_s is not None if ran_on_gpu else nvrtc_ok  # a worker that died before its build: not built


def _row(c: Candidate, v: Verdict, nvrtc_ok: bool, ran_on_gpu: bool) -> Row:
    return Row(problem_id=c.problem.id, category=c.problem.category, sample=c.sample, candidate=str(c.path or ""),
               nvrtc_ok=nvrtc_ok, compiled=_compiled(v, nvrtc_ok, ran_on_gpu), gpu_verified=ran_on_gpu, verdict=v)


def not_verified(compiles: Compiles, reason: str) -> Verdict:
    """A candidate that passed the static checks on a machine without a GPU."""
    if not compiles.ok:
        return Verdict.of("compile_error", compiles.why or "its code does not compile")
    return Verdict.of("no_gpu", reason)


def check_candidates(cands: Sequence[Candidate], cfg: VerifyConfig, jobs: int, gpu: bool,
                     verifier: Verifier, no_gpu_reason: str = "", nvrtc_cache: Path | None = None) -> list[Row]:
    """Rows in candidate order. `cfg` gives the protocol settings; problem/candidate are filled in; NVRTC's
    results are kept in `nvrtc_cache`."""
    checks = nvrtc_checks(cands, nvrtc_cache)
    if not gpu:
        checks = host_checks(cands, checks)
    pre = [pre_verdict(c) for c in cands]
    todo = [i for i, v in enumerate(pre) if v is None]
    verdicts: dict[int, Verdict] = {}
    if gpu and todo:
        cfgs = [_config(cfg, cands[i]) for i in todo]
        verdicts = dict(zip(todo, verifier(cfgs, jobs), strict=True))
    rows = []
    for i, c in enumerate(cands):
        # PyTorch compute in ModelNew or its host code: a warning on whatever verdict the run reached
        v = pre[i] or with_warnings(verdicts.get(i) or not_verified(checks[i], no_gpu_reason),
                                    source_warnings(_source(c)))
        rows.append(_row(c, v, checks[i].ok, i in verdicts))
    return rows


def _config(base: VerifyConfig, c: Candidate) -> VerifyConfig:
    from dataclasses import replace

    return replace(base, problem=str(c.problem.path), candidate=str(Path(c.path or "")), json=None, static=False)
