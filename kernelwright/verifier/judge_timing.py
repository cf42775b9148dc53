"""The judge's timing of one shape: the candidate timed in the runner, bounded and checked here.

- `time_candidate`: the runner times ModelNew on fresh inputs of a seed it learns with the request
  (`time`), keeping every timed output where memory allows (else a random quarter, by a seed it
  also learns then); the judge's own clock times batches of calls through the channel
  (`judge_clock`); a timer far above that estimate was disturbed and is timed again on new
  inputs, one below what the estimate allows (timing.below_bound) is timed again and then
  `timing_inconsistent`;
- `judge_clock`: batches grown until one lasts tens of milliseconds, each call's inputs drawn just
  before it; several rounds, each batch less the cost per call of a no-op batch through the same
  path taken beside it (capped by the judge's own cost of the same draws, also taken beside it); the
  lowest estimate counts, and its batch's outputs are checked;
- `check_timed`: kept outputs against the reference on the same inputs, drawn by the judge
  (`timed_output_mismatch`);
- the reference's figures: reference_timing.py, called here under the timing lock;
- `time_shape`: all of it for one shape, the timings under the timing lock, the check of the
  timed outputs and the kernel share (kernel_share.py) after it.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kernelwright.verifier.channel import ChannelBroken, Described, field, load_output
from kernelwright.verifier.gpu_gate import gpu_step, timing_held
from kernelwright.verifier.gpu_wait import spinning
from kernelwright.verifier.held_outputs import held_kept, summed_outputs
from kernelwright.verifier.inputs import form_failure
from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.kernel_clock import below_kernel_clock, kernel_clock_rejection, kernel_supported_speedup
from kernelwright.verifier.kernel_share import kernel_ms_alone, kernel_share
from kernelwright.verifier.link import Link
from kernelwright.verifier.reference_timing import compiled_reference, reference_figures
from kernelwright.verifier.spec import Progress, Spec
from kernelwright.verifier.timing import (
    ATTEMPT_SEEDS,
    CLOCK_BATCHES,
    DRAW_SLACK,
    TIMED_MEMORY_BYTES,
    TIMING_ATTEMPTS,
    WALL_FIRST_CALLS,
    WALL_MAX_CALLS,
    WALL_TARGET_MS,
    WARM_UP_CALLS,
    OutputWriter,
    RefCache,
    TimingSettings,
    below_bound,
    bounded_speedup,
    calls_per_batch,
    checked_indices,
    checksum,
    disturbed,
    draw_on_device,
    inconsistent,
    nbytes,
    set_count,
    settled,
)
from kernelwright.verifier.tolerance import TimedBound, judge_timed
from kernelwright.verifier.verdict import ShapeResult

if TYPE_CHECKING:
    from kernelwright.verifier.judge_checks import Checked

@dataclass
class ClockTarget:
    """What the judge's clock needs of a shape: the problem, the reference and the bound its outputs
    are checked by, and the output's form (`like`: shape and dtype; its size in bytes)."""

    problem: ModuleType
    shape: dict[str, Any]
    ref_model: Any
    bound: TimedBound
    like: dict[str, Any]
    output_bytes: int


@dataclass
class WallEstimate:
    """The judge's clock over the runner's batches: one call's estimate (ms) and how its round reached
    it: calls per batch, the batch (ms, whole), the cost per call subtracted (the round's no-op
    batch's, at most the round's judge's own draws' times DRAW_SLACK plus the channel) and those
    draws per call."""

    per_call_ms: float
    calls: int = 0
    batch_ms: float = 0.0
    overhead_ms: float = 0.0
    draw_ms: float = 0.0


@dataclass
class WallCheck:
    """The checked outputs of one clock's counted batch (loaded on the host, their sums already held to
    the runner's) and the seed of its first call: compared with the reference after the timing lock."""

    base: int
    kept: list[tuple[int, Any]]


@dataclass
class CandidateTiming:
    median_ms: float
    wall: WallEstimate
    seed: int
    kept: list[tuple[int, Any]]
    disturbed: bool

    @property
    def wall_ms(self) -> float:
        return self.wall.per_call_ms


