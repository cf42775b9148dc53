"""Build failures named as such: which stage of the build failed, and the compiler's first error.

A candidate's extension is built by `torch.utils.cpp_extension` (ninja running nvcc on the CUDA
sources, the host C++ compiler on the C++ sources and bindings, then the link) when its module
loads, or lazily, in its constructor or its first forward. The failure is recognised by its
structure, never by its message:

- a `subprocess.CalledProcessError` of a build tool (ninja, nvcc, a C/C++ compiler or linker) in
  the exception's cause/context chain: cpp_extension raises `RuntimeError("Error building
  extension ...") from` ninja's error, and a candidate that re-raises keeps it in the chain. For
  ninja, the failed step is the `FAILED:` block of its log and the stage is that step's command:
  nvcc (`-dlink`: the device link), a compiler with `-c` (the host compiler), else the link;
- an `ImportError` raised inside cpp_extension: the library was built but did not load
  (`undefined symbol`, no module init function): stage `load`;
- cupy's `CompileException` (NVRTC) and pycuda's `CompileError` (nvcc), when those are loaded;
- any other exception raised by cpp_extension's own code (bad arguments, no ninja): `setup`.

The first error is the failed step's first diagnostic line, read in the compilers' own formats
(`file:line:col: error:` of g++/clang, `file(line): error:` of nvcc's front end and NVRTC,
`ptxas error`, `nvcc fatal`, the linker's lines before `collect2`), with the source excerpt lines
that follow it; build folders are cut from paths. Not the tail of the log, which is the command
line and `ninja: build stopped`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

STAGES = {
    "nvcc": "nvcc (the CUDA sources)",
    "device_link": "nvcc's device link",
    "host_compiler": "the host C++ compiler (the C++ sources and bindings)",
    "link": "the link",
    "load": "loading the built library",
    "nvrtc": "NVRTC",
    "setup": "the build's setup",
}
COMPILERS = ("nvcc", "c++", "g++", "gcc", "cc", "clang", "clang++", "hipcc")
LINKERS = ("ld", "ld.gold", "ld.lld", "ld.bfd", "collect2")
MAX_LINES = 4  # the first error line and the excerpt lines that follow it
MAX_CHARS = 800

_NINJA_STEP = re.compile(r"^\[\d+/\d+\] ")
_NINJA_FAILED = re.compile(r"^FAILED: (?:\[code=\d+\] )?(?P<target>.*?)\s*$")
_NINJA_END = re.compile(r"^ninja: ")
_ERROR_LINE = re.compile(
    r"^(?:[^\s:][^:]*:\d+(?::\d+)?: (?:fatal )?error: "  # g++ / clang
    r"|[^\s(][^(]*\(\d+\): (?:catastrophic )?error(?: #[\w-]+)?: "  # nvcc's front end (EDG), NVRTC
    r"|ptxas (?:fatal|error)\s*: |nvcc (?:fatal|error)\s*: |nvlink (?:fatal|error)\s*: "
    r"|(?:\S*/)?(?:ld(?:\.\w+)?|collect2): )")
_COLLECT2 = re.compile(r"^collect2: ")
_CONTINUATION = re.compile(r"^\s+\S")  # source excerpt and caret lines under a diagnostic
_DIRS = re.compile(r"(?<![\w.])/(?:[^\s/:()'\"`]+/)+(?=[^\s/:()'\"`]+)")


@dataclass(frozen=True)
class BuildFailure:
    stage: str  # a key of STAGES
    target: str  # the failed step's output (cuda.cuda.o, main.o, the .so) or the failing program
    first_error: str  # the compiler's first error line(s), build folders cut from paths
    errors: int  # error lines in the failed step's output (at least 1)

    def detail(self) -> str:
        more = f" [{self.errors - 1} more error line(s)]" if self.errors > 1 else ""
        target = f" ({self.target})" if self.target else ""
        return f"build failed in {self.stage}{target}: {self.first_error}{more}"[:MAX_CHARS + 200]


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]


def _argv(cmd: object) -> list[str]:
    if isinstance(cmd, str | bytes):
        text = cmd.decode(errors="replace") if isinstance(cmd, bytes) else cmd
        try:
            return shlex.split(text)
        except ValueError:
            return text.split()
    if isinstance(cmd, list | tuple):
        return [os.fsdecode(a) if isinstance(a, bytes | os.PathLike) else str(a) for a in cmd]
    return []


def _program(argv: list[str]) -> str:
    return os.path.basename(argv[0]) if argv else ""


def _is_tool(program: str, names: tuple[str, ...]) -> bool:
    """`program` is one of `names`, or a versioned one (g++-12, clang++-18, x86_64-linux-gnu-g++)."""
    return any(re.fullmatch(rf"(?:[\w.]+-)*{re.escape(n)}(?:-[\d.]+)?", program) is not None for n in names)


def _stage_of(argv: list[str]) -> str:
    program = _program(argv)
    if _is_tool(program, ("nvcc",)):
        return "device_link" if "-dlink" in argv or "--device-link" in argv else "nvcc"
    if _is_tool(program, LINKERS):
        return "link"
    return "host_compiler" if "-c" in argv or "-fsyntax-only" in argv else "link"


def _text(output: object) -> str:
    if isinstance(output, bytes):
        return output.decode("utf-8", errors="replace")
    return output if isinstance(output, str) else ""


def _short(line: str) -> str:
    return _DIRS.sub("", line.rstrip())


def first_error(lines: list[str], stage: str) -> tuple[str, int]:
    """(the first error with its excerpt lines, how many error lines) of one step's output."""
    errors = [i for i, ln in enumerate(lines) if _ERROR_LINE.match(ln)]
    if stage == "link":  # the linker's lines, up to collect2's, which only says that it failed
        body = [ln for ln in lines if ln.strip() and not _COLLECT2.match(ln)]
        if body:
            return "\n".join(_short(ln) for ln in body[:MAX_LINES])[:MAX_CHARS], max(1, len(errors))
    if not errors:
        body = [ln for ln in lines if ln.strip()]
        return (_short(body[0]) if body else "the build step failed with no output"), 1
    start = errors[0]
    kept = [lines[start]]
    for ln in lines[start + 1:]:
        if len(kept) >= MAX_LINES or not _CONTINUATION.match(ln) or _ERROR_LINE.match(ln):
            break
        kept.append(ln)
    return "\n".join(_short(ln) for ln in kept)[:MAX_CHARS], len(errors)


