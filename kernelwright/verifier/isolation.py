"""Isolation and build: what the candidate's process can reach, and how its extension is built.

- `Rejected`: raised anywhere in the harness to end verification with a verdict;
- `no_network`: no network for the candidate (a new network namespace where allowed, no sockets);
- `patch_load_inline`: cheaper `load_inline` builds that compute the same thing (split build, slim
  header, precompiled header); `BUILD_PATHS` records how each call was built;
- `own_launches_skipped`: the candidate's own kernel launches turned off (the decoy check);
- `import_file`: the problem and the candidate, imported from their files;
- `thread_count`: the process's threads (a candidate's work escaping to threads of its own).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import socket
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelwright.cuda import slim_header
from kernelwright.cuda.pch import use_header
from kernelwright.verifier.build_failure import build_failure


class Rejected(Exception):
    """Raised inside the worker to end verification with a verdict."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


# ---------------------------------------------------------------- isolation and build


def no_network() -> None:
    """No network for the candidate: a new network namespace where allowed, and no sockets."""
    if hasattr(os, "unshare"):
        with contextlib.suppress(OSError):
            os.unshare(os.CLONE_NEWNET)  # type: ignore[attr-defined]

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise PermissionError("network access is disabled during verification")

    socket.socket = refuse  # type: ignore[assignment,misc]
    socket.create_connection = refuse  # type: ignore[assignment]


def patch_load_inline(cache: str | None, split: bool = False, pch_lock: str | None = None,
                      slim_host: bool = True, bare_host: bool = True) -> None:
    """Cheaper `load_inline` builds that compute the same thing.

    - a build folder per content hash (a second candidate with the same sources is not rebuilt);
    - only the present GPU's architecture (TORCH_CUDA_ARCH_LIST);
    - the .cu file includes `torch/types.h` instead of `torch/extension.h` (no pybind11, no
      autograd API: half the host parse), retried with the original header if that fails;
    - a split build's host file read after the smallest precompiled header that serves it
      (cuda/slim_header.py) when `slim_host` and the parent built them, whatever host flags the
      candidate passes: torch/types.h alone with the generic bindings linked in
      (cuda/host_bindings.py; when `bare_host` too), else torch/types.h + torch/python.h, else
      torch's extension.h;
    - a precompiled `torch/extension.h` for the C++ bindings file (`use_pch`), built by the parent
      while this worker started (`pch_lock`, see pch.py). A call without it leaves the shared header
      in place: stock `load_inline(use_pch=False)` deletes it, under the other workers' builds.
    """
    import torch
    import torch.utils.cpp_extension as ext

    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    original = ext.load_inline
    ext.remove_extension_h_precompiler_headers = lambda: None  # load_inline looks it up at each call

    def load_inline(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> Any:
        sources = json.dumps([name, cpp_sources, cuda_sources, kw.get("functions"), kw.get("extra_cuda_cflags"),
                              kw.get("extra_cflags"), os.environ["TORCH_CUDA_ARCH_LIST"]], default=str)
        digest = hashlib.sha256(sources.encode()).hexdigest()[:20]
        if cache and not kw.get("build_directory"):
            kw["build_directory"] = str(Path(cache) / digest)
            Path(kw["build_directory"]).mkdir(parents=True, exist_ok=True)
        kw["use_pch"] = use_header(kw, pch_lock)
        if split:  # None: not splittable or the split build failed
            from kernelwright.cuda.split_build import try_split_build
            # the smaller headers are kernelwright's own (stamped, never rebuilt with a candidate's
            # flags), so a candidate's host flags do not keep them out: with `-O3`, say, g++ skips
            # the precompiled form and reads the header as text, still far less than extension.h
            header = slim_header.ready() if slim_host else None
            bare = slim_header.bare_ready() if slim_host and bare_host else None
            if (built := try_split_build(original, name, cpp_sources, cuda_sources, kw, header, bare)) is not None:
                module, how = built
                BUILD_PATHS.append(how)
                SPLIT_LIBRARIES.append(str(getattr(module, "__file__", "")))
                return module
        slim = _slim_cuda(cuda_sources)
        if slim is not None:
            try:
                module = original(name, cpp_sources, slim, **kw)
                BUILD_PATHS.append("slim")
                return module
            except Exception:  # noqa: BLE001 - the slim header was not enough: build as written
                pass
        module = original(name, cpp_sources, cuda_sources, **kw)
        BUILD_PATHS.append("as_written")
        return module

    ext.load_inline = load_inline  # type: ignore[assignment]


BUILD_PATHS: list[str] = []  # how each load_inline call of this worker was built: split_bare, split_slim, split,
#                              slim or as_written
SPLIT_PATHS = ("split", "split_slim", "split_bare")  # the build paths of the split build
SPLIT_LIBRARIES: list[str] = []  # the split-built extensions' files: their launchers honour the skip flag


@contextlib.contextmanager
def own_launches_skipped() -> Iterator[int]:
    """Inside, every launcher of the candidate's own kernels returns at once (the split build's
    `kw_skip_own_launches`). Yields how many extensions that holds for: 0 unless every build of
    the candidate was split (a kernel built as written would still run)."""
    import ctypes

    from kernelwright.cuda.split_codegen import SKIP_FLAG

    flags = []
    if BUILD_PATHS and all(p in SPLIT_PATHS for p in BUILD_PATHS):
        for path in SPLIT_LIBRARIES:
            with contextlib.suppress(OSError, ValueError):
                flags.append(ctypes.c_int.in_dll(ctypes.CDLL(path), SKIP_FLAG))
        flags = flags if len(flags) == len(SPLIT_LIBRARIES) else []
    for flag in flags:
        flag.value = 1
    try:
        yield len(flags)
    finally:
        for flag in flags:
            flag.value = 0


def _slim_cuda(cuda_sources: Any) -> Any:
    def slim(src: str) -> str:
        return src.replace("#include <torch/extension.h>", "#include <torch/types.h>")

    if isinstance(cuda_sources, str) and "torch/extension.h" in cuda_sources:
        return slim(cuda_sources)
    if isinstance(cuda_sources, list) and any("torch/extension.h" in s for s in cuda_sources):
        return [slim(s) for s in cuda_sources]
    return None


def import_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise Rejected("exception", f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _where(exc: BaseException) -> str:
    """Where it was raised (the last frame: file name, line, function) and the exception it was
    raised while handling, if any: what a user needs to find the failure."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None:
        where += f"; while handling {type(cause).__name__}: {str(cause)[-300:]}"
    return where


def classify_failure(exc: BaseException) -> tuple[str, str]:
    """(reason, detail) of an exception the candidate's code raised: a build that failed (a lazy
    build too: `build_failure`, its stage and first error), out of memory, an illegal address, a
    launch failure (by the CUDA error code torch carries), or any other exception."""
    import torch

    failure = build_failure(exc)
    if failure is not None:
        return "compile_error", failure.detail()
    text = f"{type(exc).__name__}: {str(exc)[-1500:]}{_where(exc)}"
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return "out_of_memory", text
    code = getattr(exc, "error_code", None)
    if isinstance(exc, getattr(torch, "AcceleratorError", ())) and code in (700, 716, 719, 717, 718):
        return "illegal_memory_access", text
    if isinstance(exc, getattr(torch, "AcceleratorError", ())) and code in (1, 9, 98, 209, 701):
        return "launch_error", text
    return "exception", text


# ---------------------------------------------------------------- the process's threads and the timing lock


def thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()
