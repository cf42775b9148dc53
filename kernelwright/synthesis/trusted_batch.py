"""Generator-written solutions verified as trusted code, many at a time, on the GPU.

A model's candidate goes through the full judge (a sandboxed runner per candidate, ~1 s of GPU
and ~20 CPU-s each). The generator's own solutions are code kernelwright wrote, so they are built
and checked in bulk:
- `batch_sources`: the solutions of a chunk built into ONE extension: each solution's CUDA
  source in its own C++ namespace (`#include`s hoisted), one pybind module binding every
  solution's functions as `b<i>_<name>`;
- `check_chunk`: each solution's module run with a `load_inline` that hands it its own functions
  of that extension, so `ModelNew` runs unchanged; correctness on every shape of the problem and
  every input distribution of the judge (`verifier.inputs`), against the float64 twin with the
  judge's own tolerance rule (`verifier.inputs.compare`); degenerate references (a constant
  output, or the same output for two different inputs) dropped; for a sample of the tasks, the
  speedup (CUDA events, median), the custom-kernel share (profiler) and the roofline share, timed
  one at a time across processes (the host timing lock of the judge).
A chunk whose build fails is split in halves until the failing solutions stand alone
(`compile_error` with the compiler's first error). Inputs are drawn on the GPU (get_inputs under
`torch.device("cuda")`), so a worker spends its CPU on builds, not on random numbers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import re
import statistics
import time
import types
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.synthesis.task import SynthTask

log = logging.getLogger(__name__)

VERIFIED_BY = "trusted_batch"
_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"].*$", re.M)
_EXTENSION_H = re.compile(r"^#\s*include\s*<torch/extension\.h>$")


@dataclass(frozen=True)
class PairCheck:
    """What the trusted batch found for one task; figures only where it was timed."""

    task_id: str
    # correct, a reason of the judge's comparison (wrong_output, ...), compile_error, runtime_error,
    # degenerate_constant or degenerate_input_independent
    status: str
    detail: str = ""
    max_abs_err: float | None = None
    runtime_ms: float | None = None  # the solution, median of the timed calls, the first shape
    ref_runtime_ms: float | None = None  # the reference, same inputs
    speedup: float | None = None
    custom_kernel_time_share: float | None = None
    roofline_share: float | None = None
    verified_by: str = VERIFIED_BY
    build_s: float | None = None  # wall seconds of the build this solution was part of (shared by its chunk)
    check_s: float | None = None  # wall seconds of this solution's checks on the GPU (timing included)

    @property
    def correct(self) -> bool:
        return self.status == "correct"


@dataclass(frozen=True)
class Captured:
    """The arguments of a solution's `load_inline` call."""

    cpp: str
    cuda: str
    functions: tuple[str, ...]
    cuda_flags: tuple[str, ...]


def capture(solution: str) -> Captured:
    """The arguments of the solution's `load_inline` call (split_build.capture_load_inline_source)."""
    from kernelwright.cuda.split_build import capture_load_inline_source

    got = capture_load_inline_source(solution, "<solution>")
    if not got:
        raise ValueError("the solution calls no load_inline")
    kw = got["kw"]
    functions = kw.get("functions") or []
    names = tuple(functions) if not isinstance(functions, str) else (functions,)
    return Captured(_joined(got["cpp"]), _joined(got["cuda"]), names, tuple(kw.get("extra_cuda_cflags") or ()))


def _joined(sources: Any) -> str:
    return sources if isinstance(sources, str) else "\n".join(sources or [])


def batch_sources(captured: Sequence[Captured], light: bool = False) -> tuple[str, str]:
    """(cpp source, cuda source) of one extension holding every solution, solution i's functions
    bound as `b<i>_<name>`. `light`: the CUDA file includes `torch/types.h` (ATen) where the
    solutions include `torch/extension.h` (all of libtorch and pybind11, which nvcc would parse
    for nothing: the bindings live in the C++ file)."""
    includes: list[str] = []
    cuda_parts, decls, defs = [], [], []
    for i, c in enumerate(captured):
        for inc in _INCLUDE.findall(c.cuda):
            inc = _EXTENSION_H.sub("#include <torch/types.h>", inc.strip()) if light else inc.strip()
            if inc not in includes:
                includes.append(inc)
        body = _INCLUDE.sub("", c.cuda)
        cuda_parts.append(f"namespace kw_b{i} {{\n{body}\n}}  // namespace kw_b{i}\n")
        decls.append(f"namespace kw_b{i} {{\n{_INCLUDE.sub('', c.cpp)}\n}}\n")
        defs += [f'  m.def("b{i}_{fn}", &kw_b{i}::{fn});' for fn in c.functions]
    cpp = "#include <torch/extension.h>\n" + "".join(decls) + \
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + "\n".join(defs) + "\n}\n"
    return cpp, "\n".join(includes) + "\n" + "".join(cuda_parts)


