"""How often NVRTC rejects device code that nvcc accepts: the seed solutions, the verify fixtures, a
corpus of generated candidates and mutants of the seeds, on this machine's CPU (NVRTC and nvcc).

    .venv/bin/python bench/nvrtc_vs_nvcc_agreement.py [--corpus RECORDS.jsonl] [--candidates DIR]
        [--mutant-seeds 3] [--cache DIR] --json docs/results/nvrtc_vs_nvcc_agreement_cpu.json

Two NVRTC paths are measured, each candidate through both:
- `check`: the compile check's device stage (one program per CUDA source, its device view, the
  torch prelude; `verifier.nvrtc_gate`, which also says whether a rejection is trusted and why not);
- `plain`: `cuda.nvrtc.compile_device_code` of all CUDA literals joined (what evaluation's `nvrtc_ok`
  and curation's NVRTC filter use).
Where either path rejects (or everywhere, with `--nvcc-all`), nvcc compiles each `load_inline`
call's CUDA source as the build writes it (load_inline's implicit headers, torch's own nvcc
flags from its ninja file, the call's literal `extra_cuda_cflags`, arch 9.0) with `-cuda`: every
device pass and the host code's front end, but not the final g++ of the host side. An nvcc
rejection there is a rejection of the real build; an acceptance is counted as NVRTC's false
reject even where g++ might still fail later (an upper bound on false rejects). nvcc results are
cached by content under `--cache`.

Mutants (`--mutant-seeds N`: every len/N-th seed solution): device-code errors a model makes
(`ERRORS`: an undefined name, a member typo, a missing semicolon, the removed `__shfl_down`, a
wrong argument count, a type mismatch), and names the build sees through torch's headers or flags
but NVRTC's prelude may not (`PROBES`: `std::numeric_limits`, `at::Half`, a `-D` macro, `<limits>`,
`INFINITY`/`FLT_MAX`). `--corpus`: JSON lines with the candidate in `custom_code` (a public
corpus's format); `--candidates`: a folder of candidate files.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")

import torch  # noqa: E402
import torch.utils.cpp_extension as ext  # noqa: E402

from kernelwright.atomic import write_json  # noqa: E402
from kernelwright.cuda.candidate_sources import Build, candidate_sources  # noqa: E402
from kernelwright.cuda.compile_result import CompileCheckSettings  # noqa: E402
from kernelwright.cuda.nvrtc import compile_device_code  # noqa: E402
from kernelwright.cuda.spans import cuda_source_of  # noqa: E402
from kernelwright.verifier.nvrtc_gate import nvrtc_outcome  # noqa: E402

IMPLICIT = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
ERRORS = {
    "undefined_name": ("replace", "threadIdx.x", "threadIdxx"),
    "member_typo": ("replace", "blockIdx.x", "blockIdx.w"),
    "missing_semicolon": ("semicolon", "", ""),
    "removed_shfl_down": ("insert", "float kw_lane = __shfl_down(0.0f, 1);", ""),
    "argument_count": ("insert", "__syncthreads(1);", ""),
    "type_mismatch": ("insert", "float* kw_p = 1.5f;", ""),
}
PROBES = {
    "std_numeric_limits": ("insert", "float kw_big = std::numeric_limits<float>::max();", ""),
    "at_half": ("insert", "at::Half kw_h = at::Half(0.5f);", ""),
    "macro_flag": ("insert", "int kw_tile = KW_TILE;", "-DKW_TILE=32"),
    "limits_header": ("insert", "float kw_big = std::numeric_limits<float>::max();", "#include <limits>"),
    "infinity_macros": ("insert", "float kw_inf = -INFINITY + FLT_MAX;", ""),
}
_KERNEL = re.compile(r"__global__[^{;]*\{")


def mutate(source: str, how: tuple[str, str, str]) -> str | None:
    """The candidate with one device-code change (None when the change does not apply)."""
    kind, a, b = how
    m = _KERNEL.search(source)
    if m is None:
        return None
    if kind == "replace":
        at = source.find(a, m.end())
        return None if at < 0 else source[:at] + b + source[at + len(a):]
    if kind == "semicolon":
        end = source.find(";\n", m.end())
        return None if end < 0 else source[:end] + source[end + 1:]
    out = source[:m.end()] + f"\n    {a}" + source[m.end():]
    if b.startswith("-D"):
        if "extra_cuda_cflags=[" in out:
            return out.replace("extra_cuda_cflags=[", f'extra_cuda_cflags=["{b}", ', 1)
        return out.replace("load_inline(", f'load_inline(extra_cuda_cflags=["{b}"], ', 1)
    if b.startswith("#include"):
        return out[:m.start()] + f"{b}\n" + out[m.start():]
    return out


def literal_flags(source: str) -> list[str]:
    """The first load_inline call's extra_cuda_cflags, when a literal list ([] otherwise)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "load_inline":
            for kw in node.keywords:
                if kw.arg == "extra_cuda_cflags":
                    try:
                        flags = ast.literal_eval(kw.value)
                    except ValueError:
                        return []
                    return [flags] if isinstance(flags, str) else [str(f) for f in flags]
    return []


