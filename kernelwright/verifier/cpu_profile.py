"""Opt-in cProfile of a verification's two processes: where the judge's and the runner's CPU goes.

`Spec.cpu_profile` names a folder (None: off, no profiler runs). The judge profiles its whole run and
writes `judge-<pid>.prof` there. The runner profiles from its start to its `finish` request and writes
`runner.prof` into its scratch folder, the only one it may write; the judge copies that out as
`runner-<judge pid>.prof` before the scratch is removed, reading it as an untrusted file (no link
followed, at most `MAX_PROFILE_BYTES`). A runner's profile is the candidate's process's own account:
read it for honest candidates (benchmarks), never as evidence about a hostile one.
`bench/cpu_profile_summary.py` adds the files up.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

RUNNER_FILE = "runner.prof"
MAX_PROFILE_BYTES = 64 << 20


@contextlib.contextmanager
def profiled(folder: str | None, name: str) -> Iterator[cProfile.Profile | None]:
    """Profile the block into `folder/name` (written atomically); nothing without a folder."""
    if not folder:
        yield None
        return
    prof = started_profile()
    try:
        yield prof
    finally:
        stop_and_dump(prof, Path(folder) / name)


def started_profile() -> cProfile.Profile:
    """A profiler of this process's CPU time (not the wall's: a wait costs nothing) running from now (the
    runner's: stopped by `stop_and_dump`)."""
    prof = cProfile.Profile(time.process_time)
    prof.enable()
    return prof


def stop_and_dump(prof: cProfile.Profile, dest: Path) -> None:
    """Stop the profiler and write its file; one that cannot be written is dropped (a diagnostic never
    changes a verdict)."""
    prof.disable()
    with contextlib.suppress(OSError):
        dump(prof, dest)


def dump(prof: cProfile.Profile, dest: Path) -> None:
    """Write the profile to `dest` through a temporary name, so a reader never sees half a file."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    prof.dump_stats(str(tmp))
    os.replace(tmp, dest)


def keep_runner_profile(scratch: Path, folder: str | None) -> Path | None:
    """Copy the runner's profile out of its scratch folder into `folder` as runner-<pid>.prof; None where
    there is none, it is not a regular file, or it is larger than MAX_PROFILE_BYTES."""
    if not folder:
        return None
    try:
        fd = os.open(scratch / RUNNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_PROFILE_BYTES:
            return None
        data = src.read(MAX_PROFILE_BYTES + 1)
    if len(data) > MAX_PROFILE_BYTES:
        return None
    dest = Path(folder) / f"runner-{os.getpid()}.prof"
    tmp = dest.with_name(f".{dest.name}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, dest)
    except OSError:  # a diagnostic: a folder gone or full costs the profile, never the verdict
        return None
    return dest
