"""Infill tasks from the seed solutions: well-formed regions that splice back exactly, and what they compile to.

The device stage is NVRTC; a missing launch configuration is host code, so the empty launch_config
partials go through the host stage too (libclang, with a precompiled torch/extension.h built into a
temporary folder once, or kept in $KW_TEST_PCH_DIR when that is set).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.cuda.compile_check import CompileCheckSettings, check_many
from kernelwright.cuda.spans import cuda_parser
from kernelwright.infill_format import MARKER_RE, answer_text, marker, splice
from kernelwright.seed import load_seed_tasks
from kernelwright.synthesis.infill import (
    MAX_LINES,
    REGION_KINDS,
    InfillTask,
    find_regions,
    infill_tasks,
    load_infill,
    write_infill,
)

SEEDS = load_seed_tasks()[::5]  # 15 of the 72, across the categories
assert len(SEEDS) == 15
TASKS = {t.id: infill_tasks(t.id, t.reference, t.solution, f"sig-{t.id}", t.category) for t in SEEDS}
SOLUTIONS = {t.id: t.solution for t in SEEDS}
ALL = [x for tasks in TASKS.values() for x in tasks]


def _statements(code: str) -> list[str]:
    """The node types of `code` parsed as a function body; raises when it does not parse cleanly."""
    tree = cuda_parser().parse(f"void region() {{\n{code}\n}}\n".encode())
    assert not tree.root_node.has_error, code
    body = tree.root_node.children[0].child_by_field_name("body")
    assert body is not None
    return [c.type for c in body.named_children if c.type != "comment"]


def test_every_kind_is_found_somewhere_and_at_most_once_per_solution() -> None:
    assert {x.kind for x in ALL} == set(REGION_KINDS)
    for task_id, tasks in TASKS.items():
        kinds = [x.kind for x in tasks]
        assert kinds == [k for k in REGION_KINDS if k in kinds], task_id  # one each, in REGION_KINDS order
        assert all(x.id == f"{task_id}__{x.kind}" and x.task_id == task_id for x in tasks)
        assert all(x.signature == f"sig-{task_id}" for x in tasks)


@pytest.mark.parametrize("task", ALL, ids=lambda x: x.id)
def test_each_region_is_a_well_formed_run_of_statements_of_its_kind(task: InfillTask) -> None:
    statements = _statements(task.answer)
    assert statements and task.answer == task.answer.strip()
    assert task.answer.count("\n") < MAX_LINES[task.kind]
    code = task.answer
    if task.kind == "index_guard":
        assert any(b in code for b in ("threadIdx", "blockIdx")) and any(c in code for c in ("<", ">"))
        assert {"if_statement", "for_statement"} & set(statements)
    elif task.kind == "reduction_loop":
        assert "__shfl" in code or "__syncthreads" in code
        assert {"for_statement", "while_statement", "do_statement"} & set(statements)
    elif task.kind == "smem_tiling":
        assert "__syncthreads" in code and "for_statement" in statements
    else:
        assert "<<<" in code and "expression_statement" in statements


@pytest.mark.parametrize("task", ALL, ids=lambda x: x.id)
def test_the_partial_hides_the_region_behind_one_marker_and_splices_back_exactly(task: InfillTask) -> None:
    solution = SOLUTIONS[task.task_id]
    assert MARKER_RE.findall(task.partial) == [task.kind] and task.partial.count(marker(task.kind)) == 1
    assert task.answer not in task.partial
    assert splice(task.partial, answer_text(task.answer)) == solution
    assert task.partial.replace(marker(task.kind), task.answer) == solution


def test_a_solution_that_already_holds_a_marker_gives_no_task() -> None:
    seed = SEEDS[0]
    assert infill_tasks(seed.id, seed.reference, seed.solution + f"\n# {marker('index_guard')}\n", "s", "f") == []
    assert find_regions("print('no cuda here')\n") == {}


TWO_PASS = r'''from torch.utils.cpp_extension import load_inline
src = r"""
#include <torch/extension.h>
__global__ void two_pass(const float* x, float* y, int n) {
    const int lane = threadIdx.x;
    if (lane >= 32) return;
    float s = 0.0f;
    for (int i = lane; i < n; i += 32) s += x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    const float mean = s / n;
    s = 0.0f;
    for (int i = lane; i < n; i += 32) s += (x[i] - mean) * (x[i] - mean);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) y[0] = s / n;
}
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty({1}, x.options());
    two_pass<<<1, 32>>>(x.data_ptr<float>(), y.data_ptr<float>(), (int)x.numel());
    return y;
}
"""
ext = load_inline(name="two_pass", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=src,
                  functions=["run"])
'''


def test_a_loop_that_recurs_in_the_file_is_hidden_with_the_statement_that_tells_it_apart() -> None:
    (task,) = [t for t in infill_tasks("two", "", TWO_PASS, "s", "f") if t.kind == "reduction_loop"]
    loop = "for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);"
    assert task.answer == loop + "\n    const float mean = s / n;"  # the first pass's loop and what follows it
    assert task.partial.count(loop) == 1 and splice(task.partial, answer_text(task.answer)) == TWO_PASS


def test_a_written_folder_loads_back_the_same_tasks(tmp_path: Path) -> None:
    write_infill(ALL, tmp_path / "infill")
    assert load_infill(tmp_path / "infill") == sorted(ALL, key=lambda x: x.id)


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory,
             pch_dir: Path) -> tuple[CompileCheckSettings, CompileCheckSettings]:
    """(device stage only, both stages)."""
    pch = pch_dir
    device = CompileCheckSettings(cache_dir=tmp_path_factory.mktemp("dev"), host=False, workers=2)
    both = CompileCheckSettings(cache_dir=tmp_path_factory.mktemp("cc"), pch_dir=pch, timeout_s=180, workers=2,
                                host_frontend="libclang")
    return device, both


def test_the_spliced_answer_compiles_and_the_empty_answer_does_not(
        settings: tuple[CompileCheckSettings, CompileCheckSettings]) -> None:
    device, both = settings
    spliced = sorted({splice(x.partial, answer_text(x.answer)) for x in ALL})  # each solution, once
    assert len(spliced) == len(SOLUTIONS)
    ok = check_many(spliced, device)
    assert all(r.ok for r in ok), [r.device.log[:300] for r in ok if not r.ok]
    kernel_side = [x for x in ALL if x.kind != "launch_config"]
    empty = check_many([splice(x.partial, "") for x in kernel_side], device)
    assert [(x.id, r.device.status) for x, r in zip(kernel_side, empty, strict=True)] == \
        [(x.id, "failed") for x in kernel_side]
    assert all("#error" in r.device.log for r in empty)
    host_side = [x for x in ALL if x.kind == "launch_config"]
    launches = check_many([splice(x.partial, "") for x in host_side], both)
    assert [(x.id, r.ok, r.host.status) for x, r in zip(host_side, launches, strict=True)] == \
        [(x.id, False, "failed") for x in host_side], [r.host.log[:300] for r in launches]