def judge_clock(link: Link, call: dict[str, Any], seed: int, target: ClockTarget,
                checks: list[WallCheck] | None = None,
                enough: Callable[[WallEstimate], bool] | None = None) -> WallEstimate:
    """One call's time on the judge's clock: batches of calls in the runner, each call's inputs drawn
    just before it and its output summed on the host before the next (so each call ends when its
    output is written), grown until a batch lasts WALL_TARGET_MS. Then CLOCK_BATCHES rounds, each a
    no-op batch through the same path (the same draws and sums, and a no-op candidate that writes an
    output like the candidate's), the candidate's batch, and the judge's own draws and sums of as
    many calls: the round's estimate is its batch per call less its no-op batch's cost per call,
    which may not exceed the judge's own cost of those draws and sums (times DRAW_SLACK) plus the
    channel's. Each round's cost is taken beside its batch, so other processes' work on the GPU
    (time slices every call's host read-back waits for) weighs on both alike; the lowest estimate
    counts. Outputs of its batch, chosen after every batch ran, are checked: each against the sum
    the runner reported for it, and against the reference here or, given `checks`, later (check_wall:
    after the timing lock, which the reference's forwards then do not hold). `enough(best)` true after
    a round ends the rounds there (timing.settled)."""
    link.ask("prepare_wall", **call, like=target.like)
    bases = itertools.count(seed, WALL_MAX_CALLS)

    def batch(noop: bool, calls: int) -> tuple[float, int, list[Any]]:
        base = next(bases)
        start = time.perf_counter()
        reply = link.ask("run_wall", noop=noop, seed=base, count=calls)
        elapsed = 1e3 * (time.perf_counter() - start)
        sums = field(reply, "checksums", list)
        if len(sums) != calls:
            raise ChannelBroken(f"{len(sums)} sums for a batch of {calls} calls")
        return elapsed, base, sums

    calls = min(WALL_FIRST_CALLS, calls_per_batch(0.0, target.output_bytes, 1))
    while True:  # grow the batch until it lasts WALL_TARGET_MS (or holds all it may)
        ms = batch(False, calls)[0]
        link.ask("save_wall", keep=False, indices=[], release=False)
        grown = calls_per_batch(ms / calls, target.output_bytes, calls)
        if ms >= WALL_TARGET_MS or grown <= calls:
            break
        calls = grown
    empty = min(batch(True, 0)[0] for _ in range(3))  # the channel's round trip
    writer = OutputWriter.of_form(target.like)  # the judge's own no-op candidate, made once
    draw_ms(writer, target, next(bases), min(calls, 4))  # the judge's draws warm before any is taken
    best, best_base, claimed = WallEstimate(math.inf), 0, list[Any]()
    for _ in range(CLOCK_BATCHES):  # each round's cost per call subtracted from its own batch
        noop = batch(True, calls)[0]
        ms, base, sums = batch(False, calls)
        draw = draw_ms(writer, target, next(bases), calls)
        overhead = min(noop / calls, DRAW_SLACK * draw + empty / calls)
        estimate = WallEstimate(max(ms / calls - overhead, 0.0), calls, ms, overhead, draw)
        faster = estimate.per_call_ms < best.per_call_ms
        if faster:
            best, best_base, claimed = estimate, base, sums
        link.ask("save_wall", keep=faster, indices=[], release=False)
        if enough is not None and enough(best):
            break
    counted = WallCheck(best_base, _counted_outputs(link, target, claimed))
    if checks is None:
        check_wall(target, [counted])
    else:
        checks.append(counted)
    return best


def draw_ms(writer: OutputWriter, target: ClockTarget, seed: int, calls: int) -> float:
    """The judge's own cost (ms per call) of what a no-op batch does per call: draw the call's
    inputs, call the no-op candidate (`writer`) on them and sum its output on the host, over
    `calls` calls."""
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(calls):
        checksum(writer(*draw_on_device(target.problem, target.shape, seed + i)))
    return 1e3 * (time.perf_counter() - start) / max(calls, 1)


