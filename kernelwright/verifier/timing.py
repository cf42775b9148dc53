"""Timing: the candidate, the reference and the torch.compile baseline, timed the same way.

- `median_ms`: the median of a forward's trials on the `Timer` (timer.py), each after an L2 flush
  and each on inputs never used before (`fresh_sets`, drawn before the timing lock is taken);
- `check_timed`: the outputs of the timed calls (every one, or a random subset where memory runs
  short, picked after each call returns) compared with the reference on the same inputs, so a
  candidate that does less work when it is timed is `timed_output_mismatch`;
- `wall_estimate`: the wall clock of a synchronised batch of calls, less the per-call overhead of a
  no-op through the same path, against the timer's median: a timer that reads far below what the
  clock saw (a patched runtime) is `timing_inconsistent`; one far above it was disturbed by other
  work on the GPU, and `measure` times again on new inputs (a disturbed reference is not cached);
- the reference-timing cache (`ref_cache_path`, `RefCache`, `read_ref_cache`): reference figures
  kept per problem, shape, GPU and settings, read before the candidate is imported;
- `time_shape`: one shape's figures (the timing lock held while timing), the profiler's share of
  GPU time in the candidate's kernels and the roofline share (`_roofline`) with them.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelwright import atomic
from kernelwright.verifier.guard import HarnessGuard, held_models
from kernelwright.verifier.inputs import compare, draw_inputs
from kernelwright.verifier.isolation import Rejected, exclusive
from kernelwright.verifier.profiling import custom_share
from kernelwright.verifier.spec import Progress, Spec
from kernelwright.verifier.timer import Timer
from kernelwright.verifier.verdict import ShapeResult

# ---------------------------------------------------------------- timing


TIMED_MEMORY_BYTES = 2 * 2**30  # device memory for the fresh timed inputs, and again for the kept outputs
WARM_UP_CALLS = 3
WALL_BATCH = 8  # calls per synchronised batch of the wall-clock check (short: it fits between other work)
WALL_BATCHES = 5  # batches timed; the fastest counts (another process's kernels slow some of them)
# The clock may exceed the timer's median by this factor plus this floor before the timer is called
# inconsistent. Measured on an H200 with 8 workers sharing it: honest kernels of 0.007-0.025 ms on the
# timer read 0.16-0.17 ms on the clock (CPU launch cost and other processes' kernels), so the bound
# catches a timer that reads near zero for work that takes the clock half a millisecond or more.
WALL_FACTOR = 20.0
WALL_FLOOR_MS = 0.5
DISTURBED_FACTOR = 4.0  # the timer above 4x the clock's estimate plus this floor: timed again
DISTURBED_FLOOR_MS = 0.05
TIMING_ATTEMPTS = 3


def _nbytes(values: list[Any]) -> int:
    import torch

    return sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor))


def fresh_sets(problem: ModuleType, shape: dict[str, Any], spec: Spec, seed: int) -> list[list[Any]]:
    """Input sets for the timed calls, each used once: warm-ups, then up to `max_trials` trials, as
    many as fit in TIMED_MEMORY_BYTES (never fewer than the warm-ups and `min_trials`)."""
    first = _draw_on_device(problem, shape, seed)
    fit = TIMED_MEMORY_BYTES // max(_nbytes(first), 1)
    count = max(WARM_UP_CALLS + spec.min_trials, min(WARM_UP_CALLS + spec.max_trials, fit))
    return [first] + [_draw_on_device(problem, shape, seed + i) for i in range(1, count)]


def _draw_on_device(problem: ModuleType, shape: dict[str, Any], seed: int) -> list[Any]:
    """`get_inputs` with the GPU as the default device (its random tensors drawn there: a hundred
    draws cost milliseconds, not seconds); as written where that fails."""
    import torch

    try:
        with torch.device("cuda"):
            return draw_inputs(problem, shape, seed, "default")
    except Exception:  # noqa: BLE001 - a problem whose get_inputs needs the CPU default
        return draw_inputs(problem, shape, seed, "default")


@dataclass
class Timed:
    """One forward's timing: the median (ms, the timer's), and the outputs kept for checking."""

    median_ms: float
    kept: list[tuple[int, Any]]  # (index into the input sets, the output of that timed call)


def median_ms(fn: Any, inputs_sets: list[list[Any]], timer: Timer, spec: Spec, flush: Any,
              keep: Any = None) -> Timed:
    """`keep(i)`, asked after call `i` has returned and been timed, says whether to keep its output."""
    import torch

    stream = torch.cuda.current_stream().cuda_stream
    for args in inputs_sets[:WARM_UP_CALLS]:
        fn(*args)
    torch.cuda.synchronize()
    times: list[float] = []
    kept: list[tuple[int, Any]] = []
    start = time.perf_counter()
    for i in range(WARM_UP_CALLS, len(inputs_sets)):
        flush.zero_()  # L2 flush, outside the timed region
        out: list[Any] = []
        times.append(timer.time_ms(lambda a=inputs_sets[i], o=out: o.append(fn(*a)), stream))
        if keep is not None and keep(i):
            kept.append((i, _detached(out[0])))
        if len(times) >= spec.min_trials and time.perf_counter() - start > spec.timing_budget_s:
            break
    times.sort()
    mid = len(times) // 2
    return Timed(times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid]), kept)


def _detached(out: Any) -> Any:
    """A copy of a timed call's output, made after its timing (a non-tensor is kept as it is, and
    judged by the comparison)."""
    import torch

    return out.clone() if type(out) is torch.Tensor else out


def keeper(sets: list[list[Any]], seed: int) -> Any:
    """Which timed outputs to keep: all of them where TIMED_MEMORY_BYTES holds them, else a random
    share, drawn from a generator the candidate's calls do not advance."""
    import random

    share = min(1.0, TIMED_MEMORY_BYTES / max(_nbytes(sets[0]) * len(sets), 1))
    rng = random.Random(seed)
    return lambda _i: share >= 1.0 or rng.random() < max(share, 0.05)


