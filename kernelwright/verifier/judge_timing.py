"""The judge's timing of one shape: the candidate timed in the runner, bounded and checked here.

- `time_candidate`: the runner times ModelNew on fresh inputs of a seed it learns with the request
  (`time`), keeping every timed output where memory allows (else a random quarter, by a seed it
  also learns then); the judge's own clock times a batch of calls through the channel, less a
  no-op batch through the same path (`wall_ms`); a timer far above that estimate was disturbed and
  is timed again on new inputs, one far below it is `timing_inconsistent`;
- `check_timed`: the kept outputs against the reference on the same inputs, drawn by the judge
  (`timed_output_mismatch`);
- `time_reference`: the reference and its torch.compile, timed in the judge's process with its
  own timer, cached by the judge alone;
- `time_shape`: all of it for one shape, under the timing lock, and the runner's kernel share.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kernelwright.verifier.channel import Channel, ChannelBroken, Described, field, load_output
from kernelwright.verifier.inputs import form_failure
from kernelwright.verifier.isolation import Rejected, exclusive
from kernelwright.verifier.spec import Progress, Spec
from kernelwright.verifier.timer import Timer
from kernelwright.verifier.timing import (
    TIMED_MEMORY_BYTES,
    TIMING_ATTEMPTS,
    WALL_BATCH,
    WALL_BATCHES,
    WARM_UP_CALLS,
    RefCache,
    TimingSettings,
    check_consistent,
    disturbed,
    draw_on_device,
    fresh_sets,
    measure,
    nbytes,
    set_count,
    write_ref_cache,
)
from kernelwright.verifier.tolerance import TimedBound, judge_timed
from kernelwright.verifier.verdict import ShapeResult

if TYPE_CHECKING:  # judge_checks imports this module
    from kernelwright.verifier.judge_checks import Checked

REQUEST_S = 600.0  # the longest one request may take; the whole run is bounded by verify's timeout


@dataclass
class Link:
    """The judge's handle on its runner: the channel, the runner's output folder, the request limit."""

    channel: Channel
    outbox: Path
    request_s: float = REQUEST_S

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        reply = self.channel.request(op, self.request_s, **fields)
        if "rejected" in reply:
            raise RunnerRejected(str(reply["rejected"])[:80], str(reply.get("detail", ""))[:2000])
        return reply


class RunnerRejected(Exception):
    """The runner reported a rejection of its own candidate (checked against the known reasons by the judge)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


@dataclass
class CandidateTiming:
    median_ms: float
    wall_ms: float
    seed: int
    kept: list[tuple[int, Any]]
    disturbed: bool


def wall_ms(link: Link, call: dict[str, Any], seed: int) -> float:
    """The judge's clock over WALL_BATCH synchronised calls in the runner, per call, less the same
    batch of no-ops through the same path; the fastest of WALL_BATCHES batches each."""
    link.ask("prepare_wall", **call, seed=seed, count=WALL_BATCH)

    def batch(noop: bool) -> float:
        start = time.perf_counter()
        link.ask("run_wall", noop=noop)
        return 1e3 * (time.perf_counter() - start) / WALL_BATCH

    noop = min(batch(True) for _ in range(WALL_BATCHES))
    return max(min(batch(False) for _ in range(WALL_BATCHES)) - noop, 0.0)


def time_candidate(link: Link, call: dict[str, Any], seed: int, keep_all: bool) -> CandidateTiming:
    """The runner's timing, attempt by attempt on new inputs while other work disturbed it."""
    for attempt in range(TIMING_ATTEMPTS):
        s = seed + 100_000 * attempt
        reply = link.ask("time", **call, seed=s, keep_all=keep_all, keep_seed=s ^ 0x5EED)
        median = float(field(reply, "median_ms", (int, float)))
        if median < 0:
            raise ChannelBroken(f"a negative median ({median} ms)")
        wall = wall_ms(link, call, s + 50_000)
        kept = _kept(reply, link.outbox, keep_all)
        if not disturbed(median, wall):
            return CandidateTiming(median, wall, s, kept, False)
    return CandidateTiming(median, wall, s, kept, True)


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
    return [(i, load_output(header, outbox)) for i, header in entries]


