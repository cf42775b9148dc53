"""torch's precompiled `torch/extension.h`, built once by the parent while the first workers start.

    (used by kernelwright.verifier.verify.run_workers, verifier/ray_fanout.py and the worker's load_inline)

`load_inline(..., use_pch=True)` keeps one precompiled header in torch's include folder and
rebuilds it (tens of seconds, ~800 MB) whenever it is missing or was built with other flags. Many
workers doing that at once race on the same file. So:

- the parent holds an exclusive lock on a lock file while it builds the header once, in a thread,
  with the flags of a candidate that passes no `extra_cflags` (the common case), and then writes
  "ok" or "failed" into the lock file;
- a worker's `load_inline` waits for a shared lock on that file (its own start-up, the problem
  import and the candidate's Python run meanwhile), and uses the header only when the parent
  built it and the candidate passes no flags that would make torch rebuild it;
- verifications spread over a cluster's nodes, with no parent in common, share one lock file per
  node instead (`header_built_on_node`): the first that finds it without "ok" builds the header.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from kernelwright.cuda.slim_header import build_in_subprocess, failures

log = logging.getLogger(__name__)
WAIT_S = 120.0  # a worker waits this long for the parent's build (it takes ~20-50 s), then goes without
BUILD = ("import torch.utils.cpp_extension as ext; "
         "ext._check_and_build_extension_h_precompiler_headers([], [])")


def build_header(timeout_s: float) -> bool:
    """Build (or find up to date) torch's precompiled extension.h; False if that failed."""
    try:
        done = subprocess.run([sys.executable, "-c", BUILD], capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def _build_under_lock(fh: IO[str], timeout_s: float, name: str) -> threading.Thread:
    """A started thread that builds the header, writes "ok" or "failed" into the lock file `fh`
    (held exclusively by the caller) and then releases the lock; then, with the workers already
    building, the smaller host headers and the generic bindings object of split builds
    (slim_header.py: found up to date after their first build; workers use each once it is ready)."""

    def build() -> None:
        ok = False
        try:
            ok = build_header(timeout_s)
            fh.seek(0)
            fh.truncate()
            fh.write("ok" if ok else "failed")
            fh.flush()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
        if ok and not build_in_subprocess(timeout_s) and (rejected := failures()):
            log.warning("split builds' host files read a larger header: g++ rejected %s", rejected)

    thread = threading.Thread(target=build, name=name, daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def header_built_alongside(timeout_s: float, enabled: bool = True) -> Iterator[str | None]:
    """Yield a lock-file path at once while the header builds in a thread; workers given that path
    wait for the build before their own. The thread is joined on exit. Not `enabled` (no GPU, so no
    worker will build): yield None and build nothing."""
    if not enabled:
        yield None
        return
    with tempfile.NamedTemporaryFile(prefix="kw_pch_", suffix=".lock", delete=False) as tmp:
        path = tmp.name
    os.chmod(path, 0o644)  # the candidate's process (another user, see verifier/sandbox.py) reads and waits on it
    fh = open(path, "r+")  # noqa: SIM115 - the lock is held across the thread's life
    fcntl.flock(fh, fcntl.LOCK_EX)  # taken before any worker starts

    thread = _build_under_lock(fh, timeout_s, "kw-pch")
    try:
        yield path
    finally:
        thread.join()
        fh.close()
        Path(path).unlink(missing_ok=True)


def node_header_lock() -> Path:
    """The lock file that every verification on this node shares (per user and torch version)."""
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "none"
    return Path(tempfile.gettempdir()) / f"kw_pch_node_{torch_version}_{os.getuid()}.lock"


@contextlib.contextmanager
def header_built_on_node(timeout_s: float, enabled: bool = True) -> Iterator[str | None]:
    """`header_built_alongside` for verifications that share a node but not a parent (tasks of a
    cluster, verifier/ray_fanout.py): the first to find the node's lock file without "ok" builds the
    header in a thread under its exclusive lock; the others' workers wait on the same file, as under
    one parent. Yields the lock file's path at once (None when not `enabled`)."""
    if not enabled:
        yield None
        return
    path = node_header_lock()
    fh = open(path, "a+")  # noqa: SIM115 - the lock is held across the thread's life
    with contextlib.suppress(OSError):
        os.chmod(path, 0o644)  # the candidate's process (another user) reads and waits on it
    thread = None
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pass  # another verification on this node is building it: our worker waits on the file
    else:
        fh.seek(0)
        if fh.read().strip() == "ok":
            fcntl.flock(fh, fcntl.LOCK_UN)
        else:  # never built here, or the last build failed: build it (again)
            thread = _build_under_lock(fh, timeout_s, "kw-pch-node")
    try:
        yield str(path)
    finally:
        if thread is not None:
            thread.join()
        fh.close()


def header_ready(lock_path: str, wait_s: float = WAIT_S, poll_s: float = 0.05) -> bool:
    """Wait (at most `wait_s`) until the parent's build is over; True if it succeeded. Past the
    wait, False: the worker builds without the header rather than spend its time limit waiting."""
    deadline = time.monotonic() + wait_s
    with open(lock_path) as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(poll_s)
        try:
            return fh.read().strip() == "ok"
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def use_header(kw: dict[str, Any], lock_path: str | None) -> bool:
    """Whether a worker's load_inline call should use the precompiled header: never when the
    candidate passes host flags or include paths (torch would rebuild the shared header with them);
    with a parent build (`lock_path`), only when that build succeeded; alone, torch builds it."""
    if kw.get("extra_cflags") or kw.get("extra_include_paths"):
        return False
    return header_ready(lock_path) if lock_path else True
