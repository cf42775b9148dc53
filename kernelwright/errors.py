"""Errors that the CLI turns into a clear message and an exit status, never a traceback."""

from __future__ import annotations


class KernelwrightError(Exception):
    """Base class: `exit_code` is the process exit status the CLI uses."""

    exit_code = 1


class UsageError(KernelwrightError):
    """Bad input from the user: a missing file, an unknown config key, a malformed corpus."""

    exit_code = 2


class NoCudaDevice(KernelwrightError):
    """A GPU-only step was asked for on a machine without a CUDA device."""

    exit_code = 3
