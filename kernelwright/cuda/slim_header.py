"""What a split build's host file reads and links instead of torch's precompiled extension.h.

    (built by cuda/pch.py's header thread; used by verifier/isolation.py through split_build.py)

The host file of a split build (split_build.py) is the candidate's host wrappers and the pybind11
bindings, compiled by g++ after torch's precompiled `torch/extension.h`. That header is
`torch/all.h` (the whole C++ frontend: nn, optim, data, jit, serialization) plus `torch/python.h`,
and g++ instantiates the templates its inline functions leave pending in every file that reads it,
whether the file uses them or not: an empty file after it costs about 7 CPU-s. Host wrappers use
tensors, their factories and `TORCH_CHECK` (`torch/types.h`); the bindings need `torch/python.h`.
Three artifacts, each compiled once per host beside torch's headers:

- `BARE`: torch/types.h alone, precompiled (an empty file after it: ~1.7 CPU-s), for host files
  whose bindings come from `BINDINGS` (host_bindings.py: the file then holds no pybind11 at all);
- `BINDINGS`: the object with those generic bindings, linked into such extensions;
- `SLIM`: torch/types.h + torch/python.h, precompiled (~3.9 CPU-s for an empty file), for host files
  that keep their pybind11 bindings (signatures the generic ones do not convert).

Each lives beside torch's own `extension.h` (readable wherever torch's headers are), its compiled
form beside it as `<name>.gch` or `<name>.o`, and a stamp file records the text and the command
they were built from: `ready()` gives an artifact only when the stamp matches what this process
would build, so a changed compiler, flag or torch makes it stale rather than wrong. A compile error
is recorded the same way (`<name>.failed`), so the artifact is not tried again until that changes.
A precompiled header g++ finds invalid is skipped by g++ and the header read as text: slower,
never wrong.

`host_sources` rewrites a split build's host sources to read a header first and drops their own
`#include <torch/extension.h>`; a file that includes a torch header the chosen one does not stand in
for (`torch/all.h`, `torch/torch.h`, `torch/nn/...`) keeps torch's header, since reading those as
text would cost more than the smaller header saves.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
from kernelwright.cuda.host_bindings import GENERIC
from kernelwright.verifier.build_failure import first_error

NAME = "kw_slim_extension.h"
TEXT = "#pragma once\n#include <torch/types.h>\n#include <torch/python.h>\n"
SLIM_ENOUGH = frozenset({"extension.h", "types.h", "python.h"})  # torch headers this one stands in for
BARE_ENOUGH = frozenset({"extension.h", "types.h"})  # those the bare header stands in for
_TORCH_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/([^>"]+)[>"]', re.M)
_EXTENSION_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"][ \t]*$', re.M)
_STD = re.compile(r"-std=(?:c|gnu)\+\+\d+[a-z]?")


def _torch_include_torch() -> Path | None:
    """torch's `include/torch` folder (where `extension.h` lives); None without torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "include" / "torch"


@dataclasses.dataclass(frozen=True)
class HostArtifact:
    """A file kernelwright compiles once beside torch's headers for split builds' host files: a
    precompiled header (`suffix` ".gch") or an object (".o"); the compiled form is `<path><suffix>`."""

    name: str  # the source's file name beside torch/extension.h
    text: str  # the source's text
    suffix: str  # ".gch": a precompiled header; ".o": an object
    folder: Path | None = None  # where it lives (None: torch's include/torch)

    def path(self) -> Path | None:
        folder = self.folder or _torch_include_torch()
        return None if folder is None else folder / self.name

    def command(self, out: str | None = None) -> list[str]:
        """The g++ command that compiles the source (into `out`, else its place), with the compiler
        (`CXX`, else `c++`, as torch's `get_cxx_compiler` on Linux) and flags torch precompiles
        `extension.h` with. Reads no torch module, so a parent can tell whether the artifact is
        ready without importing torch."""
        src = self.path()
        assert src is not None
        include = src.parent.parent
        kind = ["-x", "c++-header"] if self.suffix == ".gch" else ["-x", "c++", "-c", "-O2"]
        return [os.environ.get("CXX", "c++"), *kind, str(src), "-o", out or f"{src}{self.suffix}",
                "-I", str(include), "-I", sysconfig.get_path("include"),
                "-I", str(include / "torch" / "csrc" / "api" / "include"),
                "-DTORCH_API_INCLUDE_EXTENSION_H", _std_flag(src.parent), "-fPIC"]

    def _stamp(self) -> str:
        return hashlib.sha256(json.dumps([self.text, self.command()]).encode()).hexdigest()

    def ready(self) -> str | None:
        """The source's path when its compiled form matches what this process would build; else None."""
        src = self.path()
        if src is None or not Path(f"{src}{self.suffix}").is_file():
            return None
        return str(src) if self._stamped_text(f"{src}.stamp") is not None else None

    def failed(self) -> bool:
        """Whether g++ already rejected this very text and command on this host: a compile error is
        as certain the next time, so no header thread pays for it again (a timeout is not kept)."""
        return self.failure() is not None

    def failure(self) -> str | None:
        """g++'s first error lines when it rejected this very text and command on this host, else None."""
        src = self.path()
        return None if src is None else self._stamped_text(f"{src}.failed")

    def _stamped_text(self, record: str) -> str | None:
        """What the file `record` holds after its first line when that line is the stamp of what this
        process would build (read once); None when it is another stamp or unreadable."""
        try:
            stamp, _, rest = Path(record).read_text(encoding="utf-8", errors="replace").partition("\n")
        except OSError:
            return None
        return rest.strip() if stamp.strip() == self._stamp() else None

    def build(self, timeout_s: float) -> bool:
        """Write and compile the source (or find it up to date); False if that failed. The compiled
        form is written under a temporary name and moved into place, then the stamp written: a
        reader sees the old one, or the new one whole."""
        src = self.path()
        if src is None:
            return False
        if self.ready() is not None:
            return True
        if self.failed():
            return False
        tmp = Path(f"{src}{self.suffix}.{os.getpid()}.tmp")
        try:
            if not src.is_file() or src.read_text(encoding="utf-8") != self.text:
                atomic.write_text(src, self.text)
                os.chmod(src, 0o644)  # the candidate's compiler runs as another user (verifier/sandbox.py)
            done = subprocess.run(self.command(str(tmp)), capture_output=True, timeout=timeout_s, check=False)
            if done.returncode != 0:  # the stamp, then what g++ said first (for whoever asks why)
                why = first_error(done.stderr.decode("utf-8", errors="replace").splitlines(), "host_compiler")[0]
                atomic.write_text(Path(f"{src}.failed"), f"{self._stamp()}\n{why}\n")
                return False
            os.chmod(tmp, 0o644)
            os.replace(tmp, f"{src}{self.suffix}")
            atomic.write_text(Path(f"{src}.stamp"), self._stamp() + "\n")  # last: until it is there, not ready
            os.chmod(f"{src}.stamp", 0o644)
            return True
        except (OSError, subprocess.TimeoutExpired):
            return False
        finally:
            tmp.unlink(missing_ok=True)


