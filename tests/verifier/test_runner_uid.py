"""A uid of its own per runner: drawn fresh, capped in tasks, and swept once the runner is judged."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kernelwright.verifier import runner_uid
from kernelwright.verifier.judge_process import _settings
from kernelwright.verifier.runner_uid import UID_FIRST, UID_SPAN, dedicated_user, is_dedicated, sweep, uids_in_use
from kernelwright.verifier.spec import Spec

NOBODY = (65534, 65534, "nobody")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="starting processes as another uid needs root")


def test_the_uid_map_must_hold_the_whole_range() -> None:
    assert runner_uid._mapped(UID_FIRST, UID_SPAN, "         0          0 4294967295\n")
    assert not runner_uid._mapped(UID_FIRST, UID_SPAN, "         0     100000      65536\n")
    assert runner_uid._mapped(UID_FIRST, UID_SPAN, f"0 0 65536\n{UID_FIRST} 5000000 {UID_SPAN}\n")
    assert not runner_uid._mapped(UID_FIRST, UID_SPAN, "garbage\n")


def test_each_runner_gets_a_uid_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_uid, "_range_usable", lambda gid: True)
    users = [dedicated_user(NOBODY) for _ in range(200)]
    assert len({u[0] for u in users}) == 200
    assert all(is_dedicated(u[0]) and u[1] == NOBODY[1] and "its own" in u[2] for u in users)
    assert not {u[0] for u in users} & uids_in_use()


def test_where_the_range_is_unusable_runners_share_the_base_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_uid, "_range_usable", lambda gid: False)
    assert dedicated_user(NOBODY) == NOBODY


def test_only_a_dedicated_uid_is_capped_in_tasks(tmp_path) -> None:
    own = Spec(problem="p", candidate="c", result="", runner_user=[UID_FIRST + 7, 65534, "own"])
    shared = Spec(problem="p", candidate="c", result="", runner_user=list(NOBODY))
    assert _settings(own, tmp_path)["tasks_max"] == runner_uid.TASKS_MAX
    assert _settings(shared, tmp_path)["tasks_max"] is None
    assert _settings(Spec(problem="p", candidate="c", result=""), tmp_path)["tasks_max"] is None


def test_limit_tasks_sets_the_process_limit() -> None:
    code = ("import resource; from kernelwright.verifier.runner_uid import limit_tasks; "
            "print(limit_tasks(77), resource.getrlimit(resource.RLIMIT_NPROC))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "at most 77 tasks (77, 77)"


def _uid_alive(uid: int) -> bool:
    return uid in uids_in_use()


def _until(done: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait until `done()` holds, or `seconds` have passed (the caller asserts)."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)


@root_only
def test_sweep_kills_what_the_candidate_left_under_its_uid() -> None:
    if not runner_uid._range_usable(65534):
        pytest.skip("this machine cannot start processes under the dedicated uid range")
    user = dedicated_user(NOBODY)
    other = dedicated_user(NOBODY)
    # a daemon in a session of its own, outliving the process that started it, and one of another runner
    subprocess.run(["/bin/sh", "-c", "setsid sleep 300 >/dev/null 2>&1 < /dev/null &"], user=user[0],
                   group=user[1], extra_groups=[], cwd="/", check=True)
    bystander = subprocess.Popen(["sleep", "300"], user=other[0], group=other[1], extra_groups=[], cwd="/")
    try:
        _until(lambda: _uid_alive(user[0]))
        assert _uid_alive(user[0])
        sweep(user)
        _until(lambda: not _uid_alive(user[0]))
        assert not _uid_alive(user[0])
        assert bystander.poll() is None  # another runner's uid is untouched
    finally:
        bystander.kill()
        bystander.wait()


def test_a_shared_uid_is_never_swept(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[object] = []
    monkeypatch.setattr(runner_uid.subprocess, "run", lambda *a, **k: ran.append(a))
    sweep(NOBODY)
    sweep(None)
    assert ran == []


@root_only
def test_a_zombie_holds_no_uid() -> None:
    if not runner_uid._range_usable(65534):
        pytest.skip("this machine cannot start processes under the dedicated uid range")
    user = dedicated_user(NOBODY)
    child = subprocess.Popen(["/bin/sh", "-c", "exit 0"], user=user[0], group=user[1], extra_groups=[], cwd="/")
    try:
        _until(lambda: "State:\tZ" in Path(f"/proc/{child.pid}/status").read_text())  # exited, not reaped
        assert user[0] not in uids_in_use()
    finally:
        child.wait()