def _ninja_failure(log: str) -> BuildFailure | None:
    """The first `FAILED:` step of a ninja log: its command's stage and its output's first error."""
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = _NINJA_FAILED.match(line)
        if m is None:
            continue
        command = lines[i + 1] if i + 1 < len(lines) else ""
        out: list[str] = []
        for ln in lines[i + 2:]:
            if _NINJA_STEP.match(ln) or _NINJA_FAILED.match(ln) or _NINJA_END.match(ln):
                break
            out.append(ln)
        stage = _stage_of(_argv(command))
        text, count = first_error(out, stage)
        return BuildFailure(stage, m.group("target").strip(), text, count)
    return None


def _from_process(err: subprocess.CalledProcessError) -> BuildFailure | None:
    argv = _argv(err.cmd)
    output = _text(err.output) + ("\n" + _text(err.stderr) if err.stderr else "")
    if _program(argv) == "ninja":
        return _ninja_failure(output) or BuildFailure("setup", "ninja", first_error(output.splitlines(), "")[0], 1)
    stage = _stage_of(argv)
    text, count = first_error(output.splitlines(), stage)
    return BuildFailure(stage, _program(argv), text, count)


def _through(exc: BaseException, module_file: str | None) -> bool:
    """`exc` was raised inside a call of `module_file`'s code (a frame of it is in its traceback)."""
    if not module_file:
        return False
    target = os.path.realpath(module_file)
    return any(os.path.realpath(f.filename) == target for f in traceback.extract_tb(exc.__traceback__))


def _compile_error_class(module: str, name: str) -> type | None:
    cls = getattr(sys.modules.get(module), name, None)
    return cls if isinstance(cls, type) else None


def build_failure(exc: BaseException) -> BuildFailure | None:
    """The build failure `exc` is (or carries in its chain), or None when it is none (module docstring)."""
    ext = sys.modules.get("torch.utils.cpp_extension")
    ext_file = getattr(ext, "__file__", None)
    chain = list(_chain(exc))
    for e in chain:
        if isinstance(e, subprocess.CalledProcessError):
            program = _program(_argv(e.cmd))
            if program == "ninja" or _is_tool(program, COMPILERS + LINKERS):
                found = _from_process(e)
                if found is not None:
                    return found
    for e in chain:
        for module, name, stage in (("cupy.cuda.compiler", "CompileException", "nvrtc"),
                                    ("pycuda.driver", "CompileError", "nvcc")):
            cls = _compile_error_class(module, name)
            if cls is not None and isinstance(e, cls):
                text, count = first_error(str(e).splitlines(), stage)
                return BuildFailure(stage, name, text, count)
    for e in chain:
        if _through(e, ext_file):
            if isinstance(e, ImportError):
                return BuildFailure("load", os.path.basename(e.path or ""), _short(f"{type(e).__name__}: {e}"), 1)
            return BuildFailure("setup", "", _short(f"{type(e).__name__}: {str(e)[:MAX_CHARS]}"), 1)
    return None
