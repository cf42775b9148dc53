"""Starting the runner: its scratch folder, its user, its command line, and its end.

- `runner_command`: `python -I` (no PYTHONPATH, no user site, no script folder on sys.path) with
  the judge's own copy of the package put first on the path, so what the runner imports is what
  the judge runs, from a folder the runner cannot write;
- `started_runner`: the scratch folder (the problem and the candidate copied in, owned by the
  runner's user), the runner started as that user with only the channel's pipes and its stderr
  file, the `ready` reply awaited; on exit the runner is killed, every process left under its uid
  with it (runner_uid.sweep, when the uid is its own), and the scratch removed;
- `RUNNER_REASONS`: the rejections a runner may report of its own candidate. Anything else it
  reports is `malformed_report`: no runner can hand out a pass, a speedup or another's reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from kernelwright.verifier.channel import Channel, field
from kernelwright.verifier.cpu_profile import keep_runner_profile
from kernelwright.verifier.forkserver import Spawned, SpawnRefused, spawn
from kernelwright.verifier.link import Link
from kernelwright.verifier.runner_uid import TASKS_MAX, is_dedicated, sweep
from kernelwright.verifier.sandbox import import_roots, make_scratch, remove_scratch, runner_env
from kernelwright.verifier.spec import Spec
from kernelwright.verifier.timing import TimingSettings

RUNNER_REASONS = frozenset({
    "compile_error", "no_model_new", "launch_error", "input_mutation", "async_escape", "harness_tampering",
    "illegal_memory_access", "out_of_memory", "exception",
})
READY_S = 180.0  # CUDA start-up of a runner on a busy GPU

BOOT = ("import os, sys; roots = sys.argv.pop(1).split(os.pathsep); sys.path[:0] = roots; "
        "from kernelwright.verifier.runner import main; main(sys.argv[1:])")


def runner_command(settings_path: Path) -> list[str]:
    return [sys.executable, "-I", "-c", BOOT, os.pathsep.join(import_roots()), str(settings_path)]


def _settings(spec: Spec, scratch: Path) -> dict[str, object]:
    return {"problem": str(scratch / "problem.py"), "candidate": str(scratch / "candidate.py"),
            "scratch": str(scratch), "memory_fraction": spec.memory_fraction, "split_build": spec.split_build,
            "slim_header": spec.slim_header, "generic_bindings": spec.generic_bindings,
            "pch_lock": spec.pch_lock, "blocking_gpu_wait": spec.blocking_gpu_wait,
            "profiler_warm_up": spec.timing and spec.profiler_warm_up, "cpu_profile": bool(spec.cpu_profile),
            "gpu_inputs": spec.gpu_inputs,
            "timing": asdict(TimingSettings.of(spec)),
            "tasks_max": TASKS_MAX if (user := _user(spec)) is not None and is_dedicated(user[0]) else None}


def _user(spec: Spec) -> tuple[int, int, str] | None:
    """The runner's user, as the parent probed it (sandbox.runner_user) and put in the spec."""
    return (int(spec.runner_user[0]), int(spec.runner_user[1]), str(spec.runner_user[2])) if spec.runner_user else None


def _prepare(spec: Spec, scratch: Path) -> Path:
    """Copy the problem and the candidate into the scratch folder and write the runner's settings."""
    shutil.copyfile(spec.problem, scratch / "problem.py")
    shutil.copyfile(spec.candidate, scratch / "candidate.py")
    path = scratch / "settings.json"
    path.write_text(json.dumps(_settings(spec, scratch)))
    user = _user(spec)
    for item in (scratch / "problem.py", scratch / "candidate.py", path):
        if user is not None:
            os.chown(item, user[0], user[1])
    return path


