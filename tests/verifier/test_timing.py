"""Timed calls: fresh inputs for each, their outputs checked, the timer held against the wall clock.

The GPU paths run under `pytest -m gpu`; here the logic runs with the CUDA calls stood in for.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from kernelwright.verifier import timing
from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.spec import Spec


@pytest.fixture()
def no_cuda_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)


def _spec(**kw: Any) -> Spec:
    return Spec(problem="p", candidate="c", result="r", **kw)


def test_every_timed_call_gets_inputs_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[int] = []

    def draw(problem: Any, shape: Any, seed: int, dist: str) -> list[Any]:
        drawn.append(seed)
        return [torch.zeros(1024)]

    monkeypatch.setattr(timing, "draw_inputs", draw)
    sets = timing.fresh_sets(SimpleNamespace(), {}, _spec(min_trials=10, max_trials=40), seed=500)
    assert len(sets) == timing.WARM_UP_CALLS + 40 and sorted(set(drawn)) == list(range(500, 543))
    monkeypatch.setattr(timing, "TIMED_MEMORY_BYTES", 4096 * 20)  # room for 20 sets of 4 KiB
    drawn.clear()
    sets = timing.fresh_sets(SimpleNamespace(), {}, _spec(min_trials=10, max_trials=40), seed=0)
    assert len(sets) == 20 and len(set(drawn)) == 20
    monkeypatch.setattr(timing, "TIMED_MEMORY_BYTES", 4096)  # never fewer than warm-ups and min_trials
    assert len(timing.fresh_sets(SimpleNamespace(), {}, _spec(min_trials=10), seed=0)) == timing.WARM_UP_CALLS + 10


def test_all_timed_outputs_are_kept_where_memory_allows_else_a_random_share() -> None:
    sets = [[torch.zeros(256)] for _ in range(50)]
    keep = timing.keeper(sets, seed=3)
    assert all(keep(i) for i in range(50))
    big = [[torch.zeros(2**20)] for _ in range(4)]
    old = timing.TIMED_MEMORY_BYTES
    try:
        timing.TIMED_MEMORY_BYTES = 2**20 * 4 * 4 // 2  # half of what the 4 outputs of 4 MiB would take
        picks = [timing.keeper(big, seed=s)(0) for s in range(400)]
        assert 0.35 < sum(picks) / len(picks) < 0.65
    finally:
        timing.TIMED_MEMORY_BYTES = old


class _Ref:
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_a_wrong_timed_output_is_caught_even_when_the_correctness_runs_passed(
        no_cuda_sync: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def compare(out: Any, ref: Any) -> tuple[str | None, str, float]:
        ok = torch.equal(out, ref)
        return (None if ok else "wrong_output"), "", 0.0

    monkeypatch.setattr(timing, "compare", compare)
    sets = [[torch.full((4,), float(i))] for i in range(8)]
    honest = [(i, sets[i][0] * 2) for i in range(3, 8)]
    timing.check_timed(_Ref(), sets, honest)
    lazy = honest[:2] + [(5, sets[5][0] * 2 / 64)] + honest[3:]  # 1/64 of the work when timed
    with pytest.raises(Rejected) as err:
        timing.check_timed(_Ref(), sets, lazy)
    assert err.value.reason == "timed_output_mismatch" and "timed call 3" in err.value.detail


def test_the_wall_clock_estimate_subtracts_a_no_op(no_cuda_sync: None) -> None:
    sets = [[None] for _ in range(timing.WARM_UP_CALLS + timing.WALL_BATCH)]

    def work(*_: Any) -> None:
        time.sleep(0.002)  # 2 ms a call

    assert timing.wall_estimate(work, sets) == pytest.approx(2.0, rel=0.5)
    assert timing.wall_estimate(lambda *_: None, sets) < 0.05


def test_a_timer_that_reads_far_below_the_wall_clock_is_inconsistent() -> None:
    timing.check_consistent(median=2.1, wall=2.0)
    timing.check_consistent(median=0.007, wall=0.17)  # a launch-bound kernel on a shared GPU (measured)
    with pytest.raises(Rejected) as err:
        timing.check_consistent(median=0.001, wall=2.0)  # a patched elapsed-time reads 1 us
    assert err.value.reason == "timing_inconsistent"


def test_a_disturbed_timing_is_taken_again_on_new_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([(0.32, 0.034), (0.30, 0.030), (0.0098, 0.034)])  # two disturbed attempts, then a clean one
    drawn: list[int] = []
    monkeypatch.setattr(timing, "median_ms", lambda *a, **k: timing.Timed(next(readings)[0], []))
    walls = iter([0.034, 0.030, 0.034])
    monkeypatch.setattr(timing, "wall_estimate", lambda fn, sets: next(walls))

    def draw(attempt: int) -> list[list[Any]]:
        drawn.append(attempt)
        return [[torch.zeros(1)]]

    m = timing.measure(lambda x: x, draw, None, _spec(), None, keep_seed=1)  # type: ignore[arg-type]
    assert drawn == [0, 1, 2] and not m.disturbed and m.timed.median_ms == 0.0098


def test_a_timing_disturbed_every_time_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "median_ms", lambda *a, **k: timing.Timed(0.5, []))
    monkeypatch.setattr(timing, "wall_estimate", lambda fn, sets: 0.02)
    m = timing.measure(lambda x: x, lambda a: [[None]], None, _spec(), None)  # type: ignore[arg-type]
    assert m.disturbed and m.timed.median_ms == 0.5
    assert not timing.disturbed(median=0.0098, wall=0.0337)  # a cold-L2 trial against warm batches


def test_a_disturbed_reference_is_not_cached(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(timing, "measure", lambda *a, **k: timing.Measured(timing.Timed(0.3, []), 0.03, [], True))
    ref = timing.RefCache(tmp_path / "ref.json", None)
    assert timing._time_reference((object(), None), None, None, _spec(), None, ref) == (0.3, None)  # type: ignore[arg-type]
    assert not (tmp_path / "ref.json").exists()
    monkeypatch.setattr(timing, "measure", lambda *a, **k: timing.Measured(timing.Timed(0.01, []), 0.03, [], False))
    timing._time_reference((object(), None), None, None, _spec(), None, ref)  # type: ignore[arg-type]
    assert timing.read_ref_cache(tmp_path / "ref.json").figures == (0.01, None)
