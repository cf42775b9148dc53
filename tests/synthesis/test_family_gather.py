"""Gather procedural tasks: references run on the CPU in their dtype and in float64 with indices in
range, the metadata reads as a suite problem, solutions pass the NVRTC device compile (and, for one
task of each template, the host compile) and the static checks, templates and kinds vary, a seed gives
the same task, and `generate_tasks` draws both families.

The host-compile test builds the precompiled torch header once (libclang, ~15 s) into a temporary
folder, or keeps it in $KW_TEST_PCH_DIR when that is set.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.cuda.compile_check import CompileCheckSettings, check_many
from kernelwright.cuda.static_checks import check_source
from kernelwright.synthesis.family_gather import KINDS, build_gather
from kernelwright.synthesis.generator import generate_tasks
from kernelwright.synthesis.task import SynthTask
from kernelwright.verifier.problems import load_problem

N = 40
TASKS = [build_gather(random.Random(s), f"t{s}", s) for s in range(N)]


def _module(source: str) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec(compile(source, "<reference>", "exec"), ns)
    return ns


def _split(task: SynthTask, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(table, index) of a task's inputs."""
    return (inputs[1], inputs[0]) if task.tail == "embedding" else (inputs[0], inputs[1])


def _expected(task: SynthTask, table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The gather without its chain, by plain indexing."""
    if task.tail in ("index_select", "embedding"):
        return table[idx]
    if task.tail == "gather_dim1":
        return table[torch.arange(table.shape[0]).unsqueeze(1), idx]
    return table[idx, torch.arange(table.shape[1]).unsqueeze(0)]


def test_reference_runs_on_cpu_in_its_dtype_and_in_float64() -> None:
    for task in TASKS:
        ns = _module(task.reference)
        shape = ns["SHAPES"][-1]
        assert ns["DTYPE"] == task.dtype and ns["CATEGORY"] == "gather"
        torch.manual_seed(0)
        inputs = ns["get_inputs"](**shape)
        table, idx = _split(task, inputs)
        assert table.dtype == getattr(torch, task.dtype) and idx.dtype == torch.int64, task.id
        bound = table.shape[1] if task.tail == "gather_dim1" else table.shape[0]
        assert 0 <= int(idx.min()) and int(idx.max()) < bound, task.id
        model = ns["Model"](*ns["get_init_inputs"]())
        out = model(*inputs)
        out64 = model.double()(*[t.double() if t.is_floating_point() else t for t in inputs])
        gathered = _expected(task, table, idx)
        assert out.shape == gathered.shape and out.dtype == table.dtype and out64.dtype == torch.float64, task.id
        assert torch.isfinite(out).all() and torch.isfinite(out64).all(), task.id
        assert out64.std() > 0 and not bool((out == out.reshape(-1)[0]).all()), f"{task.id}: constant output"
        if not task.ops:
            assert torch.equal(out, gathered), task.id
        rel = (out.double() - out64).norm() / out64.norm()
        assert rel < 2e-2, (task.id, float(rel))
        moved = 2 * out.numel() * out.element_size() + idx.numel() * idx.element_size()
        assert ns["bytes_moved"](**shape) == moved, task.id
        assert ns["flops"](**shape) >= 0 and (ns["flops"](**shape) > 0) == bool(task.ops), task.id


def _numels(kind: str, s: dict[str, int]) -> tuple[int, int]:
    """(table, output) element counts of a shape."""
    if kind == "embedding":
        return s["vocab"] * s["dim"], s["batch"] * s["seq"] * s["dim"]
    out = {"index_select": s.get("n", 0) * s["cols"], "gather_dim1": s["rows"] * s.get("k", 0)}
    return s["rows"] * s["cols"], out.get(kind, s.get("k", 0) * s["cols"])


def test_problem_metadata_reads_as_a_suite_problem(tmp_path: Path) -> None:
    for task in TASKS:
        path = tmp_path / f"{task.id}.py"
        path.write_text(task.reference)
        problem = load_problem(path)
        assert problem.category == "gather" and problem.dtype == task.dtype and problem.has_roofline
        assert 2 <= len(problem.shapes) <= 3 and all(list(s) == list(problem.shapes[0]) for s in problem.shapes)
        ns = _module(task.reference)
        moved = [ns["bytes_moved"](**s) for s in problem.shapes]
        assert moved == sorted(moved, reverse=True), task.id  # the last shape is the smallest
        for s in problem.shapes:
            # the table and the output: element counts the problems use, never a multiple of a block
            assert all(1e5 <= n <= 8e6 and n % 32 for n in _numels(task.tail, s)), (task.id, s)
        assert '"""' in task.reference.splitlines()[0] and task.tail in KINDS


@pytest.fixture(scope="module")
def device_settings(tmp_path_factory: pytest.TempPathFactory) -> CompileCheckSettings:
    return CompileCheckSettings(cache_dir=tmp_path_factory.mktemp("cc"), host=False, workers=2, timeout_s=120)


def test_solutions_pass_the_device_compile(device_settings: CompileCheckSettings) -> None:
    results = check_many([t.solution for t in TASKS], device_settings)
    failed = [(t.id, t.template, r.device.log[:1500]) for t, r in zip(TASKS, results, strict=True) if not r.ok]
    assert not failed, failed[:2]


def test_one_solution_of_each_template_passes_the_host_compile(tmp_path_factory: pytest.TempPathFactory,
                                                              pch_dir: Path) -> None:
    pch = pch_dir
    settings = CompileCheckSettings(cache_dir=tmp_path_factory.mktemp("host"), pch_dir=pch, workers=2, timeout_s=180,
                                    host_frontend="libclang")
    # each strategy's kernels, and each kind's host code
    sample = list({**{t.template.split("/")[1].split("_")[0]: t for t in TASKS}, **{t.tail: t for t in TASKS}}.values())
    results = check_many([t.solution for t in sample], settings)
    failed = [(t.id, t.template, r.host.status, r.host.log[:1500]) for t, r in zip(sample, results, strict=True)
              if not r.ok]
    assert not failed, failed[:2]


def _args(tree: ast.Module, cls: str, method: str) -> list[str]:
    c = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == method)
    return [a.arg for a in fn.args.args]


