"""Trusted batches on a GPU: seed solutions built into one extension and checked like the judge would."""

from __future__ import annotations

import dataclasses

import pytest

from kernelwright.seed import load_seed_tasks
from kernelwright.synthesis.task import SynthTask
from kernelwright.synthesis.trusted_batch import check_chunk

pytestmark = pytest.mark.gpu


def seed_tasks(n: int) -> list[SynthTask]:
    return [SynthTask(id=t.id, family=t.category, ops=(), tail=t.category, dtype=t.dtype, reference=t.reference,
                      solution=t.solution, template="seed", seed=0) for t in load_seed_tasks()[:n]]


def test_seed_solutions_are_correct_in_one_batch(tmp_path):
    tasks = seed_tasks(24)
    checks = check_chunk(tasks, tmp_path, time_share=1.0)
    bad = {c.task_id: (c.status, c.detail) for c in checks if not c.correct}
    assert not bad
    assert all(c.speedup is not None and c.speedup > 0 for c in checks)
    assert all(c.custom_kernel_time_share is not None and c.custom_kernel_time_share > 0.5 for c in checks)


def test_a_broken_build_a_wrong_kernel_and_a_degenerate_problem_are_named(tmp_path):
    good = seed_tasks(6)
    leaky = next(t for t in seed_tasks(80) if t.id == "elementwise_leaky_relu")
    broken = dataclasses.replace(leaky, id="broken", solution=leaky.solution.replace("float v = x[i];", "float v = ;"))
    wrong = dataclasses.replace(leaky, id="wrong", solution=leaky.solution.replace("slope * v", "0.5f * slope * v"))
    zero = dataclasses.replace(leaky, id="zero", reference=leaky.reference.replace(
        "return torch.nn.functional.leaky_relu(x, self.negative_slope)", "return torch.zeros_like(x)"))
    checks = {c.task_id: c for c in check_chunk([*good, broken, wrong, zero], tmp_path, time_share=0.0)}
    assert all(checks[t.id].correct for t in good)
    assert checks["broken"].status == "compile_error"
    assert checks["wrong"].status == "wrong_output"
    assert checks["zero"].status in ("wrong_output", "degenerate_constant")
