"""The GPU gate (verifier/gpu_gate.py): correctness steps share the GPU with one another, never with a
timing, and a timing that waits is not passed by steps that come after it. Threads stand in for the
judges of other candidates (flock holds between separate opens of the file, in one process too)."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from kernelwright.verifier.gpu_gate import TURNSTILE_SUFFIX, gpu_step, timing_held
from tests.verifier.lock_probe import lock_held

WAIT_S = 10.0  # generous: how long a test waits for what must happen at once


def _hold(ctx: AbstractContextManager[None], log: list[str], name: str, release: threading.Event | None = None,
          entered: threading.Event | None = None, hold_s: float = 0.0) -> threading.Thread:
    def run() -> None:
        with ctx:
            log.append(f"{name} in")
            if entered is not None:
                entered.set()
            if release is not None:
                release.wait(WAIT_S)
            threading.Event().wait(hold_s)
            log.append(f"{name} out")

    t = threading.Thread(target=run)
    t.start()
    return t


@pytest.mark.parametrize(("first", "second"), [
    (lambda lock: gpu_step(lock, True), lambda lock: gpu_step(lock, True)),  # steps share the GPU
    (lambda lock: timing_held(lock, False), lambda lock: gpu_step(lock, False)),  # off: steps beside timings
], ids=["steps_share", "off_steps_beside_a_timing"])
def test_a_second_hold_gets_in_beside_the_first(tmp_path: Path, first: Any, second: Any) -> None:
    lock, log = str(tmp_path / "timing.lock"), list[str]()
    release, first_in, second_in = threading.Event(), threading.Event(), threading.Event()
    a = _hold(first(lock), log, "a", release, first_in)
    assert first_in.wait(WAIT_S)
    b = _hold(second(lock), log, "b", None, second_in)
    assert second_in.wait(WAIT_S)  # b got in while a still holds
    release.set()
    a.join(WAIT_S), b.join(WAIT_S)
    assert log.index("b in") < log.index("a out")


def test_a_timing_waits_for_the_steps_and_later_steps_wait_for_it(tmp_path: Path) -> None:
    lock, log = str(tmp_path / "timing.lock"), list[str]()
    release, step_in = threading.Event(), threading.Event()
    first = _hold(gpu_step(lock, True), log, "step1", release, step_in)
    assert step_in.wait(WAIT_S)
    timing = _hold(timing_held(lock, True), log, "timing", hold_s=0.3)
    for _ in range(int(WAIT_S / 0.01)):  # the timing holds the turnstile while it waits for the step
        if lock_held(lock + TURNSTILE_SUFFIX):
            break
        threading.Event().wait(0.01)
    assert "timing in" not in log
    later = _hold(gpu_step(lock, True), log, "step2")  # comes while the timing waits: queues behind it
    threading.Event().wait(0.1)
    assert "step2 in" not in log
    release.set()
    for t in (first, timing, later):
        t.join(WAIT_S)
    assert log == ["step1 in", "step1 out", "timing in", "timing out", "step2 in", "step2 out"]


def test_timings_exclude_one_another_with_the_gate_or_without(tmp_path: Path) -> None:
    for gate in (False, True):
        lock, log = str(tmp_path / f"timing-{gate}.lock"), list[str]()
        release, first_in = threading.Event(), threading.Event()
        first = _hold(timing_held(lock, gate), log, "t1", release, first_in)
        assert first_in.wait(WAIT_S)
        second = _hold(timing_held(lock, gate), log, "t2")
        threading.Event().wait(0.1)
        release.set()
        first.join(WAIT_S), second.join(WAIT_S)
        assert log == ["t1 in", "t1 out", "t2 in", "t2 out"]


def test_without_a_lock_file_nothing_is_held() -> None:
    with gpu_step(None, True), timing_held(None, True):
        pass
