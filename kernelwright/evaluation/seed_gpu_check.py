"""Check every seed solution against its reference on a GPU (the verifier's tolerance rule).

    python -m kernelwright.evaluation.seed_gpu_check --jobs 16 --json seed_check.json

Each task runs in its own process (built with `load_inline`, its own extension folder, a time
limit): reference and solution are built from the same seed, fed the same fresh inputs for three
seeds, and judged by kernelwright.verifier.tolerance: against the reference's float64 twin
(`fp64_relative`) where the reference runs in float64, else allclose (atol = rtol = 1e-4 in
float32, 1e-2 in half types; `fp32_allclose`), exact for integers; TF32 off. This is the seed
corpus's self-check, not the full verification protocol (that is `kernelwright verify`,
docs/verification.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelwright.verifier.isolation import import_file
from kernelwright.verifier.tolerance import fp64_output, fp64_twin, judge

SEEDS = (0, 1, 2)


def _compare(ref, new, ref64=None) -> tuple[bool, str, float, str]:
    """(ok, detail, max abs error, the rule that judged)."""
    import torch

    if not isinstance(new, torch.Tensor) or type(new) is not torch.Tensor:
        return False, f"output is {type(new).__name__}, not a plain torch.Tensor", float("nan"), ""
    if new.shape != ref.shape or new.dtype != ref.dtype:
        return (False, f"shape/dtype {tuple(new.shape)}/{new.dtype} != {tuple(ref.shape)}/{ref.dtype}",
                float("nan"), "")
    j = judge(new, ref, ref64)
    return j.ok, j.detail, j.max_err, j.rule


def check_one(task: Path) -> dict[str, Any]:
    """Run in a child process: build, run three seeds, compare."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    t0 = time.perf_counter()
    ref_mod = import_file(task / "reference.py", f"ref_{task.name}")
    sol_mod = import_file(task / "solution.py", f"sol_{task.name}")
    build_s = time.perf_counter() - t0
    worst, detail, rule = 0.0, "", ""
    for seed in SEEDS:
        torch.manual_seed(seed)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref_mod.get_inputs()]
        init = ref_mod.get_init_inputs()
        torch.manual_seed(seed)
        ref = ref_mod.Model(*init).cuda().eval()
        twin = fp64_twin(ref_mod, init, ref, seed, inputs)
        torch.manual_seed(seed)
        new = sol_mod.ModelNew(*init).cuda().eval()
        with torch.no_grad():
            expected = ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            got = new(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        torch.cuda.synchronize()
        ok, detail, err, rule = _compare(expected, got, fp64_output(twin, inputs))
        worst = max(worst, err) if err == err else worst
        if not ok:
            return {"task": task.name, "status": "mismatch", "seed": seed, "detail": detail, "rule": rule,
                    "build_s": build_s}
    return {"task": task.name, "status": "match", "detail": detail, "rule": rule, "max_abs_err": worst,
            "build_s": build_s}


def _run_child(task: Path, timeout_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"kw_{task.name}_") as ext_dir:
        env = {**os.environ, "TORCH_EXTENSIONS_DIR": ext_dir, "MAX_JOBS": "1"}
        env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
        cmd = [sys.executable, "-m", "kernelwright.evaluation.seed_gpu_check", "--one", str(task)]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired:
            return {"task": task.name, "status": "timeout", "detail": f"over {timeout_s:.0f} s"}
        wall = time.perf_counter() - start
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            return {"task": task.name, "status": "error", "wall_s": wall,
                    "detail": (proc.stderr or proc.stdout)[-1500:]}
        return {**json.loads(lines[-1]), "wall_s": wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--tasks", type=Path, default=None, help="seed tasks folder (default: the bundled one)")
    ap.add_argument("--only", nargs="*", default=None, help="task ids to check (default: all)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="tasks built and run at once")
    ap.add_argument("--timeout", type=float, default=420.0, help="seconds per task, build included")
    ap.add_argument("--json", type=Path, default=None, help="write all results here")
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(check_one(args.one)))  # noqa: T201 (child protocol: one JSON line)
        return 0
    from kernelwright.seed import seed_root

    root = args.tasks or seed_root()
    tasks = [d for d in sorted(root.iterdir()) if (d / "solution.py").is_file()]
    if args.only:
        tasks = [t for t in tasks if t.name in set(args.only)]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda t: _run_child(t, args.timeout), tasks))
    wall = time.perf_counter() - start
    for r in results:
        print(f"{r['task']:<45} {r['status']:<9} {str(r.get('detail', ''))[:200]}")  # noqa: T201
    matched = sum(r["status"] == "match" for r in results)
    print(f"{matched}/{len(results)} seed solutions match their reference ({wall:.0f} s wall)")  # noqa: T201
    if args.json:
        args.json.write_text(json.dumps({"matched": matched, "total": len(results), "wall_s": wall,
                                         "results": results}, indent=2))
    return 0 if matched == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
