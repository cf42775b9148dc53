"""How judges and runners wait for the GPU (verifier/gpu_wait.py): asleep outside the timing lock,
spinning under it; the context's other flags kept; nothing changed where the driver cannot."""

from __future__ import annotations

import ctypes
import time
from pathlib import Path
from typing import Any

import pytest

from kernelwright.verifier import gpu_wait
from kernelwright.verifier import runner as runner_module
from kernelwright.verifier.runner import Runner, serve
from tests.verifier.scripted_end import ScriptedEnd


class FakeDriver:
    """cuCtxGetCurrent / cuCtxGetFlags / cuCtxSetFlags over Python state (the calls take byref pointers)."""

    def __init__(self, flags: int, context: int | None = 0x1234, set_status: int = 0) -> None:
        self.flags, self.context, self.set_status = flags, context, set_status
        self.sets: list[int] = []

    def cuCtxGetCurrent(self, ptr: Any) -> int:  # noqa: N802 - the driver's name
        ptr._obj.value = self.context
        return 0

    def cuCtxGetFlags(self, ptr: Any) -> int:  # noqa: N802
        ptr._obj.value = self.flags
        return 0

    def cuCtxSetFlags(self, flags: ctypes.c_uint) -> int:  # noqa: N802
        self.sets.append(flags.value)
        if self.set_status == 0:
            self.flags = flags.value
        return self.set_status


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    drv = FakeDriver(flags=0x08 | 0x00)  # CU_CTX_MAP_HOST with CUDA's automatic scheduling
    monkeypatch.setattr(gpu_wait, "_driver", drv)
    monkeypatch.setattr(gpu_wait, "_looked", True)
    monkeypatch.setattr(gpu_wait, "_mode", None)
    return drv


def test_blocking_sets_the_scheduling_bits_only_and_once(fake: FakeDriver) -> None:
    assert gpu_wait.set_wait("block")
    assert fake.flags == 0x08 | 0x04 and gpu_wait.current_wait() == "block"
    assert gpu_wait.set_wait("block")  # already so: no driver call
    assert fake.sets == [0x0C]
    assert gpu_wait.set_wait("spin") and fake.flags == 0x08 | 0x01


def test_the_timing_lock_spins_then_the_wait_goes_back_to_sleeping(fake: FakeDriver) -> None:
    gpu_wait.set_wait("block")
    with gpu_wait.spinning():
        assert fake.flags & gpu_wait.SCHED_MASK == 0x01
    assert fake.flags & gpu_wait.SCHED_MASK == 0x04 and gpu_wait.current_wait() == "block"


def test_nothing_changes_where_no_mode_was_set(fake: FakeDriver) -> None:
    with gpu_wait.spinning():  # blocking waits off: CUDA's own choice stays throughout
        pass
    assert fake.sets == []


def test_no_context_or_a_refusing_driver_changes_nothing_and_is_tried_again(fake: FakeDriver) -> None:
    fake.context = None
    assert not gpu_wait.set_wait("block") and gpu_wait.current_wait() is None and fake.sets == []
    fake.context, fake.set_status = 0x1234, 201  # CUDA_ERROR_INVALID_CONTEXT
    assert not gpu_wait.set_wait("block") and gpu_wait.current_wait() is None
    fake.set_status = 0
    assert gpu_wait.set_wait("block") and fake.flags == 0x0C


def test_without_a_driver_the_wait_stays_cudas_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_wait, "_driver", None)
    monkeypatch.setattr(gpu_wait, "_looked", True)
    monkeypatch.setattr(gpu_wait, "_mode", None)
    assert not gpu_wait.set_wait("block")


@pytest.mark.parametrize("blocking", [True, False])
def test_the_runner_spins_for_the_timed_ops_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 blocking: bool) -> None:
    waits: list[tuple[str, str]] = []
    monkeypatch.setattr(runner_module, "set_wait", lambda mode: waits.append((ops[len(waits)], mode)) or True)
    ops = ["call", "time", "prepare_wall", "run_wall", "save_wall", "share", "call", "finish"]
    end = ScriptedEnd(ops)
    runner = Runner({"timing": {}, "blocking_gpu_wait": blocking}, tmp_path, end)  # type: ignore[arg-type]
    monkeypatch.setattr(runner, "load", lambda _req: {})
    serve(runner)  # every op fails without a candidate: a rejected reply each, the loop goes on
    assert end.replies == ops
    spin = {"time", "prepare_wall", "run_wall", "save_wall"}
    assert waits == ([(op, "spin" if op in spin else "block") for op in ops] if blocking else [])


@pytest.mark.gpu
def test_a_blocking_wait_leaves_the_core_idle_on_a_real_gpu() -> None:
    import torch

    torch.cuda.synchronize()
    spent = {}
    for mode in ("spin", "block"):
        assert gpu_wait.set_wait(mode), "the driver refused cuCtxSetFlags"
        torch.cuda._sleep(1)
        torch.cuda.synchronize()
        cpu, wall = time.process_time(), time.perf_counter()
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU cycles
        torch.cuda.synchronize()
        spent[mode] = (time.process_time() - cpu) / (time.perf_counter() - wall)
    gpu_wait.set_wait("spin")
    assert spent["spin"] > 0.5, spent  # CUDA's spinning wait keeps the core busy through the sleep
    assert spent["block"] < 0.5 * spent["spin"], spent