def nvcc_command(build_dir: Path, build: Build, flags: list[str]) -> list[str]:
    """torch's nvcc command for this call's cuda.cu, with -cuda in place of -c."""
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / "cuda.cu").write_text("\n".join(IMPLICIT + build.cuda))
    ext._write_ninja_file_to_build_library(  # noqa: SLF001 - torch's own flags
        path=str(build_dir / "build.ninja"), name="kw_agreement", sources=[str(build_dir / "cuda.cu")],
        extra_cflags=[], extra_cuda_cflags=flags, extra_sycl_cflags=[], extra_ldflags=[], extra_include_paths=[],
        with_cuda=True, with_sycl=False, is_standalone=False)
    line = subprocess.run(["ninja", "-C", str(build_dir), "-t", "commands", "cuda.cuda.o"], capture_output=True,
                          text=True, check=True).stdout.strip().splitlines()[-1]
    argv = shlex.split(line)
    out: list[str] = []
    skip = False
    for tok in argv:
        if skip:
            skip = False
            continue
        if tok == "--dependency-output":
            skip = True
            continue
        if tok == "--generate-dependencies-with-compile":
            continue
        out.append({"-c": "-cuda", "cuda.cuda.o": "cuda.cu.ii"}.get(tok, tok))
    return out


def nvcc_accepts(build: Build, flags: list[str], cache: Path) -> dict[str, Any]:
    key = hashlib.sha256(json.dumps([build.cuda, flags, os.environ["TORCH_CUDA_ARCH_LIST"]]).encode()).hexdigest()
    hit = cache / f"{key}.json"
    if hit.exists():
        return json.loads(hit.read_text())
    with tempfile.TemporaryDirectory(prefix="kw_nvcc_") as tmp:
        cmd = nvcc_command(Path(tmp), build, flags)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        log = (proc.stdout + proc.stderr).replace(tmp + "/", "")
    result = {"ok": proc.returncode == 0, "log": log[-1500:], "wall_s": round(time.perf_counter() - start, 1),
              "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1)}
    write_json(hit, result)
    return result


def candidates(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(group, name, source) of every candidate measured."""
    out: list[tuple[str, str, str]] = []
    seeds = sorted((ROOT / "kernelwright/seed/tasks").glob("*/solution.py"))
    out += [("seed", p.parent.name, p.read_text()) for p in seeds]
    fixtures = sorted((ROOT / "tests/fixtures/verify").glob("*/*.py"))
    out += [("fixture", str(p.relative_to(ROOT / "tests/fixtures/verify")), p.read_text())
            for p in fixtures if p.parent.name != "problems"]
    if args.corpus:
        for i, line in enumerate(Path(args.corpus).read_text().splitlines()):
            code = json.loads(line).get("custom_code") if line.strip() else None
            if isinstance(code, str) and "__global__" in code:
                out.append(("corpus", f"{Path(args.corpus).stem}:{i}", code))
    if args.candidates:
        out += [("generated", p.name, p.read_text()) for p in sorted(Path(args.candidates).glob("*.py"))]
    picked = seeds[:: max(1, len(seeds) // args.mutant_seeds)][: args.mutant_seeds] if args.mutant_seeds else []
    for group, table in (("mutant_error", ERRORS), ("mutant_probe", PROBES)):
        for p in picked:
            for kind, how in table.items():
                mutated = mutate(p.read_text(), how)
                if mutated is not None:
                    out.append((group, f"{p.parent.name}:{kind}", mutated))
    return out


def first_line(log: str) -> str:
    """A log's first error line (its first line when none says error), without the source excerpt."""
    lines = [ln for ln in log.splitlines() if ln.strip()]
    line = next((ln for ln in lines if "error" in ln), lines[0] if lines else "")
    return re.sub(r"(?<![\w.])/(?:[^\s/:()'\"]+/)+", "", line)[:300]  # headers named by file, not by folder


def measure(group: str, name: str, source: str, args: argparse.Namespace, settings: CompileCheckSettings,
            cache: Path) -> dict[str, Any]:
    row: dict[str, Any] = {"group": group, "name": name}
    gate = nvrtc_outcome(source, settings)
    row["check"] = None if gate is None else ("rejected" if gate.rejected else "ok")
    row["check_untrusted"] = gate.untrusted if gate is not None and gate.rejected else ""
    row["check_log"] = first_line(gate.log) if gate is not None and gate.rejected else ""
    cuda = cuda_source_of(source)
    plain = compile_device_code(cuda) if cuda.strip() else None
    row["plain"] = None if plain is None else ("ok" if plain.ok else "rejected")
    row["plain_log"] = first_line(plain.log) if plain is not None and not plain.ok else ""
    builds = candidate_sources(source).builds
    if (args.nvcc_all or "rejected" in (row["check"], row["plain"])) and builds and all(b.resolved for b in builds):
        runs = [nvcc_accepts(b, literal_flags(source), cache) for b in builds if b.cuda]
        row["nvcc"] = "ok" if all(r["ok"] for r in runs) else "rejected"
        row["nvcc_cpu_s"] = round(sum(r["cpu_s"] for r in runs), 1)
        row["nvcc_log"] = next((first_line(r["log"]) for r in runs if not r["ok"]), "")
    return row


def tally(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per group: NVRTC rejections by path, nvcc's word on them, and the gate's trusted ones."""
    out: dict[str, Any] = {}
    for group in sorted({r["group"] for r in rows}):
        rs = [r for r in rows if r["group"] == group]
        g: dict[str, Any] = {"candidates": len(rs)}
        for path in ("check", "plain"):
            rej = [r for r in rs if r[path] == "rejected"]
            g[path] = {"rejected": len(rej), "nvcc_accepted": sum(r.get("nvcc") == "ok" for r in rej),
                       "nvcc_rejected": sum(r.get("nvcc") == "rejected" for r in rej),
                       "nvcc_not_run": sum("nvcc" not in r for r in rej)}
        trusted = [r for r in rs if r["check"] == "rejected" and not r["check_untrusted"]]
        g["gate_trusted"] = {"rejected": len(trusted), "nvcc_accepted": sum(r.get("nvcc") == "ok" for r in trusted),
                             "nvcc_rejected": sum(r.get("nvcc") == "rejected" for r in trusted)}
        g["gate_untrusted_why"] = dict(Counter(re.sub(r"'.*|\(.*", "", r["check_untrusted"]).strip()
                                               for r in rs if r["check_untrusted"]))
        out[group] = g
    return out


def _named(argv: list[str]) -> list[str]:
    """The command line with input files named by their file name only (no machine's folders) and
    without the cache folder (it changes no figure)."""
    out = [Path(a).name if i and argv[i - 1] in ("--corpus", "--candidates") else a for i, a in enumerate(argv)]
    return [a for i, a in enumerate(out) if a != "--cache" and (i == 0 or out[i - 1] != "--cache")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", help="JSON lines with candidates in `custom_code`")
    ap.add_argument("--candidates", help="a folder of candidate .py files")
    ap.add_argument("--mutant-seeds", type=int, default=3, help="seed solutions mutated (0: none)")
    ap.add_argument("--nvcc-all", action="store_true", help="nvcc on every candidate, not only NVRTC's rejections")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "kw_nvrtc_vs_nvcc"),
                    help="nvcc and NVRTC result cache")
    ap.add_argument("--json", default="docs/results/nvrtc_vs_nvcc_agreement.json")
    args = ap.parse_args()
    cuda_home = os.environ.get("CUDA_HOME") or ext.CUDA_HOME or ext._find_cuda_home()  # noqa: SLF001
    if not cuda_home:
        raise SystemExit("no CUDA toolkit (nvcc) found: set CUDA_HOME")
    ext.CUDA_HOME = cuda_home
    cache = Path(args.cache)
    settings = CompileCheckSettings(cache_dir=cache / "check", host=False)
    rows = []
    for group, name, source in candidates(args):
        rows.append(measure(group, name, source, args, settings, cache / "nvcc"))
        r = rows[-1]
        print(f"{group:13s} {name[:55]:55s} check={r['check']} plain={r['plain']} nvcc={r.get('nvcc', '-')} "
              f"{r['check_untrusted'][:50]}", flush=True)
    nvcc = subprocess.run([str(Path(cuda_home) / "bin" / "nvcc"), "--version"], capture_output=True,
                          text=True, check=False).stdout.strip().splitlines()[-1:]
    summary = tally(rows)
    write_json(Path(args.json), {
        "what": "NVRTC rejections of device code vs nvcc (-cuda) on the build's own .cu, by candidate group",
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "nvcc": nvcc,
                    "torch": torch.__version__, "arch": os.environ["TORCH_CUDA_ARCH_LIST"]},
        "command": " ".join(_named(sys.argv)), "summary": summary, "rows": rows})
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