def check_timed(ref_model: Any, sets: list[list[Any]], kept: list[tuple[int, Any]]) -> None:
    """The kept timed outputs against the reference on the same inputs (the correctness rule)."""
    import torch

    for i, out in kept:
        expected = ref_model(*sets[i])
        torch.cuda.synchronize()
        reason, detail, _ = compare(out, expected)
        if reason is not None:
            raise Rejected("timed_output_mismatch", f"timed call {i - WARM_UP_CALLS + 1} ({reason}): {detail}; "
                                                    "its correctness runs passed")


def wall_estimate(fn: Any, sets: list[list[Any]]) -> float:
    """The judge's own estimate of one call (ms): the wall clock of the fastest of WALL_BATCHES
    synchronised batches, less a no-op's per-call cost through the same loop."""
    import torch

    batch = sets[-WALL_BATCH:]

    def per_call(f: Any) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for args in batch:
            f(*args)
        torch.cuda.synchronize()
        return 1e3 * (time.perf_counter() - t0) / len(batch)

    noop = min(per_call(lambda *_: None) for _ in range(WALL_BATCHES))
    return max(min(per_call(fn) for _ in range(WALL_BATCHES)) - noop, 0.0)


def check_consistent(median: float, wall: float) -> None:
    """`timing_inconsistent` when the timer reads far below what the wall clock saw."""
    if wall > WALL_FACTOR * median + WALL_FLOOR_MS:
        raise Rejected("timing_inconsistent", f"the timer read {median:.4f} ms per call, the judge's wall clock "
                                              f"{wall:.4f} ms")


def disturbed(median: float, wall: float) -> bool:
    """The timer read far above the wall clock: other work on the GPU (another process's kernels
    share its time) ran into the timed trials. A cold L2 alone costs well under this factor."""
    return median > DISTURBED_FACTOR * wall + DISTURBED_FLOOR_MS


@dataclass
class Measured:
    """One forward timed on fresh inputs: the timer's figure, the wall-clock estimate, the input sets
    the timed calls used and the outputs kept, and whether other work disturbed every attempt."""

    timed: Timed
    wall_ms: float
    sets: list[list[Any]]
    disturbed: bool


def measure(fn: Any, draw: Any, timer: Timer, spec: Spec, flush: Any, keep_seed: int | None = None) -> Measured:
    """Time `fn` on fresh input sets (`draw(attempt)`), again on new ones when other work disturbed
    the trials, up to TIMING_ATTEMPTS times. With `keep_seed`, the timed outputs are kept."""
    for attempt in range(TIMING_ATTEMPTS):
        sets = draw(attempt)
        keep = keeper(sets, keep_seed + attempt) if keep_seed is not None else None
        timed = median_ms(fn, sets, timer, spec, flush, keep)
        wall = wall_estimate(fn, sets)
        if not disturbed(timed.median_ms, wall):
            return Measured(timed, wall, sets, False)
    return Measured(timed, wall, sets, True)


# ---------------------------------------------------------------- the reference-timing cache


def ref_cache_path(problem: ModuleType, shape: dict[str, Any], spec: Spec) -> Path | None:
    """Reference timings are kept per problem file, shape, GPU, torch version and timing settings."""
    import torch

    if not (spec.ref_timing_cache and spec.build_cache):
        return None
    key = json.dumps([Path(problem.__file__ or "").read_text(encoding="utf-8"), shape, torch.cuda.get_device_name(),
                      torch.__version__, spec.seeds[0], spec.compile_baseline, spec.min_trials, spec.max_trials,
                      spec.timing_budget_s], sort_keys=True, default=str)
    return Path(spec.build_cache) / "ref-timings" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


@dataclass(frozen=True)
class RefCache:
    """Where a shape's reference timings are cached and what was there (ms: reference, torch.compile),
    both settled before the candidate is imported, so it can neither forge nor redirect its baseline."""

    path: Path | None
    figures: tuple[float, float | None] | None


def read_ref_cache(path: Path | None) -> RefCache:
    if path is None or not path.is_file():
        return RefCache(path, None)
    try:
        data = json.loads(path.read_text())
        return RefCache(path, (float(data["ref_runtime_ms"]), data["ref_compile_runtime_ms"]))
    except (OSError, ValueError, KeyError, TypeError):
        return RefCache(path, None)


