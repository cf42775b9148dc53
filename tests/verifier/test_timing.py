"""Timed calls: fresh inputs for each, their outputs checked, the timer held against the wall clock.

The GPU paths run under `pytest -m gpu`; here the logic runs with the CUDA calls stood in for.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from kernelwright.verifier import judge_timing, reference_timing, timing
from kernelwright.verifier.channel import ChannelBroken
from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.spec import Spec
from kernelwright.verifier.tolerance import TimedBound


@pytest.fixture()
def no_cuda_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)


def _spec(**kw: Any) -> Spec:
    return Spec(problem="p", candidate="c", result="r", **kw)


def test_every_timed_call_gets_inputs_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[int] = []

    def draw(problem: Any, shape: Any, seed: int, dist: str, on_gpu: bool | None = None) -> list[Any]:
        assert on_gpu is True  # the timed calls' inputs are made on the GPU whatever draw_on_gpu says
        drawn.append(seed)
        return [torch.zeros(1024)]

    monkeypatch.setattr(timing, "draw_inputs", draw)
    sets = timing.fresh_sets(SimpleNamespace(), {}, timing.TimingSettings(min_trials=10, max_trials=40), seed=500)
    assert len(sets) == timing.WARM_UP_CALLS + 40 and sorted(set(drawn)) == list(range(500, 543))
    monkeypatch.setattr(timing, "TIMED_MEMORY_BYTES", 4096 * 20)  # room for 20 sets of 4 KiB
    drawn.clear()
    sets = timing.fresh_sets(SimpleNamespace(), {}, timing.TimingSettings(min_trials=10, max_trials=40), seed=0)
    assert len(sets) == 20 and len(set(drawn)) == 20
    monkeypatch.setattr(timing, "TIMED_MEMORY_BYTES", 4096)  # never fewer than warm-ups and min_trials
    few = timing.fresh_sets(SimpleNamespace(), {}, timing.TimingSettings(min_trials=10), seed=0)
    assert len(few) == timing.WARM_UP_CALLS + 10


class _Ref:
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_a_wrong_timed_output_is_caught_even_when_the_correctness_runs_passed(
        no_cuda_sync: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge_timing, "form_failure", lambda out, ref: None)  # CPU tensors here
    monkeypatch.setattr(judge_timing, "draw_on_device", lambda problem, shape, seed: [torch.full((4,), float(seed))])
    honest = [(i, torch.full((4,), float(100 + i)) * 2) for i in range(3, 8)]  # set i is the draw of seed + i
    judge_timing.check_timed(None, {}, _Ref(), 100, honest, TimedBound(1e-7, 1e-6))  # type: ignore[arg-type]
    lazy = honest[:2] + [(5, torch.full((4,), 105.0) * 2 / 64)] + honest[3:]  # 1/64 of the work when timed
    with pytest.raises(Rejected) as err:
        judge_timing.check_timed(None, {}, _Ref(), 100, lazy, TimedBound(1e-7, 1e-6))  # type: ignore[arg-type]
    assert err.value.reason == "timed_output_mismatch" and "timed call 3" in err.value.detail


def _time_reply(indices: list[int], trials: int, sets: int) -> dict[str, Any]:
    return {"median_ms": 0.1, "trials": trials, "sets": sets, "kept": [[i, {"kind": "tensor"}] for i in indices]}


@pytest.mark.parametrize(("indices", "trials", "keep_all"), [
    ([3, 4], 3, True),  # one timed output withheld although all were asked for
    ([3, 3, 4], 3, False),  # one output given twice
    ([0, 3], 2, False),  # a warm-up call's output passed off as a timed one
    ([3, 40], 2, False),  # an index past the sets drawn
    ([], 2, False),  # nothing kept
])
def test_kept_outputs_that_do_not_match_the_timed_calls_are_broken(
        tmp_path: Any, indices: list[int], trials: int, keep_all: bool) -> None:
    with pytest.raises(ChannelBroken):
        judge_timing._kept(_time_reply(indices, trials, 13), tmp_path, keep_all)


def test_the_wall_clock_estimate_subtracts_a_no_op(no_cuda_sync: None) -> None:
    sets = [[None] for _ in range(timing.WARM_UP_CALLS + timing.WALL_BATCH)]

    def work(*_: Any) -> None:
        time.sleep(0.002)  # 2 ms a call

    assert timing.wall_estimate(work, sets) == pytest.approx(2.0, rel=0.5)
    assert timing.wall_estimate(lambda *_: None, sets) < 0.05


def test_a_timer_below_what_the_judges_clock_allows_is_inconsistent() -> None:
    timing.check_consistent(median=0.38, wall=0.37)  # an honest 0.38 ms matmul
    timing.check_consistent(median=0.010, wall=0.012)  # an honest launch-bound 10 us kernel
    timing.check_consistent(median=0.0041, wall=0.1221)  # an honest 4 us kernel: the clock's host overhead
    for median, wall in ((0.0010, 0.3857), (0.004, 0.3), (0.1, 0.6)):
        with pytest.raises(Rejected) as err:  # 0.0010 / 0.3857: a native timer patch once believed at 191x
            timing.check_consistent(median=median, wall=wall)
        assert err.value.reason == "timing_inconsistent"


def test_no_speedup_exceeds_what_the_judges_clock_supports() -> None:
    assert timing.bounded_speedup(ref_ms=1.0, median=0.5, wall=0.5) == pytest.approx(2.0)  # the timer's own
    lowest = timing.supported_ms(0.3857)
    assert timing.bounded_speedup(ref_ms=0.3857, median=0.001, wall=0.3857) == pytest.approx(0.3857 / lowest)
    assert timing.bounded_speedup(ref_ms=0.3857, median=0.001, wall=0.3857) < 10  # not 191x
    assert not timing.below_bound(lowest, 0.3857)  # the least median the bound lets through


def test_a_batch_grows_until_it_lasts_tens_of_milliseconds() -> None:
    assert timing.calls_per_batch(per_call_ms=0.3, output_bytes=4 << 20, calls=1) == 67  # 20 ms at 0.3 ms a call
    assert timing.calls_per_batch(per_call_ms=0.01, output_bytes=4096, calls=67) == 2000
    assert timing.calls_per_batch(per_call_ms=1e-5, output_bytes=4096, calls=2000) == timing.WALL_MAX_CALLS
    assert timing.calls_per_batch(per_call_ms=0.01, output_bytes=256 << 20, calls=1) == 4  # 4 outputs fill 1 GiB
    assert timing.calls_per_batch(per_call_ms=50.0, output_bytes=4096, calls=1) == 1  # one call lasts long enough
    assert timing.calls_per_batch(per_call_ms=50.0, output_bytes=4096, calls=3) == 3  # never shrinks


def test_a_disturbed_timing_is_taken_again_on_new_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([(0.32, 0.034), (0.30, 0.030), (0.0098, 0.034)])  # two disturbed attempts, then a clean one
    drawn: list[int] = []
    monkeypatch.setattr(timing, "median_ms", lambda *a, **k: timing.Timed(next(readings)[0], []))
    walls = iter([0.034, 0.030, 0.034])
    monkeypatch.setattr(timing, "wall_estimate", lambda fn, sets: next(walls))

    def draw(attempt: int) -> list[list[Any]]:
        drawn.append(attempt)
        return [[torch.zeros(1)]]

    m = timing.measure(lambda x: x, draw, None, timing.TimingSettings(), None)  # type: ignore[arg-type]
    assert drawn == [0, 1, 2] and not m.disturbed and m.timed.median_ms == 0.0098


def test_a_timing_disturbed_every_time_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "median_ms", lambda *a, **k: timing.Timed(0.5, []))
    monkeypatch.setattr(timing, "wall_estimate", lambda fn, sets: 0.02)
    m = timing.measure(lambda x: x, lambda a: [[None]], None, timing.TimingSettings(), None)  # type: ignore[arg-type]
    assert m.disturbed and m.timed.median_ms == 0.5
    assert not timing.disturbed(median=0.0098, wall=0.0337)  # a cold-L2 trial against warm batches


def test_a_disturbed_reference_is_not_cached(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    settings = timing.TimingSettings()
    monkeypatch.setattr(reference_timing, "measure", lambda *a, **k: timing.Measured(timing.Timed(0.3, []), 0.03, True))
    ref = timing.RefCache(tmp_path / "ref.json", None)
    assert reference_timing.time_reference((object(), None), None, None, settings, None, ref) == (0.3, None)  # type: ignore[arg-type]
    assert not (tmp_path / "ref.json").exists()
    measured = timing.Measured(timing.Timed(0.01, []), 0.03, False)
    monkeypatch.setattr(reference_timing, "measure", lambda *a, **k: measured)
    reference_timing.time_reference((object(), None), None, None, settings, None, ref)  # type: ignore[arg-type]
    assert timing.read_ref_cache(tmp_path / "ref.json").figures == (0.01, None)


def test_an_outputs_sum_is_recognised_whatever_it_holds() -> None:
    nan = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    for out in (nan, torch.arange(6, dtype=torch.int32), torch.tensor([True, False, True]), 1e8 * torch.randn(1000)):
        assert timing.same_checksum(timing.checksum(out), out)
    assert timing.checksum(nan) == -1.0  # NaN and inf count as 0
    big = 1e8 * torch.randn(1000)
    assert not timing.same_checksum(timing.checksum(big) + 1e6, big)  # off by far more than rounding
    assert not timing.same_checksum(True, torch.ones(1)) and not timing.same_checksum(None, torch.ones(1))
    assert timing.same_checksum(None, object()) and not timing.same_checksum(0.0, object())


def _logged_time_shape(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, log: list[str],
                       rejected_under_lock: bool = False, wrong_clock_output: bool = False) -> Any:
    """time_shape with its parts replaced by ones that log when they run: the lock, the candidate's
    timing (one clock, whose counted batch's check it leaves pending), the reference's timing, the
    checks (a clock's and the kept outputs') and the kernel share."""
    import contextlib

    from kernelwright.verifier.judge_checks import Checked
    from kernelwright.verifier.kernel_share import Profiled
    from kernelwright.verifier.spec import Progress
    from kernelwright.verifier.timing import RefCache

    @contextlib.contextmanager
    def lock(path: Any, gate: bool = False) -> Any:
        log.append("lock")
        try:
            yield
        finally:
            log.append("unlock")

    def time_candidate(*a: Any, **kw: Any) -> Any:
        log.append("time candidate")
        a[-1].append(judge_timing.WallCheck(5, [(0, torch.ones(2))]))  # its clock's check, pending
        if rejected_under_lock:
            raise Rejected("timing_inconsistent", "below the clock on every attempt")
        return judge_timing.CandidateTiming(1.0, judge_timing.WallEstimate(per_call_ms=1.0), 7, [(3, torch.ones(2))],
                                            False)

    def check_timed(problem: Any, shape: Any, ref: Any, seed: int, kept: Any, bound: Any, label: Any = None) -> None:
        log.append("check clock" if label is not None else "check timed")
        if label is not None and wrong_clock_output:
            raise Rejected("timed_output_mismatch", label(0))

    monkeypatch.setattr(judge_timing, "timing_held", lock)
    monkeypatch.setattr(judge_timing, "draw_on_device", lambda problem, shape, seed: [torch.ones(2)])
    monkeypatch.setattr(judge_timing, "keep_all_fits", lambda *a: True)
    monkeypatch.setattr(judge_timing, "clock_target", lambda *a: SimpleNamespace(problem=None, shape={}, ref_model=None,
                                                                                 bound=None))
    monkeypatch.setattr(judge_timing, "time_candidate", time_candidate)
    monkeypatch.setattr(judge_timing, "reference_figures", lambda *a: (log.append("time reference"), (2.0, None))[1])
    monkeypatch.setattr(judge_timing, "check_timed", check_timed)
    monkeypatch.setattr(judge_timing, "kernel_share", lambda *a: (log.append("share"), Profiled(1.0, None, 0.9))[1])
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    checked = Checked(0.0, "fp64_relative", _Ref(), {"shape": {}}, TimedBound(1e-7, 1e-6))
    return judge_timing.time_shape(SimpleNamespace(), {}, _spec(compile_baseline=False, timing_lock="l"),
                                   None, checked, RefCache(None, None), Progress(tmp_path / "p.json"), ["k"])


def test_the_timed_outputs_are_checked_after_the_timing_lock(no_cuda_sync: None, monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Any) -> None:
    """The timings hold the lock; the checks of the clock's counted batch and of the kept outputs (on
    the host by then) and the kernel share come after it, so the next candidate's timing need not
    wait for them."""
    log: list[str] = []
    result = _logged_time_shape(monkeypatch, tmp_path, log)
    assert log == ["lock", "time candidate", "time reference", "unlock", "check clock", "check timed", "share"]
    assert result.speedup is not None and result.runtime_ms == 1.0


def test_a_rejection_under_the_lock_comes_after_the_clocks_checked_before_it(
        no_cuda_sync: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A clock that ran before a rejection under the lock is still checked (after the lock): a wrong
    output there is what the judge found first, as when the check ran inside the clock."""
    log: list[str] = []
    with pytest.raises(Rejected) as err:
        _logged_time_shape(monkeypatch, tmp_path, log, rejected_under_lock=True, wrong_clock_output=True)
    assert err.value.reason == "timed_output_mismatch" and log == ["lock", "time candidate", "unlock", "check clock"]
    log.clear()
    with pytest.raises(Rejected) as err:
        _logged_time_shape(monkeypatch, tmp_path, log, rejected_under_lock=True)
    assert err.value.reason == "timing_inconsistent" and log[-1] == "check clock"
