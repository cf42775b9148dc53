"""A split build's host file after torch/extension.h, the slim header and the bare one, on CPU (g++ only).

For the seed solutions (every `--stride`-th splittable one, at most `--limit`), the host file of the
split build (`main.cpp`, as `load_inline` writes it) is compiled three ways with torch's own ninja
flags, objects only: (1) after torch's precompiled `torch/extension.h`, with the pybind11 bindings,
as split builds first were; (2) after the slim precompiled header (torch/types.h + torch/python.h,
kernelwright/cuda/slim_header.py) with the file's own `#include <torch/extension.h>` dropped;
(3) after the bare one (torch/types.h alone) with the generic bindings' stubs in place of pybind11
(kernelwright/cuda/host_bindings.py), as the judge's workers now do where the signatures allow.
The headers and the generic bindings object are built first and not counted (once per host); the
link, which adds that object, is not measured. Printed and written as JSON: per file the CPU
seconds (user + system of g++) and whether it compiled, and the ratios of the sums over
extension.h (below 1: cheaper); exit 1 when a file that compiles after extension.h fails after the
header the judge would pick first (it would build it twice).

    .venv/bin/python bench/host_header.py --json docs/results/host_header_cpu.json [--limit 24 --stride 2]
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
from kernelwright.cuda.split_build import bare_arguments, capture_load_inline, split_arguments  # noqa: E402


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
    ap.add_argument("--extra-cflags", nargs="*", default=None,
                    help="host flags given to every file as a candidate's `extra_cflags` (e.g. -O3; none: as written)")
    args = ap.parse_args()
    if not build_header(timeout_s=900.0):
        raise SystemExit("torch's precompiled extension.h did not build")
    if not slim_header.build_all(timeout_s=900.0) or (header := slim_header.ready()) is None:
        raise SystemExit("the slim header, the bare one or the generic bindings did not build")
    bare = slim_header.bare_ready()
    assert bare is not None
    seeds = []
    for path in sorted((ROOT / "kernelwright/seed/tasks").glob("*/solution.py")):
        got = capture_load_inline(path)
        res = split_arguments(got["cpp"], got["cuda"], got["kw"]) if got else "no load_inline call"
        if not isinstance(res, str):
            if args.extra_cflags is not None:
                got["kw"] = {**got["kw"], "extra_cflags": args.extra_cflags}
            seeds.append((path.parent.name, got, res))
    seeds = seeds[::args.stride][:args.limit or None]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kw_hh_") as tmp:
        for task, got, (cpp, cuda) in seeds:
            row: dict[str, Any] = {"task": task}
            bare_build = bare_arguments(cpp, got["kw"], bare)
            ways = {"extension_h": (cpp, got["kw"]), "slim": (slim_header.host_sources(cpp, header), got["kw"]),
                    "bare": bare_build or (None, got["kw"])}
            for label, (sources, kw) in ways.items():
                if sources is None:
                    row[label] = None  # out of this header's scope: the judge takes the next one
                    continue
                cmd = compile_cmds(Path(tmp, task, label), got["name"], sources, cuda, kw, implicit=False)
                cpu, ok, err = cpu_run(cmd["cpp"])
                row[label] = {"cpu_s": round(cpu, 2), "ok": ok} | ({} if ok else {"error": err})
            rows.append(row)
            print(f"{task:45s} extension.h {_fmt(row['extension_h'])} | slim {_fmt(row['slim'])} | "
                  f"bare {_fmt(row['bare'])}", flush=True)
    summary = _summary(rows) | {"extra_cflags": args.extra_cflags}
    print(json.dumps(summary))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    return 1 if summary["fails_first_where_extension_h_compiles"] else 0


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians and ratios over the files every way compiled; the files the judge would build twice."""
    ok = [r for r in rows if all(r[k] and r[k]["ok"] for k in ("extension_h", "slim"))
          and (r["bare"] is None or r["bare"]["ok"])]
    first = [r["bare"] or r["slim"] for r in ok]  # what the judge reads first
    cpu = {k: [r[k]["cpu_s"] for r in ok] for k in ("extension_h", "slim")}
    cpu["judge_first"] = [c["cpu_s"] for c in first]
    full = sum(cpu["extension_h"]) or 1.0
    bare_rows = [r for r in ok if r["bare"] is not None]
    return {"files": len(rows), "compiled_every_way": len(ok), "bare_applies": len(bare_rows),
            "fails_first_where_extension_h_compiles": [
                r["task"] for r in rows if r["extension_h"] and r["extension_h"]["ok"]
                and not ((r["bare"] or r["slim"]) and (r["bare"] or r["slim"])["ok"])],
            **{f"median_{k}_cpu_s": statistics.median(v) if v else None for k, v in cpu.items()},
            "median_bare_cpu_s": statistics.median([r["bare"]["cpu_s"] for r in bare_rows]) if bare_rows else None,
            "ratio_slim_over_extension_h": sum(cpu["slim"]) / full,
            "ratio_judge_first_over_extension_h": sum(cpu["judge_first"]) / full,
            "ratio_judge_first_over_slim": sum(cpu["judge_first"]) / (sum(cpu["slim"]) or 1.0),
            "cpus": os.cpu_count()}


def _fmt(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "not used"
    return f"{cell['cpu_s']:5.2f} CPU-s" + ("" if cell["ok"] else " FAILED")


if __name__ == "__main__":
    raise SystemExit(main())
