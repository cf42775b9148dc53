"""The kernel share near its threshold: measured again, one at a time with other timings, so that a
verdict does not flip between runs on one noisy pass."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kernelwright.verifier import kernel_share
from kernelwright.verifier.channel import ChannelBroken
from kernelwright.verifier.spec import Spec
from tests.verifier.lock_probe import lock_held


class FakeRunner:
    """Answers `share` with passes drawn around a true share, recording how many were asked for and
    whether the timing lock was held then."""

    def __init__(self, draw: Any, lock: Path) -> None:
        self.draw, self.lock, self.asked = draw, lock, list[tuple[int, bool]]()

    def ask(self, op: str, **f: Any) -> dict[str, Any]:
        assert op == "share"
        self.asked.append((f["passes"], lock_held(self.lock)))
        return {"shares": [self.draw() for _ in range(f["passes"])], "kernel_ms": [0.5] * f["passes"]}


def _spec(tmp_path: Path, threshold: float = 0.1) -> Spec:
    return Spec(problem="p", candidate="c", result="r", min_custom_share=threshold,
                timing_lock=str(tmp_path / "timing.lock"))


def test_a_share_far_from_the_threshold_is_one_pass(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    runner = FakeRunner(lambda: 0.45, Path(spec.timing_lock or ""))
    assert kernel_share.kernel_share(SimpleNamespace(ask=runner.ask), {}, spec, []) == \
        kernel_share.Profiled(0.45, None, 0.5)  # type: ignore[arg-type]
    assert runner.asked == [(1, False)]
    none = FakeRunner(lambda: 0.09, Path(spec.timing_lock or ""))  # no share required: nothing is borderline
    kernel_share.kernel_share(SimpleNamespace(ask=none.ask), {}, _spec(tmp_path, 0.0), [])  # type: ignore[arg-type]
    assert none.asked == [(1, False)]


def test_a_share_near_the_threshold_is_measured_again_under_the_timing_lock(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    shares = iter([0.095, 0.11, 0.12, 0.10, 0.115, 0.105, 0.13])
    runner = FakeRunner(lambda: next(shares), Path(spec.timing_lock or ""))
    got = kernel_share.kernel_share(SimpleNamespace(ask=runner.ask), {}, spec, [])  # type: ignore[arg-type]
    median, spread = got.share, got.spread
    assert runner.asked == [(1, False), (kernel_share.SHARE_BORDERLINE_PASSES, True)]
    assert median == 0.11 and spread == pytest.approx(0.035)  # one pass under 0.1 no longer decides


def test_the_median_of_passes_flips_far_less_often_than_one_pass(tmp_path: Path) -> None:
    """A share of 0.115 whose passes scatter by +-0.03 (as beside other work): one pass falls under
    0.1 in about a quarter of runs; the median of the borderline passes, rarely."""
    spec = _spec(tmp_path)
    rng = random.Random(7)

    def draw() -> float:
        return 0.115 + rng.uniform(-0.03, 0.03)

    one_pass = sum(draw() < 0.1 for _ in range(400)) / 400
    runner = FakeRunner(draw, Path(spec.timing_lock or ""))
    link = SimpleNamespace(ask=runner.ask)
    settled = sum(kernel_share.kernel_share(link, {}, spec, []).share < 0.1 for _ in range(400)) / 400  # type: ignore[arg-type]
    assert one_pass > 0.15 and settled < one_pass / 3, (one_pass, settled)


@pytest.mark.parametrize("shares", [[0.5, 0.5], [1.5], [float("nan")], [True], ["0.5"]])
def test_shares_that_are_not_one_number_in_0_1_per_pass_are_broken(tmp_path: Path, shares: list[Any]) -> None:
    link = SimpleNamespace(ask=lambda op, **f: {"shares": shares, "kernel_ms": [0.1] * len(shares)})
    with pytest.raises(ChannelBroken):
        kernel_share.kernel_share(link, {}, _spec(tmp_path), [])  # type: ignore[arg-type]


@pytest.mark.parametrize("kernel_ms", [[-1.0], [float("nan")], [0.1, 0.1], [None]])
def test_kernel_times_that_are_not_one_number_per_pass_are_broken(tmp_path: Path, kernel_ms: list[Any]) -> None:
    link = SimpleNamespace(ask=lambda op, **f: {"shares": [0.9], "kernel_ms": kernel_ms})
    with pytest.raises(ChannelBroken):
        kernel_share.kernel_share(link, {}, _spec(tmp_path), [])  # type: ignore[arg-type]


def test_the_kernel_time_alone_is_profiled_under_the_timing_lock(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    runner = FakeRunner(lambda: 0.9, Path(spec.timing_lock or ""))
    assert kernel_share.kernel_ms_alone(SimpleNamespace(ask=runner.ask), {}, spec, []) == 0.5  # type: ignore[arg-type]
    assert runner.asked == [(1, True)]
