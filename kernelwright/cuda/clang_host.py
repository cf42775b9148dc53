"""The host check through libclang (PyPI `libclang`), with torch's templates instantiated once.

    python -P -m kernelwright.cuda.clang_host pch OUT.pch -- FLAGS...       # build the header
    python -P -m kernelwright.cuda.clang_host check PCH FILE... -- FLAGS...  # check FILEs against it

g++ cannot keep instantiated templates in a precompiled header: every check after its
torch/extension.h PCH instantiates again what torch's inline functions leave pending, about 93 %
of an ~8 s check. clang can (`-fpch-instantiate-templates`): the header does that work once when
it is built, with the bodies of torch's functions skipped (the candidate's own code is checked in
full), and a check of a seed solution's host unit then takes about half a second. libclang ships no
builtin headers (stddef.h, ...), so the checks search g++'s include folders, libstdc++ included,
like the g++ check; without g++ there is no host check either way.

Both commands run in their own process under the compile limits (`compile_workers.run_limited`):
the candidate's code is only parsed, never run, and a crash of libclang ends that process alone.
`check` prints one `file:line:col: severity: message` line per diagnostic (the names `#line`
gives), notes below the error they explain, with gcc's excerpt lines for the candidate's own
sources only, and exits 1 when any is an error.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernelwright.cuda import host_compile as hc
from kernelwright.cuda.compile_workers import Limits, run_limited

log = logging.getLogger(__name__)
FRONTEND = "libclang"  # the compiler name the host stage uses for this checker
INSTANTIATE = "-fpch-instantiate-templates"
PCH_OPTIONS = "incomplete,skip-function-bodies," + INSTANTIATE  # how the header is built (part of its key)
CHECK_FLAGS = ["-fsyntax-only", "-ferror-limit=20", "-Wno-attributes", "-Wno-unknown-warning-option"]


@lru_cache(maxsize=1)
def version() -> str | None:
    """The installed libclang's version, None when it is not installed."""
    if importlib.util.find_spec("clang") is None:
        return None
    try:
        return importlib.metadata.version("libclang")
    except importlib.metadata.PackageNotFoundError:
        return None


def frontend_id() -> str:
    return f"{FRONTEND} {version()}"


def clang_flags(cxx: str, flags: list[str]) -> list[str]:
    """The host flags, then g++'s include folders (libclang has no builtin headers of its own)."""
    return [*flags, *(a for folder in hc.system_include_dirs(cxx) for a in ("-isystem", folder))]


def _worker(*args: str) -> list[str]:
    return [sys.executable, "-P", "-m", "kernelwright.cuda.clang_host", *args]


def ensure_pch(pch_root: Path, flags: list[str]) -> Path | None:
    """The precompiled torch/extension.h for `flags`, built first if needed; None when it cannot be."""
    key = json.dumps([frontend_id(), flags, hc.torch_version(), PCH_OPTIONS])
    folder = pch_root / f"clang-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    return folder / "kw_torch.pch" if hc.header_ready(folder, "kw_torch.pch", lambda f: _build(f, flags)) else None


def _build(folder: Path, flags: list[str]) -> bool:
    built, done = hc.build_header(folder, "kw_torch.pch", lambda tmp: _worker("pch", str(tmp), "--", *flags),
                                  frontend_id())
    if not built:
        log.warning("libclang could not build the precompiled torch header (exit %s, %s): %s", done.returncode,
                    done.limit or "no limit hit", done.output.strip()[:2000])
    return built


def run_check(flags: list[str], pch: Path | None, files: list[str], cwd: str,
              limits: Limits) -> tuple[int | None, str, float, str | None]:
    """(returncode, output, seconds, limit hit) of the check of `files`, as `host_compile.run_check`."""
    done = run_limited(_worker("check", str(pch or ""), *files, "--", *flags), limits, cwd=cwd, env=hc.ENV)
    return done.returncode, done.output, done.seconds, done.limit


# ------------------------------------------------------------------ the worker process


def _index() -> Any:
    import clang.cindex as cindex  # type: ignore[import-untyped]

    return cindex


