from __future__ import annotations

import ast
from collections import Counter

from kernelwright.cuda.static_checks import check_source
from kernelwright.seed import load_seed_tasks, split_tasks

REQUIRED_CATEGORIES = {
    "elementwise", "math", "reduction", "normalization", "softmax", "matmul", "convolution", "pooling",
    "loss", "indexing", "fusion", "quantization",
}


def test_corpus_size_and_categories() -> None:
    tasks = load_seed_tasks()
    counts = Counter(t.category for t in tasks)
    assert len(tasks) >= 60
    assert REQUIRED_CATEGORIES <= set(counts)
    assert min(counts.values()) >= 5
    assert len({t.id for t in tasks}) == len(tasks)


def test_every_task_is_kernelbench_format() -> None:
    for t in load_seed_tasks():
        ref = ast.parse(t.reference)
        names = {n.name for n in ref.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        assert {"Model", "get_inputs", "get_init_inputs"} <= names, t.id
        assert t.path.name == t.id and t.description and t.dtype


def test_every_solution_builds_real_kernels_without_fallback() -> None:
    for t in load_seed_tasks():
        report = check_source(t.solution)
        assert report.ok, (t.id, report.details)
        assert report.kernels >= 1 and report.launches >= 1, t.id


def test_split_is_disjoint_stratified_and_stable() -> None:
    tasks = load_seed_tasks()
    train, test = split_tasks(tasks)
    assert {t.id for t in train}.isdisjoint({t.id for t in test})
    assert len(train) + len(test) == len(tasks)
    assert {t.category for t in test} == {t.category for t in tasks}
    assert [t.id for t in split_tasks(load_seed_tasks())[1]] == [t.id for t in test]
