"""Row families of procedural tasks (reduction, softmax, rownorm): references run on the CPU in their
dtype and in float64, solutions pass the NVRTC device compile and the static checks, templates vary,
and a seed gives the same task."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.cuda.compile_check import CompileCheckSettings, check_many
from kernelwright.cuda.static_checks import check_source
from kernelwright.synthesis import family_rows
from kernelwright.synthesis.task import SynthTask
from kernelwright.verifier.problems import load_problem

FAMILIES = ("reduction", "softmax", "rownorm")
N = 30


def _build(family: str, seed: int) -> SynthTask:
    fn = getattr(family_rows, f"build_{family}")
    task: SynthTask = fn(random.Random(seed), f"{family}_{seed:05d}", seed)
    return task


TASKS = {f: [_build(f, 7000 + i) for i in range(N)] for f in FAMILIES}


def _module(source: str) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec(compile(source, "<reference>", "exec"), ns)
    return ns


def _expected_shape(task: SynthTask, shape: dict[str, int]) -> tuple[int, ...]:
    if task.family == "reduction":
        return (shape["rows"],) if task.tail.endswith("@rows") else (shape["cols"],)
    return tuple(shape.values())


@pytest.mark.parametrize("family", FAMILIES)
def test_reference_runs_on_cpu_in_its_dtype_and_in_float64(family: str) -> None:
    for task in TASKS[family]:
        ns = _module(task.reference)
        shape = ns["SHAPES"][-1]
        assert ns["DTYPE"] == task.dtype and ns["CATEGORY"] == family
        inputs = ns["get_inputs"](**shape)
        assert all(x.dtype == getattr(torch, task.dtype) for x in inputs), task.id
        model = ns["Model"](*ns["get_init_inputs"]())
        out = model(*inputs)
        out64 = model.double()(*[x.double() for x in inputs])
        assert tuple(out.shape) == _expected_shape(task, shape), (task.id, out.shape)
        if task.tail.startswith("argmax"):
            assert out.dtype == torch.int64 and len(torch.unique(out)) > 1, task.id
            assert (out == out64).float().mean() > 0.99, task.id
            continue
        assert out.dtype == getattr(torch, task.dtype) and out64.dtype == torch.float64, task.id
        assert torch.isfinite(out).all() and torch.isfinite(out64).all(), task.id
        assert out64.std() > 0, f"{task.id}: constant output"
        rel = (out.double() - out64).norm() / out64.norm()  # the dtype's own rounding, amplified by exp
        assert rel < (5e-2 if task.dtype == "bfloat16" else 1e-2), (task.id, float(rel))
        if family == "reduction":  # rows differ: a kernel writing one constant would not pass
            assert out64.std() > 1e-3 * out64.abs().mean(), task.id


@pytest.mark.parametrize("family", FAMILIES)
def test_problem_metadata_reads_as_a_suite_problem(family: str, tmp_path: Path) -> None:
    for task in TASKS[family][:8]:
        path = tmp_path / f"{task.id}.py"
        path.write_text(task.reference)
        problem = load_problem(path)
        assert problem.category == family and problem.dtype == task.dtype and problem.has_roofline
        assert 2 <= len(problem.shapes) <= 3
        ns = _module(task.reference)
        sizes = [ns["flops"](**s) for s in problem.shapes]
        assert all(f > 0 for f in sizes) and sizes == sorted(sizes, reverse=True), task.id
        assert all(ns["bytes_moved"](**s) > 0 for s in problem.shapes)
        for s in problem.shapes:
            n = 1
            for v in s.values():
                n *= v
            assert 1e5 <= n <= 9e6, (task.id, s)
            assert s.get("cols", s.get("length", 1)) % 2 == 1, (task.id, s)


@pytest.fixture(scope="module")
def compile_settings(tmp_path_factory: pytest.TempPathFactory) -> CompileCheckSettings:
    return CompileCheckSettings(cache_dir=tmp_path_factory.mktemp("cc"), host=False, workers=2, timeout_s=120)


@pytest.mark.parametrize("family", FAMILIES)
def test_solutions_pass_the_device_compile(family: str, compile_settings: CompileCheckSettings) -> None:
    results = check_many([t.solution for t in TASKS[family]], compile_settings)
    failed = [(t.id, t.template, r.device.log[:1500]) for t, r in zip(TASKS[family], results, strict=True) if not r.ok]
    assert not failed, failed[:2]


@pytest.mark.parametrize("family", FAMILIES)
def test_solutions_pass_the_static_checks(family: str) -> None:
    for task in TASKS[family]:
        report = check_source(task.solution, require_call=True)
        assert report.ok, (task.id, report.details)
        assert "load_inline(" in task.solution and task.solution.count("load_inline(") == 1


@pytest.mark.parametrize("family", FAMILIES)
def test_templates_and_tails_vary(family: str) -> None:
    tasks = TASKS[family]
    strategies = {t.template.split("/")[1].split("_")[0] for t in tasks}
    assert len({t.template for t in tasks}) >= 3 and len(strategies) >= 2, strategies
    assert len({t.tail for t in tasks}) >= 3
    assert len({t.dtype for t in tasks}) == 3
    assert all(t.family == family and t.template.startswith(f"{family}/") for t in tasks)


def test_argmax_has_no_tie_making_prologue() -> None:
    tasks = [_build("reduction", s) for s in range(400)]
    argmax = [t for t in tasks if t.tail.startswith("argmax")]
    assert argmax
    for t in argmax:
        assert t.dtype == "float32" or not t.ops, t.id
        assert set(t.ops) <= {"neg", "add_scalar", "mul_scalar", "leaky_relu"}, t.id


@pytest.mark.parametrize("family", FAMILIES)
def test_a_seed_gives_the_same_task(family: str) -> None:
    assert _build(family, 123) == _build(family, 123)
    assert _build(family, 123) != _build(family, 124)
