"""On a CUDA host: the held-out seed solutions, evaluated as generations, are all correct."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.evaluation.config import EvaluateConfig
from kernelwright.evaluation.metrics import metric_key
from kernelwright.evaluation.stage import run_evaluate
from kernelwright.seed import load_seed_tasks, split_tasks


def held_out_generations(dest: Path) -> list[str]:
    """Each held-out seed task's own solution as `<task_id>/sample_0.py`; returns the task ids."""
    _, test = split_tasks(load_seed_tasks())
    for task in test:
        (dest / task.id).mkdir(parents=True)
        (dest / task.id / "sample_0.py").write_text(task.solution, encoding="utf-8")
    return [t.id for t in test]


def test_held_out_generations_cover_every_category(tmp_path: Path) -> None:
    ids = held_out_generations(tmp_path / "gen")
    cats = {t.category for t in load_seed_tasks() if t.id in ids}
    assert len(ids) == 13 and len(cats) == 12
    assert sorted(p.parent.name for p in (tmp_path / "gen").rglob("sample_0.py")) == sorted(ids)


@pytest.mark.gpu
def test_held_out_seed_solutions_are_all_correct_on_a_gpu(tmp_path: Path) -> None:
    ids = held_out_generations(tmp_path / "gen")
    result = run_evaluate(EvaluateConfig(generations=str(tmp_path / "gen"), out=str(tmp_path / "out"),
                                         workdir=str(tmp_path / "kw"), gate=False))
    wrong = [(r.problem_id, r.verdict.reason, r.verdict.detail[:200]) for r in result.rows if not r.verdict.correct]
    assert wrong == [] and len(result.rows) == len(ids) == 13
    assert result.gpu_verified and result.metrics["fast_0"] == 1.0 and result.metrics["compile_rate"] == 1.0
    cats = {t.category for t in load_seed_tasks() if t.id in ids}
    assert sorted(result.figures.categories) == sorted(cats) and len(cats) == 12
    for cat in cats:
        assert result.metrics[metric_key("fast_0", cat)] == 1.0
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["metrics"]["fast_0"] == 1.0 and "geomean_speedup" in saved["metrics"]
    assert (tmp_path / "out" / "per_category.png").is_file()
