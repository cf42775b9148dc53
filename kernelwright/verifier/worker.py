"""The verification worker: one candidate, one problem, one fresh process (and CUDA context).

    python -m kernelwright.verifier.worker SPEC.json      # started by kernelwright.verifier.verify

SPEC.json names the problem, the candidate, the result file and the protocol options. The worker
writes its progress (`phase`) and finally its verdict to the result file, atomically, so that the
parent can tell where a worker that died (crash, `os._exit`, timeout) was. Protocol:
docs/verification.md; the reason codes are in `kernelwright.verifier.verdict`.

This module holds the protocol (`verify`: correctness on every shape, then timing, then a recheck)
and the entry point; its parts are in spec.py (the spec and progress files), isolation.py (no
network, the build, imports), inputs.py (input draws and comparison), tolerance.py (the tolerance
rules and the float64 reference), guard.py (the harness guard), timer.py, timing.py and profiling.py.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelwright.verifier.guard import HarnessGuard, held_check_models
from kernelwright.verifier.inputs import DISTRIBUTIONS, clone, compare, draw_check_inputs, draw_inputs, poison
from kernelwright.verifier.isolation import (
    BUILD_PATHS,
    Rejected,
    import_file,
    no_network,
    patch_load_inline,
    thread_count,
)
from kernelwright.verifier.profiling import candidate_kernel_names, profiler_started_alongside
from kernelwright.verifier.spec import Progress, Spec
from kernelwright.verifier.timer import Timer
from kernelwright.verifier.timing import read_ref_cache, ref_cache_path, time_shape
from kernelwright.verifier.tolerance import fp64_output
from kernelwright.verifier.verdict import ShapeResult, Verdict

# ---------------------------------------------------------------- correctness


def _run_candidate(new: Any, inputs: list[Any], timer: Timer, guard: HarnessGuard, like: Any) -> Any:
    """One checked call. `like` (an empty tensor shaped as the output) sizes the poisoned memory."""
    import torch

    originals = clone(inputs)
    poison(like)
    out = new(*inputs)
    torch.cuda.current_stream().synchronize()
    snapshot = out.clone() if type(out) is torch.Tensor else out
    torch.cuda.synchronize()
    err = timer.pending_error()
    if err:
        raise Rejected("launch_error", f"CUDA error {err} left pending by the candidate's launch")
    guard.check()
    for a, b in zip(inputs, originals, strict=True):
        if isinstance(a, torch.Tensor) and not torch.equal(a, b):
            raise Rejected("input_mutation", "the forward changed an input tensor in place")
    if type(out) is torch.Tensor and not torch.equal(snapshot.nan_to_num(), out.nan_to_num()):
        raise Rejected("async_escape", "the output changed after the current stream finished: work on a side stream")
    return out


def check_shape(problem: ModuleType, candidate: ModuleType, shape: dict[str, Any], spec: Spec,
                timer: Timer, guard: HarnessGuard) -> tuple[float, str]:
    """Correctness on one shape: every distribution x seed; returns the worst max abs error and the
    tolerance rule(s) that judged (comma-separated). The reference model and its float64 twin are
    held by the guard meanwhile (attributes, hooks, weights)."""
    import torch

    refs: list[Any] = []
    rules: set[str] = set()
    warm = draw_check_inputs(problem, shape, spec.seeds[0], DISTRIBUTIONS[0])  # the first draw's inputs
    # one instance of each for every draw: caches persist
    with torch.no_grad(), held_check_models(problem, candidate, spec.seeds[0], guard, warm) as models:
        worst = _check_draws(problem, shape, spec, (timer, guard), models, (refs, rules))
    _check_problem_depends_on_input(refs)
    return worst, ",".join(sorted(rules))


def _check_draws(problem: ModuleType, shape: dict[str, Any], spec: Spec, harness: tuple[Timer, HarnessGuard],
                 models: tuple[Any, Any | None, Any], seen: tuple[list[Any], set[str]]) -> float:
    """Every distribution x seed; the reference outputs are appended to `seen[0]`, the rules that
    judged added to `seen[1]`.

    Order: distribution-major, so a failure right after a passing draw of the same distribution
    that repeats the previous output is result caching (class 6), and a failure on the first draw
    of a new distribution after the default one passed is an input-distribution cheat (class 3).
    """
    (timer, guard), (ref_model, ref64_model, new_model), (refs, rules) = harness, models, seen
    worst = 0.0
    previous: tuple[str, Any] | None = None
    for dist in DISTRIBUTIONS:
        for seed in spec.seeds:
            inputs = draw_check_inputs(problem, shape, seed, dist)
            like = _output_like(ref_model, inputs)
            # the candidate twice, with no expected output in memory to find and copy or overwrite
            outs = [_run_candidate(new_model, clone(inputs), timer, guard, like) for _ in range(2)]
            expected = ref_model(*clone(inputs))
            expected64 = fp64_output(ref64_model, inputs)  # None: no float64 reference, the fallback rule
            for out in outs:
                reason, detail, err = compare(out, expected, expected64, rules)
                if reason is not None:
                    _raise_classified(reason, detail, out, dist, previous)
                worst = max(worst, err) if err == err else worst
            refs.append(expected)
            previous = (dist, outs[-1])
    return worst


def _output_like(ref_model: Any, inputs: list[Any]) -> Any:
    """An empty tensor shaped like the reference's output on `inputs`. The output itself is freed
    before the candidate runs (the poisoned memory then overwrites its block, so an unwritten output
    cannot show it through), and computed again after the candidate's calls."""
    import torch

    expected = ref_model(*clone(inputs))
    like = torch.empty_like(expected) if type(expected) is torch.Tensor else torch.empty(0, device="cuda")
    del expected
    return like


