"""The names a solution's bindings repeat are one convention in every family: the host function
`<stem>_forward`, the source `cuda_source`, the module `_ext` (a model that drew them afresh at each
mention wrote two of them)."""

from __future__ import annotations

import hashlib
import re

from kernelwright.synthesis.generator import generate_tasks

_FUNCTIONS = re.compile(r'functions=\["(\w+)"\]')


def test_every_solution_binds_one_host_name_four_times() -> None:
    families = set()
    for task in generate_tasks(120, seed=7):
        families.add(task.family)
        host = _FUNCTIONS.findall(task.solution)
        assert len(host) == 1, task.id
        name = host[0]
        assert name.endswith("_forward"), (task.id, name)
        assert f"torch::Tensor {name}(" in task.solution.split('"""')[1], task.id  # the definition, in the CUDA source
        assert f'cpp_source = "torch::Tensor {name}(' in task.solution, task.id
        assert f"return _ext.{name}(" in task.solution, task.id
        assert "cuda_sources=cuda_source," in task.solution, task.id
    assert len(families) >= 5  # the draw reached (nearly) every family


# sha256 of the first 40 problem files of seed 0, joined by newlines, as generator version 2 wrote them
VERSION_2_PROBLEMS = "7559caa122cb5e31bef0e14789e9c326086976e99f6fc59d0071dd87ed191ac8"


def test_a_seeds_problems_are_those_of_version_2() -> None:
    """The names are no longer drawn, yet their draws stay: a seed's problems are what they were, so
    runs of either version compare task by task."""
    problems = "\n".join(t.reference for t in generate_tasks(40, seed=0))
    assert hashlib.sha256(problems.encode()).hexdigest() == VERSION_2_PROBLEMS


_KERNELS = re.compile(r"__global__ void (\w+)\(")


def test_an_elementwise_solution_names_no_op_of_its_chain() -> None:
    """Version 5: an elementwise kernel is `chain_kernel` (with `_vec`/`_scalar` where there are two) and its host
    `chain_forward`: a name of the chain's first two ops was written and the rest dropped (version 3), a name of
    every op copied shortened in its launch (version 4)."""
    from kernelwright.synthesis import ops as O

    op = re.compile(r"(?:^|_)(" + "|".join(sorted(O.OPS, key=len, reverse=True)) + r")(?:_|$)")
    seen = 0
    for task in generate_tasks(160, seed=3):
        if task.family != "elementwise":
            continue
        seen += 1
        kernels, host = _KERNELS.findall(task.solution), _FUNCTIONS.findall(task.solution)
        assert host == ["chain_forward"] and kernels, (task.id, host)
        assert all(k.startswith("chain_kernel") and not op.search(k) for k in kernels), (task.id, kernels)
        launched = set(re.findall(r"(\w+)\s*<<<", task.solution))
        assert launched and launched <= set(kernels), (task.id, launched)
    assert seen >= 20
