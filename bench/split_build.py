"""Split build vs the as-written slim build of the seed solutions' CUDA sources, on CPU (nvcc + g++).

For every seed solution the `load_inline` arguments are recorded by running the module with a fake
`load_inline`; `split_arguments` says whether it is splittable (and why not). For the first
`--compile N` splittable ones both builds are compiled for real, objects only (no GPU, no link):
(1) nvcc of the .cu as the worker builds it today (`torch/types.h` for `torch/extension.h`, plus
load_inline's implicit headers); (2) nvcc of the device TU + g++ of main.cpp with the host code
appended (the precompiled `torch/extension.h` is used when present and valid, as in the worker).
Commands come from torch's own ninja file (`_write_ninja_file_and_compile_objects` flags), so the
flags match a real load_inline build.

    .venv/bin/python bench/split_build.py --compile 12 --stride 6 --out docs/results/split_build_cpu.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("CUDA_HOME", "/usr/local/cuda-13.0")
os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")

import torch.utils.cpp_extension as ext  # noqa: E402

from kernelwright.cuda.split_build import capture_load_inline, split_arguments  # noqa: E402

ext.CUDA_HOME = os.environ["CUDA_HOME"]


def compile_cmds(build: Path, name: str, cpp: list[str], cuda: list[str], kw: dict[str, Any],
                 implicit: bool) -> dict[str, list[str]]:
    """The ninja build commands torch would run for these sources, objects only."""
    build.mkdir(parents=True, exist_ok=True)
    cpp = list(cpp)
    cuda = list(cuda)
    if implicit:
        cpp.insert(0, "#include <torch/extension.h>")
        cuda[:0] = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
    if kw.get("functions") is not None:  # as load_inline: no bindings written without functions
        funcs = kw["functions"]
        funcs = [funcs] if isinstance(funcs, str) else list(funcs)
        cpp += ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"]
        cpp += [f'm.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in funcs] + ["}"]
    (build / "main.cpp").write_text("\n".join(cpp))
    (build / "cuda.cu").write_text("\n".join(cuda))
    ext._write_ninja_file_to_build_library(  # noqa: SLF001 - torch's own flags
        path=str(build / "build.ninja"), name=name, sources=[str(build / "main.cpp"), str(build / "cuda.cu")],
        extra_cflags=kw.get("extra_cflags") or [], extra_cuda_cflags=kw.get("extra_cuda_cflags") or [],
        extra_sycl_cflags=[], extra_ldflags=[], extra_include_paths=kw.get("extra_include_paths") or [],
        with_cuda=True, with_sycl=False, is_standalone=False)
    out = subprocess.run(["ninja", "-C", str(build), "-t", "commands", "main.o", "cuda.cuda.o"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    cmds: dict[str, list[str]] = {}
    for line in out:
        key = "cu" if "nvcc" in line else "cpp"
        cmds[key] = ["bash", "-c", f"cd {build} && {line}"]
    return cmds


def timed(cmd: list[str]) -> tuple[float, bool, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc.returncode == 0, (proc.stderr or proc.stdout)[-800:]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", type=int, default=12, help="splittable seeds compiled for real (0: parse only)")
    ap.add_argument("--out", default="docs/results/split_build_cpu.json")
    ap.add_argument("--stride", type=int, default=6, help="compile every STRIDE-th splittable seed (spread over tasks)")
    args = ap.parse_args()
    solutions = sorted((ROOT / "kernelwright/seed/tasks").glob("*/solution.py"))
    reasons: collections.Counter[str] = collections.Counter()
    rows: list[dict[str, Any]] = []
    splittable = []
    for path in solutions:
        got = capture_load_inline(path)
        res = split_arguments(got["cpp"], got["cuda"], got["kw"]) if got else "no load_inline call"
        task = path.parent.name
        if isinstance(res, str):
            reasons[res] += 1
            rows.append({"task": task, "splittable": False, "reason": res})
        else:
            splittable.append((task, got, res))
            rows.append({"task": task, "splittable": True})
    print(f"splittable: {len(splittable)}/{len(solutions)}")
    for r, n in reasons.most_common():
        print(f"  not splittable ({n}): {r}")
    # the worker's PCH: built once up front so neither side pays for it in the timings
    ext._check_and_build_extension_h_precompiler_headers([], [])  # noqa: SLF001
    timings: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for task, got, (cpp, cuda) in splittable[:: args.stride][: args.compile]:
            kw = got["kw"]
            slim = got["cuda"] if isinstance(got["cuda"], str) else "\n".join(got["cuda"])
            slim = slim.replace("#include <torch/extension.h>", "#include <torch/types.h>")
            cpp0 = [got["cpp"]] if isinstance(got["cpp"], str) else list(got["cpp"])
            a = compile_cmds(Path(tmp, task, "orig"), got["name"], cpp0, [slim], kw, implicit=True)
            b = compile_cmds(Path(tmp, task, "split"), got["name"], cpp, cuda, kw, implicit=False)
            t_orig, ok_orig, err_orig = timed(a["cu"])
            t_orig_cpp, _, _ = timed(a["cpp"])
            t_dev, ok_dev, err_dev = timed(b["cu"])
            t_host, ok_host, err_host = timed(b["cpp"])
            row = {"task": task, "orig_cu_s": round(t_orig, 2), "orig_cpp_s": round(t_orig_cpp, 2),
                   "device_cu_s": round(t_dev, 2), "host_cpp_s": round(t_host, 2),
                   "ok": ok_orig and ok_dev and ok_host,
                   "ratio": round((t_dev + t_host) / max(t_orig + t_orig_cpp, 1e-9), 3)}
            if not row["ok"]:
                row["errors"] = [e for ok, e in ((ok_orig, err_orig), (ok_dev, err_dev), (ok_host, err_host))
                                 if not ok]
            timings.append(row)
            print(f"{task:45s} as written: .cu {t_orig:5.1f}s + .cpp {t_orig_cpp:4.1f}s | split: device .cu "
                  f"{t_dev:4.1f}s + host .cpp {t_host:4.1f}s | ok={row['ok']}", flush=True)
    summary: dict[str, Any] = {"splittable": len(splittable), "total": len(solutions), "reasons": dict(reasons)}
    ok = [r for r in timings if r["ok"]]
    if ok:
        before = [r["orig_cu_s"] + r["orig_cpp_s"] for r in ok]
        after = [r["device_cu_s"] + r["host_cpp_s"] for r in ok]
        ratios = [r["ratio"] for r in ok]
        summary |= {"compiled": len(timings), "compiled_ok": len(ok),
                    "median_as_written_s": statistics.median(before), "median_split_s": statistics.median(after),
                    "median_orig_cu_s": statistics.median(r["orig_cu_s"] for r in ok),
                    "median_device_cu_s": statistics.median(r["device_cu_s"] for r in ok),
                    "median_host_cpp_s": statistics.median(r["host_cpp_s"] for r in ok),
                    "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}
        print(f"as written (.cu + .cpp, serial): median {summary['median_as_written_s']:.1f}s; split (device .cu + "
              f"host .cpp): median {summary['median_split_s']:.1f}s; ratio median {summary['ratio_median']:.2f} "
              f"[{summary['ratio_min']:.2f}, {summary['ratio_max']:.2f}]")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"summary": summary, "rows": rows, "timings": timings}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