def test_solutions_pass_the_static_checks_and_mirror_the_model() -> None:
    for task in TASKS:
        report = check_source(task.solution, require_call=True)
        assert report.ok, (task.id, report.details)
        assert task.solution.count("load_inline(") == 1 and "#define" not in task.solution
        ref, sol = ast.parse(task.reference), ast.parse(task.solution)
        for method in ("__init__", "forward"):
            assert _args(ref, "Model", method) == _args(sol, "ModelNew", method), (task.id, method)


def test_vector_rows_check_the_row_length_and_alignment() -> None:
    vector = [t for t in TASKS if "/vector_rows" in t.template]
    assert vector
    for task in vector:
        assert "cols % " in task.solution and "std::uintptr_t" in task.solution and "_scalar<<<" in task.solution


def test_templates_kinds_and_dtypes_vary() -> None:
    tasks = TASKS + [build_gather(random.Random(s), f"t{s}", s) for s in range(N, 3 * N)]
    strategies = {t.template.split("/")[1].split("_per_")[0].split("_rows")[0] for t in TASKS}
    assert len({t.template for t in TASKS}) >= 3 and {"thread", "block", "warp", "vector"} <= strategies, strategies
    assert {t.tail for t in tasks} == set(KINDS)
    assert {t.dtype for t in tasks} == {"float32", "float16", "bfloat16"}
    assert {len(t.ops) for t in tasks} == {0, 1, 2}
    assert all(t.family == "gather" and t.template.startswith("gather/") for t in tasks)


def test_the_same_seed_gives_the_same_task() -> None:
    assert build_gather(random.Random(5), "a", 5) == build_gather(random.Random(5), "a", 5)
    assert build_gather(random.Random(5), "a", 5) != build_gather(random.Random(6), "a", 6)


def test_generate_tasks_draws_both_families() -> None:
    tasks = list(generate_tasks(200, 0, ["elementwise", "gather"]))
    assert len(tasks) == 200 and len({t.id for t in tasks}) == 200
    assert {t.family for t in tasks} == {"elementwise", "gather"}
    assert [t.id for t in tasks[:50]] == [t.id for t in generate_tasks(50, 0, ["elementwise", "gather"])]