def _presumed(loc: Any, cindex: Any) -> tuple[str, int, int]:
    """(file, line, column) as `#line` directives present them (the candidate's source names)."""
    fn = cindex.conf.lib.clang_getPresumedLocation
    fn.argtypes = [cindex.SourceLocation, ctypes.POINTER(cindex._CXString), ctypes.POINTER(ctypes.c_uint),
                   ctypes.POINTER(ctypes.c_uint)]
    fn.restype = None
    name, line, col = cindex._CXString(), ctypes.c_uint(), ctypes.c_uint()
    fn(loc, ctypes.byref(name), ctypes.byref(line), ctypes.byref(col))
    return cindex._CXString.from_result(name) or "", line.value, col.value


def _excerpt(file: str, line: int, col: int, own: dict[str, list[str]]) -> list[str]:
    """gcc's two excerpt lines (`  12 | text`, the caret), for a line of the candidate's own sources only."""
    text = own.get(file)
    if text is None or not 0 < line <= len(text):
        return []
    src = text[line - 1].rstrip("\n")
    return [f"{line:5d} | {src}", f"      | {' ' * max(col - 1, 0)}^"]


def _diagnostic_lines(diag: Any, cindex: Any, own: dict[str, list[str]]) -> list[str]:
    names = {cindex.Diagnostic.Note: "note", cindex.Diagnostic.Warning: "warning",
             cindex.Diagnostic.Error: "error", cindex.Diagnostic.Fatal: "fatal error"}
    file, line, col = _presumed(diag.location, cindex)
    where = f"{file}:{line}:{col}: " if file else ""
    lines = [f"{where}{names.get(diag.severity, 'note')}: {diag.spelling}", *_excerpt(file, line, col, own)]
    return lines + [out for child in diag.children for out in _diagnostic_lines(child, cindex, own)]


def _own_sources() -> dict[str, list[str]]:
    """The candidate's sources the host stage wrote beside the units (plain names in this folder)."""
    return {p.name: p.read_text(encoding="utf-8", errors="replace").splitlines()
            for p in Path.cwd().iterdir() if p.is_file() and not p.name.endswith((".cpp", ".pch", ".h"))}


def build_pch(out: str, flags: list[str]) -> int:
    """Precompile `kw_torch.h` beside `out` (`host_compile.build_header` writes it) into `out`."""
    cindex = _index()
    header = Path(out).parent / "kw_torch.h"
    tu = cindex.Index.create().parse(str(header), args=[*flags, "-x", "c++-header", INSTANTIATE],
                                     options=cindex.TranslationUnit.PARSE_INCOMPLETE
                                     | cindex.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES)
    errors = [d for d in tu.diagnostics if d.severity >= cindex.Diagnostic.Error]
    for d in errors[:20]:
        sys.stdout.write("\n".join(_diagnostic_lines(d, cindex, {})) + "\n")
    if errors:
        return 1
    tu.save(out)
    return 0


def check(pch: str, files: list[str], flags: list[str]) -> int:
    cindex = _index()
    index = cindex.Index.create()
    include = ["-include-pch", pch] if pch else []  # without one, the units include torch/extension.h
    failed, own = False, _own_sources()
    for name in files:
        tu = index.parse(name, args=[*flags, *CHECK_FLAGS, "-x", "c++", INSTANTIATE, *include])
        for d in tu.diagnostics:
            if d.severity >= cindex.Diagnostic.Warning:
                sys.stdout.write("\n".join(_diagnostic_lines(d, cindex, own)) + "\n")
                failed = failed or d.severity >= cindex.Diagnostic.Error
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if "--" not in argv or len(argv) < 3:
        sys.stderr.write(__doc__.splitlines()[2] + "\n" + __doc__.splitlines()[3] + "\n")
        return 2
    split = argv.index("--")
    head, flags = argv[:split], argv[split + 1:]
    if head[0] == "pch" and len(head) == 2:
        return build_pch(head[1], flags)
    if head[0] == "check" and len(head) >= 3:
        return check(head[1], head[2:], flags)
    sys.stderr.write(f"unknown command {' '.join(head)!r}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