def check_timed(problem: ModuleType, shape: dict[str, Any], ref_model: Any, seed: int,
                kept: list[tuple[int, Any]], bound: TimedBound) -> None:
    """Each kept timed output against the float32 reference on the same inputs (set i: the draw of
    seed + i), within the bound the correctness draws calibrated (tolerance.judge_timed)."""
    import torch

    for i, out in kept:
        expected = ref_model(*draw_on_device(problem, shape, seed + i))
        torch.cuda.synchronize()
        reason, detail = timed_failure(out, expected, bound)
        if reason is not None:
            raise Rejected("timed_output_mismatch", f"timed call {i - WARM_UP_CALLS + 1} ({reason}): {detail}; "
                                                    "its correctness runs passed")


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


def time_reference(models: tuple[Any, Any], draw: Any, timer: Timer, settings: TimingSettings, flush: Any,
                   ref: RefCache) -> tuple[float, float | None]:
    """The reference (and its torch.compile) timed in the judge's process on fresh inputs
    (`draw(attempt)`); cached only when other work disturbed neither."""
    ref_model, compiled_model = models
    measured = measure(ref_model, draw, timer, settings, flush)
    compiled = measure(compiled_model, draw, timer, settings, flush) if compiled_model is not None else None
    ref_ms, compiled_ms = measured.timed.median_ms, compiled.timed.median_ms if compiled is not None else None
    if not measured.disturbed and not (compiled is not None and compiled.disturbed):
        write_ref_cache(ref.path, ref_ms, compiled_ms)
    return ref_ms, compiled_ms


def _reference_figures(models: tuple[Any, Any], problem: ModuleType, shape: dict[str, Any], spec: Spec,
                       ref: RefCache) -> tuple[float, float | None]:
    import torch

    settings = TimingSettings.of(spec)
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")

    def draw(attempt: int) -> list[list[Any]]:
        return fresh_sets(problem, shape, settings, spec.timing_seed + 7_000_000 + 100_000 * attempt)

    return time_reference(models, draw, Timer(), settings, flush, ref)


def compiled_reference(ref_model: Any, sets: list[list[Any]]) -> Any:
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


def keep_all_fits(problem: ModuleType, shape: dict[str, Any], spec: Spec, seed: int) -> bool:
    """Whether every timed call's output fits beside its inputs (the outputs are about as large)."""
    first = draw_on_device(problem, shape, seed)
    return nbytes(first) * set_count(first, TimingSettings.of(spec)) <= TIMED_MEMORY_BYTES


def time_shape(problem: ModuleType, shape: dict[str, Any], spec: Spec, link: Link, checked: Checked,
               ref: RefCache, progress: Progress, names: list[str]) -> ShapeResult:
    """One shape's figures: the candidate (runner), the reference (judge), the timed outputs checked
    (judge), under the timing lock; the kernel share (runner) outside it."""
    import torch

    call, ref_model, timed_bound = checked.call, checked.ref_model, checked.timed_bound
    warm = [draw_on_device(problem, shape, spec.timing_seed - 1 - i) for i in range(WARM_UP_CALLS)]
    progress.write(phase="compile_baseline")
    compiled = compiled_reference(ref_model, warm) if ref.figures is None and spec.compile_baseline else None
    keep_all = keep_all_fits(problem, shape, spec, spec.timing_seed)
    progress.write(phase="timing_wait")
    with exclusive(spec.timing_lock), torch.no_grad():
        progress.write(phase="timing")
        cand = time_candidate(link, call, spec.timing_seed, keep_all)
        check_consistent(cand.median_ms, cand.wall_ms)
        ref_ms, compiled_ms = ref.figures if ref.figures is not None else _reference_figures(
            (ref_model, compiled), problem, shape, spec, ref)
        progress.write(phase="check_timed")
        check_timed(problem, shape, ref_model, cand.seed, cand.kept, timed_bound)
    progress.write(phase="profile")
    share = float(field(link.ask("share", **call, seed=spec.timing_seed - 1, names=names), "share", (int, float)))
    if not 0.0 <= share <= 1.0:
        raise ChannelBroken(f"a kernel share of {share}")
    return ShapeResult(shape=shape, correct=True, runtime_ms=cand.median_ms, ref_runtime_ms=ref_ms,
                       ref_compile_runtime_ms=compiled_ms,
                       speedup=ref_ms / cand.median_ms if cand.median_ms > 0 else None,
                       custom_kernel_time_share=share, wall_runtime_ms=cand.wall_ms, timing_disturbed=cand.disturbed)
