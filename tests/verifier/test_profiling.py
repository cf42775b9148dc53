"""Profiling (kernelwright.verifier.profiling), on the CPU."""

from __future__ import annotations

import threading

import torch

from kernelwright.verifier.guard import HarnessGuard
from kernelwright.verifier.profiling import profiler_started_alongside


def test_profiler_warm_up_is_joined_and_not_tampering() -> None:
    """The profiler's first session runs in a thread during the candidate's import; it is over when
    the import is (the profiler's own native threads may stay: the worker counts threads after the
    import), and it changes nothing the guard holds."""
    guard = HarnessGuard()
    with profiler_started_alongside(True):
        torch.ones(4).sum()
    assert "kw-profiler-warm-up" not in {t.name for t in threading.enumerate()}
    guard.check()


def test_profiler_sessions_import_neither_dynamo_nor_inductor() -> None:
    """torch.profiler.profile's prepare_trace imports torch._inductor and torch._dynamo (~4 CPU-s a
    runner): the warm-up and the share's session do without. In a fresh process, since other tests
    import them."""
    import subprocess
    import sys

    code = ("import sys, torch; from kernelwright.verifier.profiling import profiler_started_alongside, "
            "custom_share\nwith profiler_started_alongside(True): torch.ones(4).sum()\n"
            "try: custom_share(lambda x: x + 1, [torch.ones(4)], {'k'})\nexcept Exception: pass\n"
            "print(sorted(m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr[-2000:]


def test_the_share_session_is_held_by_the_guard() -> None:
    """The profiler class the share is measured with is held: a candidate that swaps it is caught."""
    import torch.autograd.profiler as autograd_profiler

    guard = HarnessGuard()
    original = autograd_profiler.profile
    try:
        autograd_profiler.profile = type("profile", (), {})  # type: ignore[misc,assignment]
        assert any("profile" in c for c in guard.changed())
    finally:
        autograd_profiler.profile = original  # type: ignore[misc]
    guard.check()


class _Event:
    def __init__(self, name: str, start: float, device_time: float) -> None:
        self.name, self.device_time = name, device_time
        self.device_type = torch.autograd.DeviceType.CUDA
        self.time_range = type("Range", (), {"start": start})()


class _Session:
    """A profiler session that records what happened while it was open and yields set events."""

    def __init__(self, log: list[str], events: list[_Event]) -> None:
        self.log, self.function_events = log, events

    def __enter__(self) -> _Session:
        self.log.append("start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.log.append("stop")


def test_the_share_session_reads_the_output_back_before_it_stops(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Synchronisations a candidate replaced natively return at once; the copy of its output cannot,
    so the session stops only after the kernels that wrote it. That copy is not counted."""
    from kernelwright.verifier import profiling

    log: list[str] = []
    events = [_Event("own_kernel(float*)", 1.0, 30.0), _Event("Memcpy DtoH (Device -> Pageable)", 0.5, 4.0),
              _Event("vectorized_elementwise_kernel", 2.0, 10.0),
              _Event("Memcpy DtoH (Device -> Pageable)", 3.0, 2.0)]  # the last: read_back's own
    monkeypatch.setattr(profiling, "cuda_profile", lambda: _Session(log, events))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: log.append("synchronize"))
    monkeypatch.setattr(profiling, "read_back", lambda out: log.append(f"read_back {tuple(out.shape)}"))

    def forward(x: torch.Tensor) -> torch.Tensor:
        log.append("call")
        return x + 1

    share, kernel_ms = profiling.profiled_kernels(forward, [torch.ones(3)], {"own_kernel"})
    assert log == ["start", "call", "call", "call", "read_back (3,)", "synchronize", "stop"]
    assert share == 30.0 / 44.0  # the candidate's own copy counts; the judge's read-back does not
    assert kernel_ms == 44.0 / 1e3 / profiling.PROFILED_CALLS


def test_read_back_copies_one_element_of_the_first_tensor_with_elements(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from kernelwright.verifier.profiling import read_back

    copied: list[tuple[tuple[int, ...], float]] = []
    original = torch.Tensor.to

    def to(self: torch.Tensor, *args: object, **kw: object) -> torch.Tensor:
        copied.append((tuple(self.shape), float(self.sum())))
        return original(self, *args, **kw)

    monkeypatch.setattr(torch.Tensor, "to", to)
    read_back((None, torch.ones(0), torch.arange(6.0).reshape(2, 3), torch.ones(4)))
    assert copied == [((1,), 5.0)]  # the last element of the first tensor that has one, alone
    copied.clear()
    read_back(torch.ones(0))
    read_back({"not": "a tensor"})  # nothing to read: the share's other checks reject such outputs
    assert copied == []
