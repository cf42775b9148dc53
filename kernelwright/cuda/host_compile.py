"""The host stage's toolchain: the C++ compiler, its flags, and the precompiled torch/extension.h.

Flags follow torch's load_inline build of main.cpp (`-std=c++20 -fPIC -DTORCH_API_INCLUDE_EXTENSION_H
-DTORCH_EXTENSION_NAME=...`, torch's and Python's include folders as system folders), plus the host
CUDA headers and the shims of `host_shims`. The precompiled header is a g++ PCH of a one-line
header including `torch/extension.h`, built once per (compiler, flags, torch) into
`<pch_dir>/<hash>/kw_torch.h.gch` under a file lock, and used with `-include <that>/kw_torch.h`.
(`pch.build_header` cannot be reused for this: torch's builder writes into torch's own include
folder and rebuilds whenever another caller's flags differ.) Without g++, no PCH: the header is
parsed each time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sysconfig
import threading
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path

from kernelwright import atomic
from kernelwright.cuda.compile_workers import Limits, Outcome, run_limited
from kernelwright.cuda.host_shims import shims_dir

PCH_TIMEOUT_S = 900.0  # one build of the header: ~45 s on one core; it is ours, not a candidate's
EXTENSION_NAME = "kw_candidate"
ENV = {**os.environ, "LC_ALL": "C"}  # ASCII quotes in diagnostics
_PCH_LOCK = threading.Lock()
_PCH_MEMO: dict[Path, bool] = {}  # header folder -> ready (this process)


@lru_cache(maxsize=1)
def find_compiler() -> str | None:
    """The C++ compiler: $CXX when it resolves, else g++, else c++; None when there is none."""
    for name in (os.environ.get("CXX"), "g++", "c++"):
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


@lru_cache(maxsize=8)
def compiler_id(cxx: str) -> str:
    """The compiler's path and `--version` line (part of every cache key)."""
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30, env=ENV).stdout
    except (OSError, subprocess.TimeoutExpired):
        return cxx
    return f"{cxx} {out.splitlines()[0] if out else ''}".strip()


def is_gcc(cxx: str) -> bool:
    first = compiler_id(cxx).lower()
    return ("g++" in first or "gcc" in first) and "clang" not in first


@lru_cache(maxsize=8)
def system_include_dirs(cxx: str) -> tuple[str, ...]:
    """The folders `cxx` searches for `#include <...>` by default (from `cxx -E -v`)."""
    try:
        done = subprocess.run([cxx, "-x", "c++", "-E", "-v", "-"], input="", capture_output=True, text=True,
                              timeout=30, env=ENV)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    lines = done.stderr.splitlines()
    try:
        start = lines.index("#include <...> search starts here:") + 1
        end = lines.index("End of search list.", start)
    except ValueError:
        return ()
    return tuple(os.path.normpath(line.strip().split(" (")[0]) for line in lines[start:end])


