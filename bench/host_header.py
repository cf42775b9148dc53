"""A split build's host file after torch/extension.h vs after the slim header, on CPU (g++ only).

For the seed solutions (every `--stride`-th splittable one, at most `--limit`), the host file of the
split build (`main.cpp`: the host wrappers and the pybind11 bindings, as `load_inline` writes it)
is compiled twice with torch's own ninja flags, objects only: (1) after torch's precompiled
`torch/extension.h`, as split builds were; (2) after the slim precompiled header
(kernelwright/cuda/slim_header.py) with the file's own `#include <torch/extension.h>` dropped, as
the judge's workers now do. Both headers are built first and not counted. Printed and written as
JSON: per file the CPU seconds (user + system of g++) and whether it compiled, and the ratio of
the sums, slim over extension.h (below 1: the slim header is cheaper); exit 1 when a file that
compiles after extension.h fails after the slim header (the judge would build it twice).

    .venv/bin/python bench/host_header.py --json docs/results/host_header_cpu.json [--limit 24 --stride 3]
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("CUDA_HOME", "/usr/local/cuda-13.0")
os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")

from split_build import compile_cmds  # noqa: E402

from kernelwright.cuda import slim_header  # noqa: E402
from kernelwright.cuda.pch import build_header  # noqa: E402
from kernelwright.cuda.split_build import capture_load_inline, split_arguments  # noqa: E402


def cpu_run(cmd: list[str]) -> tuple[float, bool, str]:
    """(CPU seconds of the command's processes, it succeeded, the end of its error output)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, proc.returncode == 0, (proc.stderr or proc.stdout)[-600:]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0, help="at most this many seed solutions (0: all splittable)")
    ap.add_argument("--stride", type=int, default=1, help="every STRIDE-th splittable seed solution")
    ap.add_argument("--json", type=Path, default=Path("docs/results/host_header_cpu.json"))
    args = ap.parse_args()
    if not build_header(timeout_s=900.0):
        raise SystemExit("torch's precompiled extension.h did not build")
    if not slim_header.build(timeout_s=900.0) or (header := slim_header.ready()) is None:
        raise SystemExit("the slim header did not build")
    seeds = []
    for path in sorted((ROOT / "kernelwright/seed/tasks").glob("*/solution.py")):
        got = capture_load_inline(path)
        res = split_arguments(got["cpp"], got["cuda"], got["kw"]) if got else "no load_inline call"
        if not isinstance(res, str):
            seeds.append((path.parent.name, got, res))
    seeds = seeds[::args.stride][:args.limit or None]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kw_hh_") as tmp:
        for task, got, (cpp, cuda) in seeds:
            row: dict[str, Any] = {"task": task}
            slim_cpp = slim_header.host_sources(cpp, header)
            for label, sources in (("extension_h", cpp), ("slim", slim_cpp)):
                if sources is None:
                    row[label] = None  # another torch header included: the judge keeps extension.h
                    continue
                cmd = compile_cmds(Path(tmp, task, label), got["name"], sources, cuda, got["kw"], implicit=False)
                cpu, ok, err = cpu_run(cmd["cpp"])
                row[label] = {"cpu_s": round(cpu, 2), "ok": ok} | ({} if ok else {"error": err})
            rows.append(row)
            print(f"{task:45s} extension.h {_fmt(row['extension_h'])} | slim {_fmt(row['slim'])}", flush=True)
    both = [r for r in rows if r["slim"] and r["extension_h"] and r["slim"]["ok"] and r["extension_h"]["ok"]]
    regressions = [r["task"] for r in rows if r["extension_h"] and r["extension_h"]["ok"]
                   and not (r["slim"] and r["slim"]["ok"])]
    full = [r["extension_h"]["cpu_s"] for r in both]
    slim = [r["slim"]["cpu_s"] for r in both]
    summary = {"files": len(rows), "compiled_both": len(both), "slim_fails_where_extension_h_compiles": regressions,
               "median_extension_h_cpu_s": statistics.median(full) if full else None,
               "median_slim_cpu_s": statistics.median(slim) if slim else None,
               "ratio_slim_over_extension_h": sum(slim) / sum(full) if full else None,
               "cpus": os.cpu_count()}
    print(json.dumps(summary))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    return 1 if regressions else 0


def _fmt(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "not used"
    return f"{cell['cpu_s']:5.2f} CPU-s" + ("" if cell["ok"] else " FAILED")


if __name__ == "__main__":
    raise SystemExit(main())
