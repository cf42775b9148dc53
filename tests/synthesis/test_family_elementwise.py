"""Elementwise procedural tasks: references run on the CPU in their dtype and in float64 with a varying
output, the metadata reads as a suite problem, solutions pass the NVRTC device compile (and, for one
task of each template, the host compile) and the static checks, templates vary, a seed gives the
same task, and degenerate chains are drawn again.

The host-compile test builds the precompiled torch header once (libclang, ~15 s) into a temporary
folder, or keeps it in $KW_TEST_PCH_DIR when that is set.
"""

from __future__ import annotations

import ast
import math
import random
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.cuda.compile_check import CompileCheckSettings, check_many
from kernelwright.cuda.static_checks import check_source
from kernelwright.synthesis import ops as O
from kernelwright.synthesis.chain_parts import chain_flops, lively_chain, varies
from kernelwright.synthesis.family_elementwise import build_elementwise
from kernelwright.synthesis.task import SynthTask
from kernelwright.verifier.problems import load_problem

N = 40
TASKS = [build_elementwise(random.Random(s), f"t{s}", s) for s in range(N)]


def _module(source: str) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec(compile(source, "<reference>", "exec"), ns)
    return ns


def _chain(task: SynthTask) -> list[O.OpUse]:
    """The task's chain as its reference spells it: scalars from get_init_inputs, axes from get_inputs."""
    ns = _module(task.reference)
    values = iter(ns["get_init_inputs"]())
    lines = [ln for ln in task.reference.splitlines() if ln.strip().startswith("p") and "torch.randn" in ln]
    axes = iter("row" if "(rows)" in ln else "col" for ln in lines)
    return [O.OpUse(op, value=next(values)) if O.OPS[op].kind == O.SCALAR
            else O.OpUse(op, axis=next(axes)) if O.OPS[op].kind == O.BROADCAST else O.OpUse(op) for op in task.ops]


def test_reference_runs_on_cpu_in_its_dtype_and_in_float64() -> None:
    for task in TASKS:
        ns = _module(task.reference)
        shape = ns["SHAPES"][-1]
        assert ns["DTYPE"] == task.dtype and ns["CATEGORY"] == "elementwise"
        torch.manual_seed(0)
        inputs = ns["get_inputs"](**shape)
        x = inputs[0]
        assert tuple(x.shape) == tuple(shape.values()), task.id
        assert all(t.dtype == getattr(torch, task.dtype) for t in inputs), task.id
        assert all(t.dim() == 1 and t.numel() in (shape["rows"], shape["cols"]) for t in inputs[1:]), task.id
        model = ns["Model"](*ns["get_init_inputs"]())
        out = model(*inputs)
        out64 = model.double()(*[t.double() for t in inputs])
        assert out.shape == x.shape and out.dtype == x.dtype and out64.dtype == torch.float64, task.id
        assert torch.isfinite(out).all() and torch.isfinite(out64).all(), task.id
        assert out64.std() > 0 and not bool((out == out.reshape(-1)[0]).all()), f"{task.id}: constant output"
        rel = (out.double() - out64).norm() / out64.norm()
        assert rel < 2e-2, (task.id, float(rel))
        size = x.element_size()
        assert ns["bytes_moved"](**shape) == size * (sum(t.numel() for t in inputs) + out.numel()), task.id
        assert ns["flops"](**shape) == chain_flops(_chain(task)) * out.numel(), task.id


def test_problem_metadata_reads_as_a_suite_problem(tmp_path: Path) -> None:
    for task in TASKS:
        path = tmp_path / f"{task.id}.py"
        path.write_text(task.reference)
        problem = load_problem(path)
        assert problem.category == "elementwise" and problem.dtype == task.dtype and problem.has_roofline
        assert 2 <= len(problem.shapes) <= 3 and all(list(s) == list(problem.shapes[0]) for s in problem.shapes)
        numels = [math.prod(s.values()) for s in problem.shapes]
        assert numels == sorted(numels, reverse=True), task.id  # the last shape is the smallest
        assert all(1e5 <= n <= 8e6 and n % 32 for n in numels), (task.id, problem.shapes)
        assert '"""' in task.reference.splitlines()[0] and task.ops and task.tail == ""


