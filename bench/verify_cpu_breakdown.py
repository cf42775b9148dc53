"""Where a verification's CPU goes on a GPU host: start-up pieces and the split build's compiler steps.

    python bench/verify_cpu_breakdown.py --jobs 16 --candidates 32 --json out.json

The throughput of `verify_many` is bound by the host's CPU (bench/verify_throughput.py records
~90% of cores busy and the GPU ~6% busy), so this measures CPU seconds, not wall time:
- start-up: each piece in a fresh Python process (getrusage, the process and its children):
  `import torch`, then CUDA's context, then `torch._dynamo`, then the profiler's first session;
- builds: the split build of N seed solutions, `--jobs` at a time as `verify_many` runs them,
  with torch's precompiled header; every compiler call goes through a wrapper (`CXX`,
  `PYTORCH_NVCC`) that records its own CPU seconds, so the JSON gives the host wrapper file
  (`main.cpp`, g++ with the header), the device file (nvcc and the compilers it runs) and the link
  per candidate, and their medians;
- nvcc variants: the device file of each candidate again with `-Xcompiler -O0` added (nvcc's `-O3`
  is the host compiler's level: the host stub's; device code is optimised by ptxas either way).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelwright.seed import load_seed_tasks

STARTUP = {
    "import_torch": "import torch",
    "cuda_context": "import torch; torch.empty(1, device='cuda'); torch.cuda.synchronize()",
    "cuda_and_dynamo": "import torch; torch.empty(1, device='cuda'); import torch._dynamo",
    "cuda_dynamo_profiler": ("import torch; torch.empty(1, device='cuda'); import torch._dynamo; "
                             "from kernelwright.verifier.profiling import _empty_profile; _empty_profile()"),
}
WRAPPER = """#!{python}
import json, os, resource, subprocess, sys
real = {real!r}
start = os.times()
code = subprocess.call([real, *sys.argv[1:]])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
kind = "link" if "-shared" in sys.argv else ("nvcc" if real.endswith("nvcc") else "cxx")
with open({log!r}, "a") as fh:
    fh.write(json.dumps({{"kind": kind, "cwd": os.getcwd(), "cpu_s": r.ru_utime + r.ru_stime}}) + "\\n")
sys.exit(code)
"""
BUILD = """
import sys
import torch.utils.cpp_extension as ext
from pathlib import Path
from typing import Any
from kernelwright.cuda.split_build import capture_load_inline, split_arguments
got = capture_load_inline(Path(sys.argv[1]))
kw = dict(got["kw"]); kw.update(build_directory=sys.argv[2], use_pch=True, no_implicit_headers=True)
cpp, cuda = split_arguments(got["cpp"], got["cuda"], got["kw"])
ext.remove_extension_h_precompiler_headers = lambda: None
ext.load_inline(got["name"], cpp, cuda, **kw)
"""


def cpu_of(code: str, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def wrapper(folder: Path, real: str, log: Path) -> str:
    path = folder / Path(real).name
    path.write_text(WRAPPER.format(python=sys.executable, real=real, log=str(log)))
    path.chmod(0o755)
    return str(path)


def build_all(tasks: list[Path], jobs: int, root: Path, env: dict[str, str]) -> dict[str, float]:
    def one(task: Path) -> tuple[str, float]:
        (root / task.name).mkdir()
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", BUILD, str(task / "solution.py"), str(root / task.name)],
                              env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(f"{task.name}: {done.stderr[-600:]}\n")
        return task.name, time.perf_counter() - start

    with ThreadPoolExecutor(jobs) as pool:
        return dict(pool.map(one, tasks))


def nvcc_variant(calls: list[dict[str, Any]], flags: list[str], jobs: int, nvcc: str) -> list[float]:
    """The device file of each built candidate compiled again with `flags` added, through a wrapper
    like the build's (its own CPU seconds, in a log of its own); CPU seconds each."""
    with tempfile.TemporaryDirectory(prefix="kw_variant_") as tmp:
        log = Path(tmp) / "variant.jsonl"
        wrapped = wrapper(Path(tmp), nvcc, log)

        def one(folder: Path) -> None:
            ninja = (folder / "build.ninja").read_text()
            cuda_flags = next(ln.split("=", 1)[1] for ln in ninja.splitlines() if ln.startswith("cuda_cflags ="))
            post = next(ln.split("=", 1)[1] for ln in ninja.splitlines() if ln.startswith("cuda_post_cflags ="))
            cmd = f"{wrapped} {cuda_flags} -c {folder / 'cuda.cu'} -o {folder / 'variant.o'} {post} {' '.join(flags)}"
            subprocess.run(cmd, shell=True, check=False, capture_output=True, cwd=folder)  # noqa: S602 - our own line

        folders = sorted({Path(c["cwd"]) for c in calls if c["kind"] == "nvcc"})
        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, folders))
        return [json.loads(x)["cpu_s"] for x in log.read_text().splitlines()] if log.exists() else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--candidates", type=int, default=32)
    ap.add_argument("--json", type=Path, default=Path("docs/results/verify_cpu_breakdown.json"))
    args = ap.parse_args()
    import torch
    import torch.utils.cpp_extension as ext

    from kernelwright.cuda.pch import BUILD as HEADER

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")]))
    major, minor = torch.cuda.get_device_capability()
    env["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
    startup = {name: [cpu_of(code, env) for _ in range(3)] for name, code in STARTUP.items()}
    tasks = [t.path for t in load_seed_tasks()][: args.candidates]
    with tempfile.TemporaryDirectory(prefix="kw_cpu_") as tmp:
        root, log = Path(tmp), Path(tmp) / "compilers.jsonl"
        nvcc = os.path.join(str(ext.CUDA_HOME), "bin", "nvcc")
        benv = dict(env, CXX=wrapper(root, "/usr/bin/c++", log), PYTORCH_NVCC=wrapper(root, nvcc, log))
        header_start = time.perf_counter()  # torch signs the header with the compiler's name: the wrapper's
        header_ok = subprocess.run([sys.executable, "-c", HEADER], env=benv, capture_output=True).returncode == 0
        header_s = time.perf_counter() - header_start
        log.unlink(missing_ok=True)
        start = time.perf_counter()
        walls = build_all(tasks, args.jobs, root, benv)
        build_wall = time.perf_counter() - start
        calls = [c for x in log.read_text().splitlines() if (c := json.loads(x))["cwd"].startswith(tmp)]
        variant = nvcc_variant(calls, ["-Xcompiler", "-O0"], args.jobs, nvcc)
    by_kind = {k: [c["cpu_s"] for c in calls if c["kind"] == k] for k in ("cxx", "nvcc", "link")}
    out = {
        "gpu": torch.cuda.get_device_name(), "cores": os.cpu_count(), "jobs": args.jobs,
        "startup_cpu_s": {k: statistics.median(v) for k, v in startup.items()},
        "header_built": header_ok, "header_s": header_s,
        "builds": len(walls), "build_wall_s": build_wall, "median_build_wall_s": statistics.median(walls.values()),
        "median_cpu_s": {k: statistics.median(v) if v else None for k, v in by_kind.items()},
        "sum_cpu_s": {k: sum(v) for k, v in by_kind.items()},
        "nvcc_host_O0_median_cpu_s": statistics.median(variant) if variant else None,
        "calls": calls,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1))
    sys.stdout.write(json.dumps({k: v for k, v in out.items() if k != "calls"}, indent=1) + "\n")


if __name__ == "__main__":
    main()