def build_chunk(captured: Sequence[Captured], build_root: Path, light: bool = False, pch: bool = False) -> Any:
    """One extension of the chunk's solutions (raises on a failed build). `pch`: the C++ file with
    torch's precompiled extension.h (built once by the caller: cuda/pch.py)."""
    from torch.utils.cpp_extension import load_inline

    cpp, cuda = batch_sources(captured, light)
    digest = hashlib.sha256((cpp + cuda).encode()).hexdigest()[:16]
    folder = build_root / digest
    folder.mkdir(parents=True, exist_ok=True)
    flags = sorted({f for c in captured for f in c.cuda_flags} | {"-O3"})
    return load_inline(name=f"kw_trusted_{digest}", cpp_sources=cpp, cuda_sources=cuda, functions=None,
                       extra_cuda_cflags=flags, build_directory=str(folder), verbose=False, use_pch=pch)


Piece = tuple[list[int], Any | None, str, float]  # task indices, extension or None, error, build seconds


def built_pieces(tasks: Sequence[SynthTask], build_root: Path,
                 pch: bool = False) -> tuple[list[Piece], list[Captured | None]]:
    """Pieces of the chunk: all of it in one light build (`batch_sources`) where that builds, else
    as written, else halves, down to single solutions whose error is kept; and each task's captured
    `load_inline` arguments (None where its module failed before the call)."""
    caps: list[Captured | None] = []
    out: list[Piece] = []
    for i, t in enumerate(tasks):
        try:
            caps.append(capture(t.solution))
        except Exception as exc:  # noqa: BLE001 (any failure of the module is this task's)
            caps.append(None)
            out.append(([i], None, f"{type(exc).__name__}: {exc}", 0.0))
    ok = [i for i, c in enumerate(caps) if c is not None]
    pending, light = [ok], True
    while pending:
        idx = pending.pop()
        if not idx:
            continue
        start = time.perf_counter()
        try:
            ext = build_chunk([c for i in idx if (c := caps[i]) is not None], build_root, light, pch)
            out.append((idx, ext, "", time.perf_counter() - start))
        except Exception as exc:  # noqa: BLE001 (a failed build: as written, then split it)
            log.info("a build of %d solutions failed (%s)", len(idx), "light" if light else "as written")
            if light:
                pending.append(idx)
            elif len(idx) == 1:
                out.append((idx, None, build_error(exc), time.perf_counter() - start))
            else:
                pending += [idx[: len(idx) // 2], idx[len(idx) // 2:]]
        light = False
    return out, caps


def build_error(exc: BaseException) -> str:
    """The failed build's stage and first error (verifier.build_failure), else the exception itself."""
    from kernelwright.verifier.build_failure import build_failure

    failure = build_failure(exc)
    return failure.detail() if failure is not None else f"{type(exc).__name__}: {str(exc)[:400]}"


def bound_module(solution: str, ext: Any, index: int, functions: Sequence[str]) -> types.ModuleType:
    """The solution's module with its `load_inline` answered by its own functions of the batch extension."""
    import torch.utils.cpp_extension as cpp_ext

    own = types.SimpleNamespace(**{fn: getattr(ext, f"b{index}_{fn}") for fn in functions})
    module = types.ModuleType("kw_trusted_solution")
    saved = cpp_ext.load_inline
    cpp_ext.load_inline = lambda *a, **k: own  # type: ignore[assignment]
    try:
        exec(compile(solution, "<solution>", "exec"), module.__dict__)  # noqa: S102 (trusted)
    finally:
        cpp_ext.load_inline = saved
    return module


def problem_module(reference: str) -> types.ModuleType:
    module = types.ModuleType("kw_trusted_problem")
    exec(compile(reference, "<reference>", "exec"), module.__dict__)  # noqa: S102 (trusted)
    return module


def timed_sample(task_id: str, share: float) -> bool:
    """Whether this task is timed: a deterministic `share` of the tasks, by id."""
    return share >= 1.0 or (zlib.crc32(task_id.encode()) % 10_000) < share * 10_000


def check_chunk(tasks: Sequence[SynthTask], build_root: Path, time_share: float = 0.1,
                timing_lock: str | None = None, seeds: tuple[int, ...] = (0,), pch: bool = False) -> list[PairCheck]:
    """Build and check a chunk of tasks on this process's GPU."""
    results: dict[int, PairCheck] = {}
    pieces, caps = built_pieces(tasks, build_root, pch)
    for idx, ext, error, build_s in pieces:
        for pos, i in enumerate(idx):
            t = tasks[i]
            captured = caps[i]
            if ext is None or captured is None:
                results[i] = PairCheck(t.id, "compile_error", error, build_s=build_s)
                continue
            start = time.perf_counter()
            try:
                check = check_task(t, bound_module(t.solution, ext, pos, captured.functions), seeds,
                                   timed_sample(t.id, time_share), timing_lock)
            except Exception as exc:  # noqa: BLE001 (a failing solution is this task's verdict)
                check = PairCheck(t.id, "runtime_error", f"{type(exc).__name__}: {str(exc)[:300]}")
            results[i] = dataclasses.replace(check, build_s=build_s, check_s=time.perf_counter() - start)
    return [results[i] for i in range(len(tasks))]


def _draw(problem: types.ModuleType, shape: dict[str, Any], seed: int, dist: str) -> list[Any]:
    import torch

    from kernelwright.verifier.inputs import draw_check_inputs

    with torch.device("cuda"):
        return draw_check_inputs(problem, shape, seed, dist)


def check_task(task: SynthTask, solution: types.ModuleType, seeds: tuple[int, ...], timed: bool,
               timing_lock: str | None) -> PairCheck:
    import torch

    from kernelwright.verifier.inputs import DISTRIBUTIONS, clone, compare
    from kernelwright.verifier.tolerance import fp64_output, fp64_twin

    problem = problem_module(task.reference)
    shapes = getattr(problem, "SHAPES", None) or [{}]
    init = problem.get_init_inputs()
    worst = 0.0
    with torch.no_grad():
        for shape in shapes:
            torch.manual_seed(seeds[0])
            ref = problem.Model(*init).cuda().eval()
            torch.manual_seed(seeds[0])
            new = solution.ModelNew(*init).cuda().eval()
            warm = _draw(problem, shape, seeds[0], DISTRIBUTIONS[0])
            twin = fp64_twin(problem, init, ref, seeds[0], warm, "cuda")
            outs = []
            for dist in DISTRIBUTIONS:
                for seed in seeds:
                    inputs = _draw(problem, shape, seed, dist)
                    expected = ref(*clone(inputs))
                    outs.append(expected)
                    reason, detail, err = compare(new(*clone(inputs)), expected, fp64_output(twin, inputs))
                    if reason is not None:
                        return PairCheck(task.id, reason, f"{shape} {dist}: {detail}")
                    worst = max(worst, err) if err == err else worst
            if degenerate := _degenerate(outs):
                return PairCheck(task.id, degenerate, f"the reference output at {shape}")
    figures: dict[str, float | None] = {}
    if timed:
        figures = _timed_figures(problem, shapes[0], init, solution, task, timing_lock)
    return PairCheck(task.id, "correct", "", max_abs_err=worst, **figures)  # type: ignore[arg-type]


def _degenerate(outs: list[Any]) -> str | None:
    import torch

    first = outs[0]
    if not isinstance(first, torch.Tensor) or first.numel() == 0:
        return None
    if all(bool((o == o.reshape(-1)[0]).all()) for o in outs):
        return "degenerate_constant"
    if all(o.shape == first.shape and torch.equal(o, first) for o in outs[1:]):
        return "degenerate_input_independent"
    return None


def _median_ms(fn: Any, inputs: list[Any], reps: int = 20) -> float:
    import torch

    for _ in range(3):
        fn(*inputs)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _timed_figures(problem: types.ModuleType, shape: dict[str, Any], init: list[Any], solution: types.ModuleType,
                   task: SynthTask, timing_lock: str | None) -> dict[str, float | None]:
    import contextlib

    import torch
    from filelock import FileLock

    from kernelwright.cuda.static_checks import kernel_names
    from kernelwright.verifier.profiling import custom_share
    from kernelwright.verifier.spec import Spec
    from kernelwright.verifier.summary import roofline

    ref = problem.Model(*init).cuda().eval()
    new = solution.ModelNew(*init).cuda().eval()
    inputs = _draw(problem, shape, 7000, "default")
    lock = FileLock(timing_lock) if timing_lock else contextlib.nullcontext()
    with torch.no_grad(), lock:
        ref_ms = _median_ms(ref, inputs)
        new_ms = _median_ms(new, inputs)
    share = custom_share(new, inputs, set(kernel_names(task.solution)))
    spec = Spec(problem="", candidate="", result="")
    roof = roofline(problem, shape, task.dtype, new_ms, spec)
    return {"runtime_ms": new_ms, "ref_runtime_ms": ref_ms,
            "speedup": ref_ms / new_ms if new_ms > 0 and math.isfinite(ref_ms) else None,
            "custom_kernel_time_share": share, "roofline_share": roof}