@pytest.fixture(scope="module")
def device_settings(tmp_path_factory: pytest.TempPathFactory) -> CompileCheckSettings:
    return CompileCheckSettings(cache_dir=tmp_path_factory.mktemp("cc"), host=False, workers=2, timeout_s=120)


def test_solutions_pass_the_device_compile(device_settings: CompileCheckSettings) -> None:
    results = check_many([t.solution for t in TASKS], device_settings)
    failed = [(t.id, t.template, r.device.log[:1500]) for t, r in zip(TASKS, results, strict=True) if not r.ok]
    assert not failed, failed[:2]


def test_a_broken_solution_fails_the_device_compile(device_settings: CompileCheckSettings) -> None:
    task = TASKS[0]
    broken = task.solution.replace("__global__ void", "__global__ void void", 1)
    assert not check_many([broken], device_settings)[0].ok


def test_one_solution_of_each_template_passes_the_host_compile(tmp_path_factory: pytest.TempPathFactory,
                                                              pch_dir: Path) -> None:
    pch = pch_dir
    settings = CompileCheckSettings(cache_dir=tmp_path_factory.mktemp("host"), pch_dir=pch, workers=2, timeout_s=180,
                                    host_frontend="libclang")
    sample = list({t.template.rsplit("_", 1)[0]: t for t in TASKS}.values())  # one of each strategy
    results = check_many([t.solution for t in sample], settings)
    failed = [(t.id, t.template, r.host.status, r.host.log[:1500]) for t, r in zip(sample, results, strict=True)
              if not r.ok]
    assert not failed, failed[:2]


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _method_args(cls: ast.ClassDef, name: str) -> list[str]:
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return [a.arg for a in fn.args.args]


def test_solutions_pass_the_static_checks_and_mirror_the_model() -> None:
    for task in TASKS:
        report = check_source(task.solution, require_call=True)
        assert report.ok, (task.id, report.details)
        assert task.solution.count("load_inline(") == 1 and '"-O3"' in task.solution
        ref, sol = _class(ast.parse(task.reference), "Model"), _class(ast.parse(task.solution), "ModelNew")
        for method in ("__init__", "forward"):
            assert _method_args(ref, method) == _method_args(sol, method), (task.id, method)


def test_vector_templates_fall_back_to_a_scalar_kernel_on_unaligned_pointers() -> None:
    vector = [t for t in TASKS if "/vector_" in t.template]
    assert vector
    for task in vector:
        assert "std::uintptr_t" in task.solution and "_scalar<<<" in task.solution and "} else {" in task.solution


def test_no_identifier_needs_a_file_scope_of_its_own() -> None:
    for task in TASKS:
        assert "#define" not in task.solution and "using namespace" not in task.solution
        assert not any(line.startswith("static ") for line in task.solution.splitlines()), task.id


def test_templates_dtypes_and_shapes_vary() -> None:
    tasks = [build_elementwise(random.Random(s), f"t{s}", s) for s in range(N, 4 * N)] + TASKS
    strategies = {t.template.split("/")[1].rsplit("_", 1)[0] for t in TASKS}
    assert len({t.template for t in TASKS}) >= 3 and len(strategies) >= 4, strategies
    assert {t.template.rsplit("_", 1)[1] for t in tasks} == {"stmt", "expr"}
    assert {t.dtype for t in tasks} == {"float32", "float16", "bfloat16"}
    assert {len(t.ops) for t in tasks} == {1, 2, 3, 4, 5}
    ranks = {len(_module(t.reference)["SHAPES"][0]) for t in tasks}
    assert ranks == {2, 3, 4}
    assert any(O.OPS[op].kind == O.BROADCAST for t in tasks for op in t.ops)
    assert all(t.family == "elementwise" and t.template.startswith("elementwise/") for t in tasks)