def _warm_up(problem: ModuleType, shape: dict[str, Any]) -> None:
    """Start the thread pools torch itself uses (CPU input draws, CUDA) before counting threads."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        problem.Model(*problem.get_init_inputs()).cuda()(*draw_inputs(problem, shape, 0, "heavy_tailed"))
    torch.cuda.synchronize()


def _raise_classified(reason: str, detail: str, out: Any, dist: str, previous: tuple[str, Any] | None) -> None:
    import torch

    if reason == "wrong_output" and previous is not None:
        prev_dist, prev_out = previous
        same = type(out) is torch.Tensor and out.shape == prev_out.shape and torch.equal(
            out.nan_to_num(), prev_out.nan_to_num())
        if same and prev_dist == dist:
            raise Rejected("result_caching", f"a new {dist} input returned the previous input's output")
        if prev_dist != dist:
            raise Rejected("input_independent", f"correct on {prev_dist} inputs, wrong on {dist} inputs ({detail})")
    raise Rejected(reason, detail)


def _check_problem_depends_on_input(refs: list[Any]) -> None:
    import torch

    if len(refs) > 1 and all(torch.equal(refs[0], r) for r in refs[1:]):
        raise Rejected("problem_input_independent", "the reference output is the same for every input")


# ---------------------------------------------------------------- the protocol


def _geomean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals and len(vals) == len(values) else None


def _timing_warnings(shapes: list[ShapeResult], runtime: float | None, speedup: float | None) -> list[str]:
    """A speedup over 10x beside the judge's wall-clock estimate; shapes whose every timing attempt
    other work on the GPU disturbed."""
    wall = _geomean([s.wall_runtime_ms for s in shapes])
    out = ([f"speedup {speedup:.1f}x: the timer's {runtime:.4f} ms per call beside the judge's wall-clock "
            f"estimate of {wall:.4f} ms"] if speedup and speedup > 10 and wall is not None else [])
    if disturbed := sum(s.timing_disturbed for s in shapes):
        out.append(f"other work on the GPU disturbed every timing attempt of {disturbed} shape(s): "
                   "those figures may read slow")
    return out


def summarise(shapes: list[ShapeResult], compile_s: float) -> Verdict:
    """Top-level figures are geometric means over shapes (speedup = ratio of the geomeans); the
    tolerance rules are those of every shape."""
    runtime = _geomean([s.runtime_ms for s in shapes])
    ref = _geomean([s.ref_runtime_ms for s in shapes])
    shares = [s.custom_kernel_time_share for s in shapes if s.custom_kernel_time_share is not None]
    roof = [s.roofline_share for s in shapes if s.roofline_share is not None]
    speedup = (ref / runtime) if runtime and ref else None
    warnings = _timing_warnings(shapes, runtime, speedup)
    return Verdict.of(
        "ok", "correct on every shape, seed and input distribution", compile_s=compile_s, runtime_ms=runtime,
        warnings=warnings,
        ref_runtime_ms=ref, ref_compile_runtime_ms=_geomean([s.ref_compile_runtime_ms for s in shapes]),
        speedup=speedup, per_shape=shapes,
        roofline_share=sum(roof) / len(roof) if roof else None,
        custom_kernel_time_share=min(shares) if shares else None,
        tolerance_rule=",".join(sorted({r for s in shapes for r in s.tolerance_rule.split(",") if r})),
    )


def verify(spec: Spec, progress: Progress) -> Verdict:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.set_per_process_memory_fraction(spec.memory_fraction)
    progress.write(phase="load_problem")
    problem = import_file(Path(spec.problem), "kw_problem")
    shapes = getattr(problem, "SHAPES", None) or [{}]
    dtype = str(getattr(problem, "DTYPE", "float32"))
    refs = [read_ref_cache(ref_cache_path(problem, s, spec)) for s in shapes]
    no_network()
    patch_load_inline(spec.build_cache, spec.split_build, spec.pch_lock)
    guard = HarnessGuard()
    guard.watch_module(problem, "problem")
    progress.write(phase="compile")
    start = time.perf_counter()
    try:
        with profiler_started_alongside(spec.timing and spec.profiler_warm_up):
            candidate = import_file(Path(spec.candidate), "kw_candidate")
    except Exception as exc:  # noqa: BLE001 - any import failure of the candidate is its compile error
        return Verdict.of("compile_error", f"{type(exc).__name__}: {str(exc)[-1500:]}",
                          compile_s=time.perf_counter() - start)
    compile_s = time.perf_counter() - start
    guard.check()
    timer = Timer()
    guard.watch_instance(timer, "timer")
    guard.watch_instance(timer.rt, "timer.rt")
    if not hasattr(candidate, "ModelNew"):
        return Verdict.of("no_model_new", "the candidate defines no ModelNew", compile_s=compile_s)
    _warm_up(problem, shapes[0])
    threads = thread_count()
    progress.write(phase="correctness", compile_s=compile_s)
    checked = [check_shape(problem, candidate, s, spec, timer, guard) for s in shapes]
    if thread_count() > threads:
        raise Rejected("async_escape", f"the candidate started {thread_count() - threads} thread(s)")
    results = [ShapeResult(shape=s, correct=True, max_abs_err=w, tolerance_rule=rule)
               for s, (w, rule) in zip(shapes, checked, strict=True)]
    if spec.timing:
        progress.write(phase="timing")
        names = candidate_kernel_names(Path(spec.candidate))
        results = [time_shape(problem, candidate, s, spec, (timer, guard), names, dtype, c, progress)
                   for s, c in zip(shapes, refs, strict=True)]
        for r, (w, rule) in zip(results, checked, strict=True):
            r.max_abs_err, r.tolerance_rule = w, rule
        low = [r for r in results if (r.custom_kernel_time_share or 0.0) < spec.min_custom_share]
        if low:
            raise Rejected("fallback_runtime", f"only {low[0].custom_kernel_time_share:.0%} of GPU time in the "
                                               f"candidate's kernels on shape {low[0].shape}")
        progress.write(phase="recheck")
        for s in shapes:  # class 6: fresh inputs after timing
            check_shape(problem, candidate, s, dataclasses.replace(spec, seeds=(99,)), timer, guard)
    guard.check()
    return summarise(results, compile_s)


def _classify(exc: BaseException) -> tuple[str, str]:
    import torch

    text = f"{type(exc).__name__}: {str(exc)[-1500:]}"
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return "out_of_memory", text
    code = getattr(exc, "error_code", None)
    if isinstance(exc, getattr(torch, "AcceleratorError", ())) and code in (700, 716, 719, 717, 718):
        return "illegal_memory_access", text
    if isinstance(exc, getattr(torch, "AcceleratorError", ())) and code in (1, 9, 98, 209, 701):
        return "launch_error", text
    return "exception", text


def main(argv: list[str]) -> int:
    spec = Spec(**json.loads(Path(argv[0]).read_text()))
    progress = Progress(Path(spec.result))
    try:
        verdict = verify(spec, progress)
    except Rejected as rej:
        verdict = Verdict.of(rej.reason, rej.detail, compile_s=progress.state.get("compile_s"))
    except Exception as exc:  # noqa: BLE001 - the candidate's failure is the verdict, not a worker crash
        reason, detail = _classify(exc)
        verdict = Verdict.of(reason, detail, compile_s=progress.state.get("compile_s"))
    progress.write(phase="done")
    verdict.build = ",".join(BUILD_PATHS) or None
    verdict.phase_s = dict(progress.state["phase_s"])
    progress.write(verdict=verdict.to_json())
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: a candidate's atexit hooks or threads cannot change the result


if __name__ == "__main__":
    main(sys.argv[1:])