@lru_cache(maxsize=1)
def cuda_host_include() -> str | None:
    """CUDA headers a host compiler can use (need `crt/host_config.h`): the nvidia-cuda-runtime wheel
    when it has them (with nvidia-cuda-crt), else $CUDA_HOME / $CUDA_PATH / /usr/local/cuda."""
    candidates: list[Path] = []
    try:
        import nvidia.cu13  # type: ignore[import-not-found]

        candidates += [Path(p) / "include" for p in nvidia.cu13.__path__]
    except ImportError:
        pass
    candidates += [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates.append(Path("/usr/local/cuda/include"))
    return next((str(p) for p in candidates if (p / "crt" / "host_config.h").is_file()), None)


@lru_cache(maxsize=1)
def torch_include_dirs() -> tuple[str, ...]:
    """torch's include paths, and Python's (torch/extension.h includes Python.h)."""
    from torch.utils.cpp_extension import include_paths

    python = sysconfig.get_path("include", scheme="posix_prefix")
    return tuple(include_paths()) + ((python,) if python else ())


def torch_version() -> str:
    import torch

    return str(torch.__version__)


def host_flags(tool_dir: Path, cuda_include: str) -> list[str]:
    """Flags shared by the header build and every check (a PCH needs the same ones)."""
    flags = ["-std=c++20", "-fPIC", "-DTORCH_API_INCLUDE_EXTENSION_H", f"-DTORCH_EXTENSION_NAME={EXTENSION_NAME}"]
    for folder in (*torch_include_dirs(), cuda_include):
        flags += ["-isystem", folder]
    return flags + ["-idirafter", str(shims_dir(tool_dir))]


CHECK_FLAGS = ["-fsyntax-only", "-Winvalid-pch", "-Wno-attributes", "-fdiagnostics-color=never",
               "-fdiagnostics-urls=never", "-fno-diagnostics-show-labels", "-fmax-errors=20"]


@contextlib.contextmanager
def file_lock(path: Path, shared: bool = False) -> Iterator[None]:
    """An flock on `path` (made with its folder if missing) while inside: exclusive, or `shared` with other
    shared holders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def pch_folder(pch_root: Path, cxx: str, flags: list[str]) -> Path:
    digest = hashlib.sha256(json.dumps([compiler_id(cxx), flags, torch_version()]).encode()).hexdigest()[:16]
    return pch_root / digest


def header_ready(folder: Path, product: str, build: Callable[[Path], bool]) -> bool:
    """Whether the precompiled header `folder/product` is there: built by `build(folder)` first, under
    the folder's file lock, when it is not. Remembered per folder for this process (a build that
    failed is not tried again). Both host checkers' headers go through here."""
    with _PCH_LOCK:
        if folder not in _PCH_MEMO:
            with file_lock(folder.with_suffix(".lock")):
                ready = (folder / "pch.json").is_file() and (folder / product).is_file()
                _PCH_MEMO[folder] = ready or build(folder)
        return _PCH_MEMO[folder]


def build_header(folder: Path, product: str, command: Callable[[Path], list[str]],
                 compiler: str) -> tuple[bool, Outcome]:
    """Write `folder/kw_torch.h` (one line including torch/extension.h), then run `command(tmp)`,
    which precompiles it into `tmp`, under the header's time limit; once it succeeds, move `tmp` to
    `folder/product` and record the build in pch.json (`pch_info`). (built, the command's outcome)"""
    folder.mkdir(parents=True, exist_ok=True)
    atomic.write_text(folder / "kw_torch.h", "#include <torch/extension.h>\n")
    tmp = folder / f".{product}.{os.getpid()}.tmp"
    done = run_limited(command(tmp), Limits(PCH_TIMEOUT_S, 0), cwd=str(folder), env=ENV)
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        return False, done
    os.replace(tmp, folder / product)
    atomic.write_json(folder / "pch.json", {"build_seconds": round(done.seconds, 2), "bytes": os.path.getsize(
        folder / product), "compiler": compiler, "torch": torch_version()})
    return True, done


def _build_pch(folder: Path, cxx: str, flags: list[str]) -> bool:
    command = [cxx, *flags, "-x", "c++-header", str(folder / "kw_torch.h"), "-o"]
    built, _ = build_header(folder, "kw_torch.h.gch", lambda tmp: [*command, str(tmp)], compiler_id(cxx))
    return built


def ensure_pch(pch_root: Path, cxx: str, flags: list[str]) -> Path | None:
    """The header to `-include` (its .gch beside it), building it first if needed; None: no PCH
    (not g++, or the build failed: checks then parse torch/extension.h themselves)."""
    if not is_gcc(cxx):
        return None
    folder = pch_folder(pch_root, cxx, flags)
    ok = header_ready(folder, "kw_torch.h.gch", lambda f: _build_pch(f, cxx, flags))
    return folder / "kw_torch.h" if ok else None


def pch_info(header: Path | None) -> dict[str, object]:
    """What `_build_pch` recorded about the header (build time, size), {} without one."""
    if header is None:
        return {}
    try:
        data = json.loads((header.parent / "pch.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_check(cxx: str, flags: list[str], pch: Path | None, files: list[str], cwd: str,
              limits: Limits) -> tuple[int | None, str, float, str | None]:
    """(returncode, output, seconds, limit hit) of `cxx -fsyntax-only` over `files`."""
    include = ["-include", str(pch)] if pch is not None else []
    start = time.perf_counter()
    done = run_limited([cxx, *flags, *CHECK_FLAGS, *include, *files], limits, cwd=cwd, env=ENV)
    return done.returncode, done.output, time.perf_counter() - start, done.limit
