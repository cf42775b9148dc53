"""The matmul_epilogue family of procedural tasks: references run on the CPU in their dtype and in
float64, solutions pass the NVRTC device compile and the static checks, use no library matmul,
templates vary, and a seed gives the same task."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import torch

from kernelwright.cuda.candidate_sources import candidate_sources
from kernelwright.cuda.compile_check import CompileCheckSettings, check_many
from kernelwright.cuda.static_checks import check_source
from kernelwright.synthesis.family_matmul import build_matmul_epilogue
from kernelwright.verifier.problems import load_problem

N = 30
TASKS = [build_matmul_epilogue(random.Random(9000 + i), f"matmul_epilogue_{i:05d}", 9000 + i) for i in range(N)]


def _module(source: str) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec(compile(source, "<reference>", "exec"), ns)
    return ns


def test_reference_runs_on_cpu_in_its_dtype_and_in_float64() -> None:
    for task in TASKS:
        ns = _module(task.reference)
        shape = ns["SHAPES"][-1]
        inputs = ns["get_inputs"](**shape)
        assert all(x.dtype == getattr(torch, task.dtype) for x in inputs), task.id
        model = ns["Model"](*ns["get_init_inputs"]())
        out = model(*inputs)
        out64 = model.double()(*[x.double() for x in inputs])
        assert tuple(out.shape) == (shape["m"], shape["n"]), task.id
        assert out.dtype == getattr(torch, task.dtype) and out64.dtype == torch.float64
        assert torch.isfinite(out).all() and torch.isfinite(out64).all(), task.id
        assert out64.std() > 1e-3, f"{task.id}: constant output"
        rel = (out.double() - out64).norm() / out64.norm()
        assert rel < 2e-2, (task.id, float(rel))


def test_shapes_are_odd_and_sized_for_the_suite(tmp_path: Path) -> None:
    for task in TASKS:
        path = tmp_path / f"{task.id}.py"
        path.write_text(task.reference)
        problem = load_problem(path)
        assert problem.category == "matmul_epilogue" and problem.dtype == task.dtype and problem.has_roofline
        assert 2 <= len(problem.shapes) <= 3
        for s in problem.shapes:
            assert all(v % 2 == 1 for v in s.values()), (task.id, s)
            assert 1e5 <= s["m"] * s["n"] <= 8e6 and 1e5 <= s["m"] * s["k"] <= 8e6, (task.id, s)
        if task.template.endswith("naive"):
            assert all(s["k"] <= 255 for s in problem.shapes), task.id
        ns = _module(task.reference)
        flops = [ns["flops"](**s) for s in problem.shapes]
        last = problem.shapes[-1]
        assert flops == sorted(flops, reverse=True) and flops[-1] >= 2 * last["m"] * last["n"] * last["k"]
        assert all(ns["bytes_moved"](**s) > 0 for s in problem.shapes)


def test_solutions_pass_the_device_compile(tmp_path: Path) -> None:
    settings = CompileCheckSettings(cache_dir=tmp_path, host=False, workers=2, timeout_s=120)
    results = check_many([t.solution for t in TASKS], settings)
    failed = [(t.id, t.template, r.device.log[:1500]) for t, r in zip(TASKS, results, strict=True) if not r.ok]
    assert not failed, failed[:2]


def test_solutions_pass_the_static_checks_and_compute_the_product_themselves() -> None:
    for task in TASKS:
        report = check_source(task.solution, require_call=True)
        assert report.ok, (task.id, report.details)
        cuda = "\n".join(candidate_sources(task.solution).builds[0].cuda)
        assert not re.search(r"cublas|torch::(matmul|mm|linear|addmm)|at::(matmul|mm)", cuda), task.id
        assert "float dot" in cuda, task.id  # a float accumulator, whatever the dtype


def test_templates_tails_and_dtypes_vary() -> None:
    templates = {t.template for t in TASKS}
    assert {t.split("/")[1].rstrip("0123456789").split("_")[0] for t in templates} == {"tiled", "regblock", "naive"}
    assert {t.tail for t in TASKS} == {"matmul", "matmul_bias", "linear", "linear_bias"}
    assert {t.dtype for t in TASKS} == {"float32", "float16", "bfloat16"}
    assert any("p0" in t.reference for t in TASKS), "no epilogue with a broadcast operand"
    assert all(t.family == "matmul_epilogue" for t in TASKS)


def test_a_seed_gives_the_same_task() -> None:
    assert build_matmul_epilogue(random.Random(5), "m", 5) == build_matmul_epilogue(random.Random(5), "m", 5)
    assert build_matmul_epilogue(random.Random(5), "m", 5) != build_matmul_epilogue(random.Random(6), "m", 6)


def test_the_plan_above_the_kernel_states_the_weight_layout_the_reference_uses() -> None:
    """The first comment above the kernel names the product and the layout of w the reference reads (`F.linear`:
    (N, K); `@`: (K, N)), in the words the host restates before the sizes it decides."""
    for task in TASKS:
        cuda = "\n".join(candidate_sources(task.solution).builds[0].cuda)
        plan = cuda.split("__global__")[0].strip().splitlines()[-1]
        linear = "F.linear(" in task.reference
        phrase = "F.linear(x, w): w is (N, K)" if linear else "x @ w: w is (K, N)"
        assert plan.startswith("// ") and phrase in plan, (task.id, plan)
        assert f"// {phrase}, y = " in cuda.split("__global__")[-1], task.id  # the host's words are the plan's
        assert ("(n, k)" if linear else "(k, n)") in task.reference.split('"""')[1], task.id  # the docstring agrees
