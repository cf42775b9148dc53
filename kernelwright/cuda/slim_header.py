"""A smaller precompiled header for the host file of a split build: torch/types.h and torch/python.h.

    (built by cuda/pch.py's header thread; used by verifier/isolation.py through split_build.py)

The host file of a split build (split_build.py) is the candidate's host wrappers and the pybind11
bindings, compiled by g++ after torch's precompiled `torch/extension.h`. That header is
`torch/all.h` (the whole C++ frontend: nn, optim, data, jit, serialization) plus `torch/python.h`,
and g++ instantiates the templates its inline functions leave pending in every file that reads it,
whether the file uses them or not: an empty file after it costs about 7 CPU-s. Host wrappers use
tensors, their factories and `TORCH_CHECK` (`torch/types.h`); the bindings need `torch/python.h`.
Precompiled together those two leave about 4.6 CPU-s for an empty file: a seed solution's host
file takes 5.5 CPU-s instead of 7.7 (medians of 36, bench/host_header.py, on the dev machine).

The header lives beside torch's own `extension.h` (readable wherever torch's headers are), its
precompiled form beside it as `<name>.gch`, and a stamp file records the text and the command
they were built from: `ready()` gives the header only when the stamp matches what this process
would build, so a changed compiler, flag or torch makes it stale rather than wrong. A precompiled
header g++ finds invalid is skipped by g++ and the header read as text: slower, never wrong.

`host_sources` rewrites a split build's host sources to read this header first and drops their
own `#include <torch/extension.h>`; a file that includes any other torch header (`torch/all.h`,
`torch/torch.h`, `torch/nn/...`) keeps torch's header, since reading those as text would cost more
than the slim header saves.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

from kernelwright import atomic

NAME = "kw_slim_extension.h"
TEXT = "#pragma once\n#include <torch/types.h>\n#include <torch/python.h>\n"
SLIM_ENOUGH = frozenset({"extension.h", "types.h", "python.h"})  # torch headers this one stands in for
_TORCH_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/([^>"]+)[>"]', re.M)
_EXTENSION_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"][ \t]*$', re.M)
_STD = re.compile(r"-std=(?:c|gnu)\+\+\d+[a-z]?")


def header_path() -> Path | None:
    """Where the header goes: beside torch's `torch/extension.h`; None without torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "include" / "torch" / NAME


def _std_flag(include_torch: Path) -> str:
    """The C++ standard torch builds its own precompiled header with (its signature file), so that
    g++ accepts ours for the same `load_inline` compile; c++17 when torch has not built one."""
    with contextlib.suppress(OSError):
        if found := _STD.search((include_torch / "extension.h.sign").read_text(encoding="utf-8")):
            return found.group(0)
    return "-std=c++17"


def command(header: Path) -> list[str]:
    """The g++ command that precompiles `header`, with the compiler (`CXX`, else `c++`, as torch's
    `get_cxx_compiler` on Linux) and flags torch precompiles `extension.h` with. Reads no torch
    module, so a parent can tell whether the header is ready without importing torch."""
    include = header.parent.parent
    return [os.environ.get("CXX", "c++"), "-x", "c++-header", str(header), "-o", f"{header}.gch",
            "-I", str(include), "-I", sysconfig.get_path("include"),
            "-I", str(include / "torch" / "csrc" / "api" / "include"),
            "-DTORCH_API_INCLUDE_EXTENSION_H", _std_flag(header.parent), "-fPIC"]


def _stamp(cmd: list[str]) -> str:
    return hashlib.sha256(json.dumps([TEXT, cmd]).encode()).hexdigest()


def _stamp_path(header: Path) -> Path:
    return header.with_name(header.name + ".stamp")


def ready() -> str | None:
    """The header's path when its precompiled form matches what this process would build; else None."""
    header = header_path()
    if header is None or not Path(f"{header}.gch").is_file():
        return None
    try:
        current = _stamp_path(header).read_text(encoding="utf-8").strip() == _stamp(command(header))
    except OSError:
        return None
    return str(header) if current else None


def build(timeout_s: float) -> bool:
    """Write and precompile the header (or find it up to date); False if that failed. The `.gch` is
    compiled under a temporary name and moved into place, then the stamp written: a reader sees the
    old header, or the new one whole."""
    header = header_path()
    if header is None:
        return False
    if ready() is not None:
        return True
    cmd = command(header)
    tmp = Path(f"{header}.gch.{os.getpid()}.tmp")
    try:
        if not header.is_file() or header.read_text(encoding="utf-8") != TEXT:
            atomic.write_text(header, TEXT)
            os.chmod(header, 0o644)  # the candidate's compiler runs as another user (verifier/sandbox.py)
        done = subprocess.run([*cmd[:5], str(tmp), *cmd[6:]], capture_output=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            return False
        os.chmod(tmp, 0o644)
        os.replace(tmp, f"{header}.gch")
        atomic.write_text(_stamp_path(header), _stamp(cmd) + "\n")  # last: until it is there, not ready
        os.chmod(_stamp_path(header), 0o644)
        return True
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        tmp.unlink(missing_ok=True)


def host_sources(cpp: list[str], header: str) -> list[str] | None:
    """`cpp` (a split build's host sources) reading `header` first instead of `torch/extension.h`,
    or None when they include a torch header the slim one does not stand in for."""
    if set(_TORCH_INCLUDE.findall("\n".join(cpp))) - SLIM_ENOUGH:
        return None
    return [f'#include "{header}"', *(_EXTENSION_INCLUDE.sub("", source) for source in cpp)]


def build_in_subprocess(timeout_s: float) -> bool:
    """`build` in a fresh Python (the parent that calls it need not import torch); nothing is started
    when the header is up to date."""
    if ready() is not None:
        return True
    try:
        done = subprocess.run([sys.executable, "-m", "kernelwright.cuda.slim_header", str(timeout_s)],
                              capture_output=True, timeout=timeout_s + 30, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


if __name__ == "__main__":
    sys.exit(0 if build(float(sys.argv[1]) if len(sys.argv) > 1 else 600.0) else 1)
