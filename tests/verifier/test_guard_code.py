"""The guard sees a function whose code was swapped in place (the object kept, so identity holds)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from kernelwright.verifier import guard as guard_module
from kernelwright.verifier import inputs, timing, tolerance
from kernelwright.verifier.guard import HarnessGuard
from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.timer import Timer


@pytest.fixture
def swap() -> Iterator[Callable[[Any, Any], None]]:
    """swap(fn, other): give `fn` the code (and defaults) of `other`; undone after the test."""
    undo: list[tuple[Any, Any, Any]] = []

    def do(fn: Any, other: Any) -> None:
        undo.append((fn, fn.__code__, fn.__defaults__))
        fn.__code__, fn.__defaults__ = other.__code__, other.__defaults__

    yield do
    for fn, code, defaults in reversed(undo):
        fn.__code__, fn.__defaults__ = code, defaults


def _agree(out: Any, ref: Any, ref64: Any = None, rules: Any = None) -> tuple[None, str, float]:
    return None, "", 0.0


def _tampering(guard: HarnessGuard) -> str:
    with pytest.raises(Rejected) as exc:
        guard.check()
    assert exc.value.reason == "harness_tampering"
    return exc.value.detail


@pytest.mark.parametrize("fn", [inputs.compare, inputs.poison, tolerance.judge, timing.median_ms, timing.wall_estimate],
                         ids=lambda f: f.__qualname__)
def test_a_harness_function_given_other_code_is_caught(swap: Callable[[Any, Any], None], fn: Any) -> None:
    guard = HarnessGuard()
    swap(fn, _agree)
    assert "code replaced" in _tampering(guard)


def test_a_method_of_a_held_class_given_other_code_is_caught(swap: Callable[[Any, Any], None]) -> None:
    guard = HarnessGuard()
    swap(Timer.time_ms, lambda self, fn, stream: 0.001)
    assert "Timer.time_ms (code replaced)" in _tampering(guard)


def test_the_guards_own_holds_are_held(swap: Callable[[Any, Any], None]) -> None:
    guard = HarnessGuard()
    swap(guard_module._ModuleHold.changed, lambda self: [])
    assert "_ModuleHold.changed (code replaced)" in _tampering(guard)


def test_an_nn_layer_given_other_code_is_caught(swap: Callable[[Any, Any], None]) -> None:
    guard = HarnessGuard()
    swap(torch.nn.ReLU.forward, lambda self, input: input)
    assert "ReLU.forward (code replaced)" in _tampering(guard)


def test_defaults_swapped_are_caught() -> None:
    guard = HarnessGuard()
    original = timing.median_ms.__defaults__
    try:
        timing.median_ms.__defaults__ = (lambda i: False,)
        assert "median_ms (code replaced)" in _tampering(guard)
    finally:
        timing.median_ms.__defaults__ = original


def test_nothing_swapped_nothing_reported() -> None:
    assert HarnessGuard().changed() == []