def test_the_same_seed_gives_the_same_task() -> None:
    assert build_elementwise(random.Random(11), "a", 11) == build_elementwise(random.Random(11), "a", 11)
    assert build_elementwise(random.Random(11), "a", 11) != build_elementwise(random.Random(12), "a", 12)


def test_a_degenerate_chain_is_drawn_again() -> None:
    dead = [O.OpUse("erf"), O.OpUse("add_scalar", value=-1.5), O.OpUse("relu")]
    assert not varies(dead)
    assert varies([O.OpUse("erf"), O.OpUse("add_scalar", value=0.5), O.OpUse("relu")])
    for s in range(60):
        assert varies(lively_chain(random.Random(s), 5, "float32", True))



def _numbered_runs(code: str) -> list[list[tuple[int, int]]]:
    """(place, count) of each `/* k/n op */` statement, in runs of consecutive lines."""
    runs: list[list[tuple[int, int]]] = [[]]
    for line in code.splitlines():
        m = re.search(r"/\* (\d+)/(\d+) \w+ \*/", line)
        if m:
            runs[-1].append((int(m.group(1)), int(m.group(2))))
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def test_every_op_of_a_chain_is_named_before_its_code_in_the_order_the_comment_lists() -> None:
    """Kernels name each op before its code, led by its place in its statements (`/* 2/3 gelu */ v = ...;`,
    counted 1 to n in every run of them), and the kernel's comment lists the ops in the order they run, also
    where the docstring nests them (`tanh(elu(x))`: rows and matmul families), each with its place and the
    kernel argument it reads (`2/3 leaky_relu (s0)`: the tag of its statement), an argument every kernel of the
    solution declares."""
    from kernelwright.synthesis.generator import generate_tasks

    op = re.compile(r"\b(" + "|".join(sorted(O.OPS, key=len, reverse=True)) + r")\b")
    families = set()
    for task in generate_tasks(80, 0):
        if not task.ops:
            continue
        plan = r"^// (?:y = |\w+, then |(?:.*?; )?first x through |(?:.*?; )?then the result through )(.*)$"
        lists = [m.group(1) for m in re.finditer(plan, task.solution, re.M)]
        assert lists, task.id
        assert op.findall(lists[0]) == list(task.ops), (task.id, lists[0])
        items = re.findall(r"(?:^|through |then )((\d+)/(\d+) \w+)", lists[0])
        places = [int(k) for _, k, _ in items]
        assert len(places) == len(task.ops) and places[0] == 1, (task.id, lists[0])
        assert all(b in (a + 1, 1) for a, b in zip(places[:-1], places[1:], strict=True)), task.id  # 1..n a stage
        ends = [i for i, k in enumerate(places) if i + 1 == len(places) or places[i + 1] == 1]
        for i, (_, _, n) in enumerate(items):  # every item carries its stage's count
            assert int(n) == places[min(e for e in ends if e >= i)], (task.id, lists[0])
        tags = set(re.findall(r"/\* (\d+/\d+ \w+) \*/ \w+ = ", task.solution))
        assert tags in (set(), {item for item, _, _ in items}), task.id  # each statement's tag is a plan item
        kernels = " ".join(re.findall(r"__global__ void \w+\(([^)]*)\)", task.solution))
        for arg in re.findall(r"\((s\d+|p\d+)[,)]", lists[0]):  # every argument the plan names, declared
            assert re.search(rf"\b{arg}\b", kernels), (task.id, arg)
        named = set(re.findall(r"/\* \d+/\d+ (\w+) \*/ \w+ = ", task.solution))
        assert named in (set(), set(task.ops)), task.id  # none: the chain written as one expression
        for run in _numbered_runs(task.solution):
            assert [k for k, _ in run] == list(range(1, len(run) + 1)), (task.id, run)
            assert {n for _, n in run} == {len(run)}, (task.id, run)
        assert not re.search(r";\s*// (" + "|".join(O.OPS) + r")$", task.solution, re.M), task.id  # never after
        families.add(task.family)
    assert {"elementwise", "matmul_epilogue", "reduction", "rownorm"} <= families