def _counted_outputs(link: Link, target: ClockTarget, claimed: list[Any]) -> list[tuple[int, Any]]:
    """The checked outputs of the counted batch, loaded and kept on the host: each must be what the
    runner summed right after its call (else the call's work went on after it said it ended)."""
    indices = checked_indices(len(claimed), target.output_bytes, random.SystemRandom())
    reply = link.ask("save_wall", keep=False, indices=indices, release=True)
    return summed_outputs(link, field(reply, "kept", list), indices, [claimed[i] for i in indices],
                          "calls of the counted batch",
                          lambda i: f"call {i + 1} of a batch on the judge's clock returned before its output was "
                                    "written: the output saved later differs from the one summed right after the call")


def check_wall(target: ClockTarget, checks: list[WallCheck]) -> None:
    """The counted batches' checked outputs against the reference on the same inputs, clock by clock."""
    for check in checks:
        check_timed(target.problem, target.shape, target.ref_model, check.base, check.kept, target.bound,
                    lambda i: f"call {i + 1} of a batch on the judge's clock")
        check.kept.clear()


def _no_phase(name: str) -> None:
    """Where no progress file follows the phases."""


def time_candidate(link: Link, call: dict[str, Any], seed: int, keep_all: bool, target: ClockTarget,
                   bounded: bool = True, checks: list[WallCheck] | None = None,
                   phase: Callable[[str], None] = _no_phase, held: bool = False,
                   early: bool = False) -> CandidateTiming:
    """The runner's timing, attempt by attempt on new inputs while other work disturbed it or while
    it read below what the judge's clock allows (`bounded`); below it on every attempt:
    `timing_inconsistent`. Each attempt's clock checks its counted batch (given `checks`: later).
    `phase(name)` is told where each attempt is: `timing` (the runner's trials), `timing_kept` (their
    kept outputs read back), `timing_clock` (the judge's clock). `held` (with `keep_all`): the runner
    holds every trial's output with its sum and the judge reads back those it then chooses
    (held_outputs.py), else every kept output is written and read back. `early` (with `bounded`): the
    clock's rounds end at the first after which the timer reads neither below its bound nor disturbed
    (timing.settled): later rounds could only lower the estimate, which rejects and caps nothing more."""
    hold = held and keep_all
    last: CandidateTiming | None = None
    last_high: CandidateTiming | None = None  # the last attempt disturbed but not below the bound
    for attempt in range(TIMING_ATTEMPTS):
        s = seed + ATTEMPT_SEEDS * attempt
        phase("timing")
        reply = link.ask("time", **call, seed=s, keep_all=keep_all, keep_seed=s ^ 0x5EED, hold=hold)
        median = float(field(reply, "median_ms", (int, float)))
        if median < 0:
            raise ChannelBroken(f"a negative median ({median} ms)")
        phase("timing_kept")
        kept = held_kept(link, reply, target.output_bytes) if hold else _kept(reply, link.outbox, keep_all)
        phase("timing_clock")
        enough = (lambda w, m=median: settled(m, w.per_call_ms)) if early and bounded else None
        wall = judge_clock(link, call, s + ATTEMPT_SEEDS // 2, target, checks, enough)
        timing = CandidateTiming(median, wall, s, kept, False)
        low = bounded and below_bound(median, wall.per_call_ms)
        if not low and not disturbed(median, wall.per_call_ms):
            return timing
        last = timing
        last_high = last_high if low else timing  # earlier attempts' kept outputs are let go
    if last_high is None:  # below the bound on every attempt
        assert last is not None
        raise inconsistent(last.median_ms, last.wall_ms)
    last_high.disturbed = True
    return last_high


def _kept(reply: dict[str, Any], outbox: Path, keep_all: bool) -> list[tuple[int, Any]]:
    """The kept outputs a `time` reply names, loaded; every trial's output must be there when all
    were asked for, and each index a timed call's (no warm-up, none twice)."""
    trials, sets = int(field(reply, "trials", int)), int(field(reply, "sets", int))
    entries = field(reply, "kept", list)
    indices = [e[0] for e in entries if isinstance(e, list) and len(e) == 2 and type(e[0]) is int]
    if len(indices) != len(entries) or len(set(indices)) != len(indices):
        raise ChannelBroken("kept outputs that are not distinct [index, header] pairs")
    if any(not WARM_UP_CALLS <= i < sets for i in indices) or trials > sets - WARM_UP_CALLS or trials < 1:
        raise ChannelBroken(f"kept indices outside the {trials} timed calls")
    if keep_all and sorted(indices) != list(range(WARM_UP_CALLS, WARM_UP_CALLS + trials)):
        raise ChannelBroken(f"{len(indices)} kept outputs of {trials} timed calls, all of which were asked for")
    if not indices:
        raise ChannelBroken("no timed output kept")
    return [(i, load_output(header, outbox, "cpu")) for i, header in entries]  # on the GPU one by one


def check_timed(problem: ModuleType, shape: dict[str, Any], ref_model: Any, seed: int,
                kept: list[tuple[int, Any]], bound: TimedBound, label: Callable[[int], str] | None = None) -> None:
    """Each kept output against the float32 reference on the same inputs (call i: the draw of
    seed + i), within the bound the correctness draws calibrated (tolerance.judge_timed); outputs
    are moved to the GPU one at a time. `label(i)` names call i in a failure's detail."""
    import torch

    name = label or (lambda i: f"timed call {i - WARM_UP_CALLS + 1}")
    for i, out in kept:
        expected = ref_model(*draw_on_device(problem, shape, seed + i))
        torch.cuda.synchronize()
        on_device = out.to(expected.device) if type(out) is torch.Tensor and type(expected) is torch.Tensor else out
        reason, detail = timed_failure(on_device, expected, bound)
        del expected
        if reason is not None:
            raise Rejected("timed_output_mismatch", f"{name(i)} ({reason}): {detail}; its correctness runs passed")


def timed_failure(out: Any, expected: Any, bound: TimedBound) -> tuple[str | None, str]:
    """(reason or None, detail) of a timed output: the checks of `compare` on what it is (a tensor
    on the GPU, of the reference's shape and dtype), then `judge_timed`."""
    if isinstance(out, Described):
        return "non_tensor_output", f"output is {out.kind} on {out.device}"
    form = form_failure(out, expected)
    if form is not None:
        return form
    j = judge_timed(out, expected, bound)
    return (None, j.detail) if j.ok else ("wrong_output", j.detail)


def keep_all_fits(problem: ModuleType, shape: dict[str, Any], spec: Spec, seed: int) -> bool:
    """Whether every timed call's output fits beside its inputs (the outputs are about as large)."""
    first = draw_on_device(problem, shape, seed)
    return nbytes(first) * set_count(first, TimingSettings.of(spec)) <= TIMED_MEMORY_BYTES


def clock_target(problem: ModuleType, shape: dict[str, Any], checked: Checked, inputs: list[Any]) -> ClockTarget:
    """The shape's target for the judge's clock, its output's form from the reference on `inputs`."""
    import torch

    out = checked.ref_model(*inputs)
    like = out if type(out) is torch.Tensor else torch.empty(0)
    return ClockTarget(problem, shape, checked.ref_model, checked.timed_bound,
                       {"shape": list(like.shape), "dtype": str(like.dtype).removeprefix("torch.")}, nbytes([like]))


def _timed(link: Link, call: dict[str, Any], target: ClockTarget, keep_all: bool, models: tuple[Any, Any],
           spec: Spec, ref: RefCache, progress: Progress) -> tuple[CandidateTiming, float, float | None]:
    """The candidate (runner's timer and the judge's clock) and the reference timed under the timing
    lock, spinning through GPU waits as the timer bound was calibrated; then the clocks' counted
    batches checked against the reference. That check, and the one of the runner's kept outputs
    after it, run after the lock: the outputs are on the host, and the checks' forwards (one draw and
    one output on the GPU at a time, within the candidate's admitted estimate) share the GPU with
    others' trials as their correctness runs do; under the lock they held it ~0.5 s a candidate. A
    rejection under the lock comes after the checks of the clocks that ran before it."""
    import torch

    checks: list[WallCheck] = []
    progress.write(phase="timing_wait")
    try:
        with timing_held(spec.timing_lock, spec.gpu_gate), torch.no_grad(), spinning():
            cand = time_candidate(link, call, spec.timing_seed, keep_all, target, spec.timer_bound, checks,
                                  phase=lambda name: progress.write(phase=name), held=spec.held_timed_outputs,
                                  early=spec.early_stop_clock)
            if ref.figures is None:  # its own phase: what a cached reference timing saves under the lock
                progress.write(phase="timing_reference")
            ref_ms, compiled_ms = ref.figures if ref.figures is not None else reference_figures(
                models, target.problem, target.shape, spec, ref)
            torch.cuda.empty_cache()  # the timing's memory goes back to the GPU for other candidates
    except Rejected:
        with torch.no_grad(), gpu_step(spec.timing_lock, spec.gpu_gate):
            check_wall(target, checks)  # a wrong output of an earlier clock is what was found first
        raise
    progress.write(phase="check_timed")
    with torch.no_grad(), gpu_step(spec.timing_lock, spec.gpu_gate):
        check_wall(target, checks)
    return cand, ref_ms, compiled_ms


def time_shape(problem: ModuleType, shape: dict[str, Any], spec: Spec, link: Link, checked: Checked,
               ref: RefCache, progress: Progress, names: list[str]) -> ShapeResult:
    """One shape's figures: the candidate (runner) on its timer and the judge's clock and the
    reference (judge), under the timing lock; the timed outputs checked (judge) and the kernel share
    (runner) after it. The speedup never exceeds what the judge's clock supports (timing.bounded_speedup),
    nor what the profiler's kernel time does (kernel_clock.py)."""
    import torch

    call, ref_model, timed_bound = checked.call, checked.ref_model, checked.timed_bound
    progress.write(phase="compile_baseline")
    with gpu_step(spec.timing_lock, spec.gpu_gate):
        warm = [draw_on_device(problem, shape, spec.timing_seed - 1 - i) for i in range(WARM_UP_CALLS)]
        compiled = compiled_reference(ref_model, warm) if ref.figures is None and spec.compile_baseline else None
        with torch.no_grad():
            target = clock_target(problem, shape, checked, warm[0])
    keep_all = keep_all_fits(problem, shape, spec, spec.timing_seed)
    del warm
    cand, ref_ms, compiled_ms = _timed(link, call, target, keep_all, (ref_model, compiled), spec, ref, progress)
    with torch.no_grad(), gpu_step(spec.timing_lock, spec.gpu_gate):
        check_timed(problem, shape, ref_model, cand.seed, cand.kept, timed_bound)
    cand.kept.clear()
    torch.cuda.empty_cache()
    progress.write(phase="profile")
    profiled = kernel_share(link, call, spec, names)
    kernel_ms = profiled.kernel_ms
    if spec.timer_bound and below_kernel_clock(cand.median_ms, kernel_ms):
        kernel_ms = min(kernel_ms, kernel_ms_alone(link, call, spec, names))
        if below_kernel_clock(cand.median_ms, kernel_ms):
            raise kernel_clock_rejection(cand.median_ms, kernel_ms)
    speedup = (bounded_speedup(ref_ms, cand.median_ms, cand.wall_ms) if spec.timer_bound else
               ref_ms / cand.median_ms if cand.median_ms > 0 else None)
    if spec.timer_bound:
        speedup = kernel_supported_speedup(ref_ms, speedup, kernel_ms)
    return ShapeResult(shape=shape, correct=True, runtime_ms=cand.median_ms, ref_runtime_ms=ref_ms,
                       ref_compile_runtime_ms=compiled_ms, speedup=speedup,
                       custom_kernel_time_share=profiled.share, custom_kernel_time_share_spread=profiled.spread,
                       wall_runtime_ms=cand.wall_ms, timing_disturbed=cand.disturbed,
                       kernel_runtime_ms=kernel_ms)
