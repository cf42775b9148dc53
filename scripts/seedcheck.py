"""Developer check of seed tasks on a machine without a GPU (uses the system nvcc if there is one).

    .venv/bin/python scripts/seedcheck.py kernelwright/seed/tasks/<id> [...]

For each task folder: meta.json has the required keys; reference.py runs on the CPU and
returns a tensor; solution.py's load_inline sources are captured (load_inline is replaced, so
nothing is built or run) and the CUDA source is compiled to an object file with nvcc for sm_90
against torch's headers. This is a development aid only: kernelwright itself never needs nvcc.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.utils.cpp_extension as cpp_ext

from kernelwright.verifier.isolation import import_file

REQUIRED_META = {"id", "category", "dtype", "description"}


def check(task: Path) -> list[str]:
    errs: list[str] = []
    meta = json.loads((task / "meta.json").read_text())
    if set(meta) < REQUIRED_META:
        errs.append(f"meta.json lacks {REQUIRED_META - set(meta)}")
    if meta.get("id") != task.name:
        errs.append("meta id != folder name")
    for f in ("reference.py", "solution.py"):
        ast.parse((task / f).read_text())
    ref = import_file(task / "reference.py", f"ref_{task.name}")
    torch.manual_seed(0)
    model = ref.Model(*ref.get_init_inputs())
    out = model(*ref.get_inputs())
    if not isinstance(out, torch.Tensor):
        errs.append("reference forward does not return a tensor")
    captured: dict = {}

    def fake_load_inline(**kw):
        captured.update(kw)

        class _Stub:
            def __getattr__(self, _n):
                raise RuntimeError("stub")

        return _Stub()

    real = cpp_ext.load_inline
    cpp_ext.load_inline = fake_load_inline  # type: ignore[assignment]
    try:
        sol = import_file(task / "solution.py", f"sol_{task.name}")
    finally:
        cpp_ext.load_inline = real  # type: ignore[assignment]
    if not hasattr(sol, "ModelNew"):
        errs.append("solution has no ModelNew")
    cuda = captured.get("cuda_sources")
    if not cuda:
        errs.append("load_inline was not called with cuda_sources")
        return errs
    cuda_src = cuda if isinstance(cuda, str) else "\n".join(cuda)
    if "__global__" not in cuda_src:
        errs.append("no __global__ kernel")
    inc = cpp_ext.include_paths()
    with tempfile.TemporaryDirectory() as d:
        cu = Path(d) / "k.cu"
        # torch/types.h declares torch::Tensor and the factories at half the parse cost of
        # torch/extension.h (no pybind11, no autograd API): good enough for a syntax check.
        cu.write_text(cuda_src.replace("<torch/extension.h>", "<torch/types.h>"))
        cmd = ["nvcc", "-std=c++17", "-arch=sm_90", "-c", str(cu), "-o", str(Path(d) / "k.o"),
               "-DTORCH_EXTENSION_NAME=seedcheck", *[f"-I{p}" for p in inc]]
        cmd += [f"-I{sysconfig_include()}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            errs.append("nvcc failed:\n" + r.stderr[-3000:])
    return errs


def sysconfig_include() -> str:
    import sysconfig

    return sysconfig.get_paths()["include"]


def main() -> int:
    bad = 0
    for arg in sys.argv[1:]:
        task = Path(arg)
        try:
            errs = check(task)
        except Exception as exc:  # a dev tool: report and go on
            errs = [f"{type(exc).__name__}: {exc}"]
        status = "ok" if not errs else "FAIL"
        print(f"{task.name}: {status}")
        for e in errs:
            print("   ", e)
        bad += bool(errs)
    print(f"{len(sys.argv) - 1 - bad}/{len(sys.argv) - 1} ok")
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    sys.exit(main())
