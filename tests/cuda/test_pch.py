"""The parent's precompiled-header build and the workers' wait for it (kernelwright.cuda.pch)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch.utils.cpp_extension as ext

from kernelwright.cuda import pch


def test_header_is_used_only_without_host_flags() -> None:
    assert pch.use_header({}, None)
    assert pch.use_header({"extra_cuda_cflags": ["-O3"]}, None)  # nvcc flags do not touch the header
    assert not pch.use_header({"extra_cflags": ["-O3"]}, None)
    assert not pch.use_header({"extra_include_paths": ["/x"]}, None)


def _blocked_build(monkeypatch: pytest.MonkeyPatch, ok: bool) -> threading.Event:
    release = threading.Event()

    def build(timeout_s: float) -> bool:
        release.wait(30)
        return ok

    monkeypatch.setattr(pch, "build_header", build)
    monkeypatch.setattr(pch, "build_in_subprocess", lambda timeout_s: True)  # the slim header: not here
    return release


@pytest.mark.parametrize("ok", [True, False])
def test_workers_wait_for_the_parent_build_and_see_its_outcome(monkeypatch: pytest.MonkeyPatch, ok: bool) -> None:
    release = _blocked_build(monkeypatch, ok)
    seen: list[bool] = []
    with pch.header_built_alongside(60) as lock:
        assert lock is not None
        waiter = threading.Thread(target=lambda: seen.append(pch.use_header({}, lock)))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive() and not seen  # still waiting: the build has not finished
        release.set()
        waiter.join(30)
    assert seen == [ok]
    assert not Path(lock).exists()


def test_disabled_builds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pch, "build_header", lambda timeout_s: pytest.fail("built without a GPU"))
    with pch.header_built_alongside(60, enabled=False) as lock:
        assert lock is None


def test_torch_still_has_the_header_builder() -> None:
    """BUILD calls a private torch function; a torch that drops it makes every build skip the header."""
    assert callable(getattr(ext, "_check_and_build_extension_h_precompiler_headers", None))


def test_a_worker_stops_waiting_for_a_stuck_build(monkeypatch: pytest.MonkeyPatch) -> None:
    release = _blocked_build(monkeypatch, True)
    with pch.header_built_alongside(60) as lock:
        assert lock is not None
        assert not pch.header_ready(lock, wait_s=0.2)  # gave up: builds without the header
        release.set()