def _write_ref_cache(path: Path | None, ref_ms: float, compiled_ms: float | None) -> None:
    if path is not None:
        atomic.write_json(path, {"ref_runtime_ms": ref_ms, "ref_compile_runtime_ms": compiled_ms})


# ---------------------------------------------------------------- one shape


def time_shape(problem: ModuleType, candidate: ModuleType, shape: dict[str, Any], spec: Spec,
               harness: tuple[Timer, HarnessGuard], names: set[str], dtype: str, ref: RefCache,
               progress: Progress | None = None) -> ShapeResult:
    """Candidate, reference and torch.compile baseline timed the same way, one process at a time.

    Cached reference figures (`ref`, read before the candidate was imported) replace timing the
    reference again; torch.compile and the profiler's kernel share run outside the lock (kernel
    durations are a ratio there, not a timing). The guard holds the reference model meanwhile and
    is checked at the end.
    """
    import torch

    timer, guard = harness
    warm = [_draw_on_device(problem, shape, spec.timing_seed - 1 - i) for i in range(WARM_UP_CALLS)]
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")

    def draw(attempt: int) -> list[list[Any]]:  # inside the lock: no other worker times meanwhile
        return fresh_sets(problem, shape, spec, spec.timing_seed + 100_000 * attempt)

    with torch.no_grad(), held_models(problem, candidate, spec.seeds[0], guard, warm[0]) as (ref_model, new_model):
        phase = progress.write if progress is not None else (lambda **_: None)
        phase(phase="compile_baseline")
        compiled_model = _compiled(ref_model, warm) if ref.figures is None and spec.compile_baseline else None
        phase(phase="timing_wait")
        with exclusive(spec.timing_lock):
            phase(phase="timing")
            cand = measure(new_model, draw, timer, spec, flush, keep_seed=spec.timing_seed)
            check_consistent(cand.timed.median_ms, cand.wall_ms)
            ref_ms, compiled_ms = ref.figures if ref.figures is not None else _time_reference(
                (ref_model, compiled_model), draw, timer, spec, flush, ref)
            # Under the lock too: its reference forwards would load the GPU under another's timing.
            phase(phase="check_timed")
            check_timed(ref_model, cand.sets, cand.timed.kept)
        # Outside the lock, like the correctness runs: its few forwards barely load the GPU.
        phase(phase="profile")
        share = custom_share(new_model, warm[0], names)
        guard.check()  # the timed forwards ran with the timer and the reference in reach
    runtime = cand.timed.median_ms
    return ShapeResult(shape=shape, correct=True, runtime_ms=runtime, ref_runtime_ms=ref_ms,
                       ref_compile_runtime_ms=compiled_ms, speedup=ref_ms / runtime if runtime > 0 else None,
                       roofline_share=_roofline(problem, shape, dtype, runtime, spec), custom_kernel_time_share=share,
                       wall_runtime_ms=cand.wall_ms, timing_disturbed=cand.disturbed)


def _time_reference(models: tuple[Any, Any], draw: Any, timer: Timer, spec: Spec, flush: Any,
                    ref: RefCache) -> tuple[float, float | None]:
    """The reference (and its torch.compile, when there is one) timed like the candidate; cached
    only when other work disturbed neither."""
    ref_model, compiled_model = models
    measured = measure(ref_model, draw, timer, spec, flush)
    compiled = measure(compiled_model, draw, timer, spec, flush) if compiled_model is not None else None
    ref_ms, compiled_ms = measured.timed.median_ms, compiled.timed.median_ms if compiled is not None else None
    if not measured.disturbed and not (compiled is not None and compiled.disturbed):
        _write_ref_cache(ref.path, ref_ms, compiled_ms)
    return ref_ms, compiled_ms


def _compiled(ref_model: Any, sets: list[list[Any]]) -> Any:
    """torch.compile of the reference, compiled and warmed up; None if it cannot compile."""
    import torch

    try:
        compiled = torch.compile(ref_model)
        for args in sets:
            compiled(*args)
        torch.cuda.synchronize()
        return compiled
    except Exception:  # noqa: BLE001 - the baseline is optional; its absence is reported as null
        return None


def _roofline(problem: ModuleType, shape: dict[str, Any], dtype: str, runtime_ms: float, spec: Spec) -> float | None:
    if not (hasattr(problem, "flops") and hasattr(problem, "bytes_moved")) or runtime_ms <= 0:
        return None
    peaks = spec.peak_flops or {"float32": 67e12, "bfloat16": 790e12, "float16": 790e12, "int8": 1580e12}
    t_flops = float(problem.flops(**shape)) / peaks.get(dtype, peaks["float32"])
    t_bytes = float(problem.bytes_moved(**shape)) / spec.peak_bytes_per_s
    t_sol_ms = max(1e3 * max(t_flops, t_bytes), spec.launch_floor_ms)
    return t_sol_ms / runtime_ms
