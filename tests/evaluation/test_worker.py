"""The worker's harness guard (class 7), on the CPU: what it holds, what it catches, what it allows."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from kernelwright.evaluation import worker
from kernelwright.evaluation.worker import HarnessGuard, Rejected


@pytest.fixture
def guard() -> HarnessGuard:
    return HarnessGuard()


def _replaced(guard: HarnessGuard) -> str:
    with pytest.raises(Rejected) as exc:
        guard.check()
    assert exc.value.reason == "harness_tampering"
    return exc.value.detail


@pytest.fixture
def restore() -> Iterator[list[tuple[Any, str, Any]]]:
    """Patches to undo after the test: (object, name, original or None to delete)."""
    undo: list[tuple[Any, str, Any]] = []
    yield undo
    for obj, name, original in reversed(undo):
        if original is None:
            delattr(obj, name)
        else:
            setattr(obj, name, original)


def test_untouched_harness_passes(guard: HarnessGuard) -> None:
    guard.check()
    assert guard.changed() == []


def test_module_function_replaced_through_an_alias(guard: HarnessGuard, restore: list) -> None:
    alias = torch
    restore.append((torch, "allclose", torch.allclose))
    vars(alias)["allclose"] = lambda *a, **k: True
    assert "torch.allclose" in _replaced(guard)


def test_tensor_method_shadowed_in_the_subclass(guard: HarnessGuard, restore: list) -> None:
    """torch.Tensor.abs lives on the C base class: setting it on torch.Tensor adds a name that hides it."""
    assert "abs" not in vars(torch.Tensor)
    restore.append((torch.Tensor, "abs", None))
    torch.Tensor.abs = lambda self: self  # type: ignore[method-assign]
    assert "Tensor.abs" in _replaced(guard)


def test_harness_function_and_timer_method(guard: HarnessGuard, restore: list) -> None:
    restore.append((worker, "_median_ms", worker._median_ms))
    restore.append((worker.Timer, "time_ms", worker.Timer.time_ms))
    worker._median_ms = lambda *a: 0.0  # type: ignore[assignment]
    worker.Timer.time_ms = lambda self, fn, stream: 0.001  # type: ignore[method-assign]
    detail = _replaced(guard)
    assert "worker._median_ms" in detail and "Timer.time_ms" in detail


def test_instance_attributes_and_shadowing_methods(guard: HarnessGuard) -> None:
    class Clock:
        def __init__(self) -> None:
            self.gap_ms = 0.01

        def time_ms(self) -> float:
            return 1.0

    clock = Clock()
    guard.watch_instance(clock, "timer")
    guard.check()
    clock.time_ms = lambda: 0.0  # type: ignore[method-assign]
    assert "timer.time_ms" in _replaced(guard)
    del clock.time_ms
    guard.check()
    clock.gap_ms = float("inf")
    assert "timer.gap_ms" in _replaced(guard)


def test_profiler_event_durations_are_held(guard: HarnessGuard, restore: list) -> None:
    from torch.autograd.profiler_util import FunctionEvent

    restore.append((FunctionEvent, "device_time", vars(FunctionEvent).get("device_time")))
    FunctionEvent.device_time = property(lambda self: 0.0)  # type: ignore[method-assign,assignment]
    assert "FunctionEvent.device_time" in _replaced(guard)


def test_torch_compile_and_profiler_are_not_tampering(guard: HarnessGuard) -> None:
    """Importing torch._dynamo wraps torch.manual_seed (torch's own rebinding): allowed."""
    from torch.profiler import ProfilerActivity, profile

    compiled = torch.compile(lambda x: x * 2 + 1, backend="eager")
    assert torch.equal(compiled(torch.ones(3)), torch.full((3,), 3.0))
    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(4).sum()
    guard.check()


def test_tf32_switched_on(guard: HarnessGuard, restore: list) -> None:
    restore.append((torch.backends.cuda.matmul, "allow_tf32", torch.backends.cuda.matmul.allow_tf32))
    torch.backends.cuda.matmul.allow_tf32 = not torch.backends.cuda.matmul.allow_tf32
    assert "TF32" in _replaced(guard)


def test_profiler_warm_up_is_joined_and_not_tampering(guard: HarnessGuard) -> None:
    """The profiler's first session runs in a thread during the candidate's import; it is over when
    the import is (the profiler's own native threads may stay: the worker counts threads after the
    import), and it changes nothing the guard holds."""
    with worker.profiler_started_alongside(True):
        torch.ones(4).sum()
    assert "kw-profiler-warm-up" not in {t.name for t in threading.enumerate()}
    guard.check()


def test_verdict_writing_path_is_held(guard: HarnessGuard, restore: list) -> None:
    """A forward that swaps how the result file is written (to forge the verdict) is caught."""
    from kernelwright import atomic

    restore.append((atomic, "write_text", atomic.write_text))
    atomic.write_text = lambda dest, text: None
    assert "kernelwright.atomic.write_text" in _replaced(guard)


def test_path_method_is_held(guard: HarnessGuard, restore: list) -> None:
    from pathlib import PosixPath

    restore.append((PosixPath, "write_text", None))
    PosixPath.write_text = lambda self, *a, **k: 0  # shadows pathlib.Path.write_text
    assert "PosixPath.write_text" in _replaced(guard)