SLIM = HostArtifact(NAME, TEXT, ".gch")  # torch/types.h + torch/python.h: for host files with their bindings
BARE = HostArtifact("kw_host_types.h", "#pragma once\n#include <torch/types.h>\n", ".gch")  # bindings elsewhere
BINDINGS = HostArtifact("kw_host_bindings.cpp", GENERIC, ".o")  # those bindings (host_bindings.py)
ALL = (BARE, BINDINGS, SLIM)  # in the order the header thread builds them: the commonest use first


def _std_flag(include_torch: Path) -> str:
    """The C++ standard torch builds its own precompiled header with, so that g++ accepts ours for
    the same `load_inline` compile: from torch's signature file of that header, else from the
    function of torch/utils/cpp_extension.py that builds it (read as text: a stock
    `load_inline(use_pch=False)` deletes the signature), else c++17."""
    with contextlib.suppress(OSError):
        if found := _STD.search((include_torch / "extension.h.sign").read_text(encoding="utf-8")):
            return found.group(0)
    with contextlib.suppress(OSError, ValueError):
        source = (include_torch.parent.parent / "utils" / "cpp_extension.py").read_text(encoding="utf-8")
        body = source[source.index("def _check_and_build_extension_h_precompiler_headers"):]
        body = body[:body.index("\ndef ", 1)]
        if found := _STD.search(body):
            return found.group(0)
    return "-std=c++17"


def failures() -> dict[str, str]:
    """Each host artifact g++ rejected on this host, with its first error lines."""
    return {a.name: why for a in ALL if (why := a.failure()) is not None}


def ready() -> str | None:
    """The slim header's path when it is built and current; else None."""
    return SLIM.ready()


def bare_ready() -> tuple[str, str] | None:
    """(the bare header, the bindings object) when both are built and current; else None."""
    header, bindings = BARE.ready(), BINDINGS.ready()
    return (header, bindings + BINDINGS.suffix) if header and bindings else None


def host_sources(cpp: list[str], header: str, enough: frozenset[str] = SLIM_ENOUGH) -> list[str] | None:
    """`cpp` (a split build's host sources) reading `header` first instead of `torch/extension.h`,
    or None when they include a torch header it does not stand in for (`enough`: those it does)."""
    if set(_TORCH_INCLUDE.findall("\n".join(cpp))) - enough:
        return None
    return [f'#include "{header}"', *(_EXTENSION_INCLUDE.sub("", source) for source in cpp)]


def build_in_subprocess(timeout_s: float) -> bool:
    """`build_all` in a fresh Python (the parent that calls it need not import torch); nothing is
    started when every artifact is up to date or known to fail here; True when all are ready."""
    ready = [a.ready() is not None for a in ALL]
    if all(done or a.failed() for done, a in zip(ready, ALL, strict=True)):
        return all(ready)
    try:
        done = subprocess.run([sys.executable, "-m", "kernelwright.cuda.slim_header", str(timeout_s)],
                              capture_output=True, timeout=timeout_s + 30, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def build_all(timeout_s: float) -> bool:
    """Build every artifact (each one tried whatever the others did); True when all are ready."""
    return all([a.build(timeout_s) for a in ALL])


if __name__ == "__main__":
    sys.exit(0 if build_all(float(sys.argv[1]) if len(sys.argv) > 1 else 600.0) else 1)
