"""A user id of its own for every runner, its tasks capped, and nothing of it left once it is judged.

    (used by verify.make_spec, judge_process.started_runner and the runner's main)

When the judge is root, the runners of one batch would otherwise all run as `nobody`: one runner's
candidate could then signal, trace or outnumber the others' processes (seccomp refuses the first
two; nothing refused the third), and a daemon it double-forks would outlive its runner and load
the GPU while later candidates are timed. So:
- `dedicated_user(base)`: a fresh uid for one runner, drawn at random from `UID_FIRST ..
  UID_FIRST + UID_SPAN` (no account has one; the kernel needs none), one that no process has now,
  with the base user's group (`nogroup`): it can read what `nobody` can read and write only its
  scratch folder. The base user (shared) where the uid range is not usable here (a user namespace
  that maps no such uids, or a kernel that refuses them).
- `limit_tasks(n)`: the runner caps its user's tasks (processes and threads, RLIMIT_NPROC) at
  `TASKS_MAX` before it imports the candidate: a fork bomb stops there, in its own uid only.
- `sweep(user)`: once the judge has stopped the runner, SIGKILL every process of that uid (the
  candidate's daemons and stray compilers with it); a shared uid is never swept.
"""

from __future__ import annotations

import functools
import os
import secrets
import subprocess

UID_FIRST = 1 << 20  # above every account and system range
UID_SPAN = 1 << 20
# processes + threads of one runner's uid: torch's thread pools (one thread a core) and a build's
# compilers fit well under it
TASKS_MAX = max(1024, 8 * (os.cpu_count() or 1))

_handed: set[int] = set()


def is_dedicated(uid: int) -> bool:
    return UID_FIRST <= uid < UID_FIRST + UID_SPAN


def _mapped(first: int, span: int, uid_map: str) -> bool:
    """Whether `uid_map` (the text of /proc/self/uid_map) maps every uid of first .. first + span."""
    for line in uid_map.splitlines():
        parts = line.split()
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            inside, count = int(parts[0]), int(parts[2])
            if inside <= first and first + span <= inside + count:
                return True
    return False


@functools.cache
def _range_usable(gid: int) -> bool:
    """The range is mapped in this user namespace and a process can start as one of its uids."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/uid_map", encoding="ascii") as fh:
            if not _mapped(UID_FIRST, UID_SPAN, fh.read()):
                return False
        done = subprocess.run(["/bin/sh", "-c", "exit 0"], user=UID_FIRST + UID_SPAN - 1, group=gid,
                              extra_groups=[], cwd="/", capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def uids_in_use() -> set[int]:
    """The real and effective uids of every live process now (from /proc/PID/status; a zombie, dead
    and waiting for a parent that may never reap it, runs nothing and is left out)."""
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as fh:
                fields = dict(ln.split(":", 1) for ln in fh if ln.startswith(("State:", "Uid:")))
        except (OSError, ValueError):
            continue
        if fields.get("State", "").split()[:1] in (["Z"], ["X"]):
            continue
        found.update(int(v) for v in fields.get("Uid", "").split()[:2] if v.isdigit())
    return found


def dedicated_user(base: tuple[int, int, str]) -> tuple[int, int, str]:
    """(uid, gid, name) of a uid no process has, for one runner; `base` where none can be had."""
    if not _range_usable(base[1]):
        return base
    busy = uids_in_use() | _handed
    for _ in range(64):
        uid = UID_FIRST + secrets.randbelow(UID_SPAN)
        if uid not in busy:
            if len(_handed) >= 4096:  # a long-lived server: swept uids may come round again
                _handed.clear()
            _handed.add(uid)
            return uid, base[1], f"uid {uid} (its own)"
    return base


def limit_tasks(n: int) -> str:
    """Cap this process's user at `n` tasks (RLIMIT_NPROC; not enforced for root). What applied."""
    import resource

    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
    except (ValueError, OSError) as exc:
        return f"no task limit ({exc})"
    return f"at most {n} tasks"


def sweep(user: tuple[int, int, str] | None) -> None:
    """SIGKILL every process of a dedicated runner uid, from a process of that uid (kill -1 reaches
    exactly the processes it may signal: its own uid's; the shell's builtin). Nothing for a shared or no user."""
    if user is None or not is_dedicated(user[0]):
        return
    try:
        subprocess.run(["/bin/sh", "-c", "kill -9 -1"], user=user[0], group=user[1], extra_groups=[], cwd="/",
                       env={"PATH": "/usr/bin:/bin"}, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        pass  # a uid nothing reuses soon (a random one of a million): what survives stays its own
