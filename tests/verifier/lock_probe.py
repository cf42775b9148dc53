"""Whether another open file description holds a flock on a file (tests of the timing lock and the GPU gate)."""

from __future__ import annotations

import fcntl
from pathlib import Path


def lock_held(path: str | Path) -> bool:
    """True when an exclusive flock cannot be had on `path` at once: someone holds it (or waits holding it)."""
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False
