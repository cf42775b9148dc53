"""How a judge or a runner waits for the GPU: asleep (blocking) or spinning on a core.

Sixteen judges and their sixteen runners share one GPU; the driver time-slices their contexts, so
a synchronize (an `.item()`, a copy to the host) may wait behind other processes' work. CUDA's
default for a process of one context on a host of many cores is to spin through that wait, a
core busy for nothing while builds queue for one. Outside the timing lock both processes sleep
while they wait (`block`); under it they spin (`spin`), as every timer bound was calibrated: the
judge's clock reads one call's end through a host wait, and a sleeping thread wakes late.

The context's scheduling flags are set with the driver's `cuCtxSetFlags` (CUDA 12.1 or later), on
the context current on the calling thread; where that is missing (an older driver, no context yet)
nothing changes and the process waits as CUDA chose.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
from collections.abc import Iterator
from typing import Literal

log = logging.getLogger(__name__)

Mode = Literal["block", "spin"]
SCHED_MASK = 0x07  # CU_CTX_SCHED_AUTO | SPIN | YIELD | BLOCKING_SYNC
FLAGS: dict[str, int] = {"spin": 0x01, "block": 0x04}  # CU_CTX_SCHED_SPIN, CU_CTX_SCHED_BLOCKING_SYNC

_driver: ctypes.CDLL | None = None
_looked = False
_mode: Mode | None = None  # what this process set last; None: CUDA's own choice


def driver() -> ctypes.CDLL | None:
    """The CUDA driver library, loaded once (call before a sandbox closes the file system); None
    where it has no `cuCtxSetFlags`."""
    global _driver, _looked
    if not _looked:
        _looked = True
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            lib.cuCtxSetFlags  # noqa: B018 - CUDA 12.1's; an older driver has none
            _driver = lib
        except (OSError, AttributeError) as exc:
            log.debug("the GPU wait stays CUDA's choice: %s", exc)
    return _driver


def set_wait(mode: Mode) -> bool:
    """Make the current context wait `mode`; False where that could not be done (nothing changed)."""
    global _mode
    if _mode == mode:
        return True
    lib = driver()
    if lib is None:
        return False
    current, flags = ctypes.c_void_p(), ctypes.c_uint()
    if lib.cuCtxGetCurrent(ctypes.byref(current)) != 0 or not current.value:
        return False  # no context on this thread yet: the next call tries again
    if lib.cuCtxGetFlags(ctypes.byref(flags)) != 0:
        return False
    if lib.cuCtxSetFlags(ctypes.c_uint((flags.value & ~SCHED_MASK) | FLAGS[mode])) != 0:
        return False
    _mode = mode
    return True


def start_blocking() -> bool:
    """The calling thread's context made (where a GPU is) and set to wait blocking; False where it
    could not be."""
    import torch

    if not torch.cuda.is_available():
        return False
    torch.cuda.synchronize()  # the primary context, current on this thread
    return set_wait("block")


def current_wait() -> Mode | None:
    """The mode this process set last (None: none set, CUDA's own choice)."""
    return _mode


@contextlib.contextmanager
def spinning() -> Iterator[None]:
    """Spin while inside (the timing lock), then wait as before; where no mode was set (blocking waits
    off), nothing changes."""
    before = _mode
    if before is not None:
        set_wait("spin")
    try:
        yield
    finally:
        if before is not None:
            set_wait(before)