@dataclass
class RunnerHandle:
    """A started runner: the judge's link to it, the process, what confines it, its stderr file."""

    link: Link
    proc: subprocess.Popen | Spawned
    err: IO[bytes]
    user: tuple[int, int, str] | None
    isolation: str = ""

    def ready(self) -> None:
        """Wait for the runner's `ready` (RunnerGone or ChannelBroken if it never comes)."""
        self.isolation = _isolation(self.link.channel.receive(READY_S), self.user)

    def exit_code(self, wait_s: float = 5.0) -> int | None:
        """The runner's exit status once it ended by itself (None: still running after `wait_s`)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout=wait_s)
        return None

    @property
    def outside_pid(self) -> int | None:
        """The runner's pid when the fork server started it (it is then no descendant of the judge)."""
        return self.proc.pid if isinstance(self.proc, Spawned) else None

    def cpu_s(self) -> float:
        """CPU seconds the runner has used so far, its finished compilers included (0.0 once gone)."""
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return 0.0
        ticks = stat.rsplit(")", 1)[1].split()[11:15]  # utime stime cutime cstime
        return sum(int(t) for t in ticks) / os.sysconf("SC_CLK_TCK")

    def stderr_tail(self, limit: int = 800) -> str:
        """The end of what the runner wrote on stderr (the candidate's prints among it)."""
        with contextlib.suppress(OSError, ValueError):
            self.err.seek(0, os.SEEK_END)
            self.err.seek(max(0, self.err.tell() - limit))
            return self.err.read().decode(errors="replace")
        return ""


@contextlib.contextmanager
def started_runner(spec: Spec) -> Iterator[RunnerHandle]:
    """A started runner (call `ready` first); killed and its scratch folder removed on exit."""
    user = _user(spec)
    scratch = make_scratch(user)
    with tempfile.TemporaryFile(prefix="kw_runner_err_") as err:
        proc, to_runner, from_runner = _start(spec, scratch, err.fileno())
        link = Link(Channel(to_runner, from_runner), scratch / "out")
        try:
            yield RunnerHandle(link, proc, err, user)
        finally:
            _stop(proc, (to_runner, from_runner))
            sweep(user)  # what the candidate left running under its uid
            keep_runner_profile(scratch, spec.cpu_profile)
            remove_scratch(scratch)


def _isolation(ready: dict[str, object], user: tuple[int, int, str] | None) -> str:
    who = f"user {user[2]}" if user is not None else f"uid {os.getuid()} (the judge's)"
    return f"{who}, {str(field(ready, 'isolation', str))[:200]}, python -I, no network"


def _start(spec: Spec, scratch: Path, err_fd: int) -> tuple[subprocess.Popen | Spawned, int, int]:
    """The runner, forked by the fork server when the spec names one, else a new `python -I`;
    with the judge's ends of its stdin and stdout."""
    user = _user(spec)
    settings = _prepare(spec, scratch)
    if spec.forkserver:
        (in_r, in_w), (out_r, out_w) = os.pipe(), os.pipe()
        try:
            child = spawn(spec.forkserver, "runner", [str(settings)], str(scratch), runner_env(scratch),
                          (in_r, out_w, err_fd), user=(user[0], user[1]) if user is not None else None)
            return child, in_w, out_r
        except SpawnRefused:  # the server is gone: a runner of its own, as without one
            for fd in (in_w, out_r):
                os.close(fd)
        finally:
            os.close(in_r)
            os.close(out_w)
    extra = {"user": user[0], "group": user[1], "extra_groups": []} if user is not None else {}
    proc = subprocess.Popen(runner_command(settings), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=err_fd, cwd=scratch, env=runner_env(scratch), close_fds=True,
                            **extra)  # type: ignore[call-overload]
    return proc, proc.stdin.fileno(), proc.stdout.fileno()  # type: ignore[union-attr]


def _stop(proc: subprocess.Popen | Spawned, fds: tuple[int, int]) -> None:
    if isinstance(proc, subprocess.Popen):
        for pipe in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
    else:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    if isinstance(proc, Spawned):
        proc.close()
