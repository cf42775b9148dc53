from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from kernelwright.errors import UsageError
from kernelwright.evaluation.candidates import suite_root
from kernelwright.seed import load_seed_tasks
from kernelwright.verifier.problems import load_problem, load_problems

CATEGORIES = {"elementwise", "math", "reduction", "normalization", "softmax", "matmul", "convolution", "pooling",
              "loss", "indexing", "fusion", "quantization"}


def test_suite_size_categories_shapes_and_roofline() -> None:
    problems = load_problems(suite_root())
    assert len(problems) >= 40
    assert CATEGORIES <= set(Counter(p.category for p in problems))
    for p in problems:
        assert len(p.shapes) >= 3, p.id
        assert p.has_roofline, p.id
        assert p.category == p.path.parent.name


def test_suite_has_shapes_off_the_power_of_two_grid() -> None:
    for p in load_problems(suite_root()):
        sizes = [v for s in p.shapes for v in s.values() if isinstance(v, int) and v > 1]
        assert any(v % 32 for v in sizes), p.id


def _ops(source: str) -> str:
    tree = ast.parse(source)
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    return ast.dump(model)


def test_suite_is_disjoint_from_seed_corpus() -> None:
    seed_models = {_ops(t.reference) for t in load_seed_tasks()}
    seed_ids = {t.id.split("_", 1)[1] for t in load_seed_tasks()}
    for p in load_problems(suite_root()):
        assert _ops(p.path.read_text()) not in seed_models, p.id
        assert p.path.stem not in seed_ids, p.id


def test_kernelbench_levels_and_flat_folders(tmp_path: Path) -> None:
    src = (Path(__file__).parent.parent / "fixtures" / "verify" / "problems" / "relu_nonneg.py").read_text()
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "19_ReLU.py").write_text(src)
    (tmp_path / "flat.py").write_text(src)
    problems = {p.id: p for p in load_problems(tmp_path)}
    assert set(problems) == {"level1/19_ReLU", "flat"}
    assert problems["flat"].shapes == [{}] and not problems["flat"].has_roofline


def test_bad_problem_files_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text("class Model: pass\n")
    with pytest.raises(UsageError, match="get_inputs"):
        load_problem(tmp_path / "p.py")
    with pytest.raises(UsageError, match="not found"):
        load_problem(tmp_path / "missing.py")
    (tmp_path / "s.py").write_text("def broken(:\n")
    with pytest.raises(UsageError, match="not valid Python"):
        load_problem(tmp_path / "s.py")


@pytest.mark.gpu
def test_suite_references_run_on_every_shape_on_gpu() -> None:
    """Each suite reference runs on every shape: finite output, and it depends on the input."""
    import torch

    from kernelwright.verifier.inputs import draw_inputs
    from kernelwright.verifier.isolation import import_file

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    failures, ran = [], 0
    for i, p in enumerate(load_problems(suite_root())):
        mod = import_file(p.path, f"kw_suite_{i}")
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs()).cuda().eval()
        for shape in p.shapes:
            with torch.no_grad():
                outs = [model(*draw_inputs(mod, shape, seed, "default")) for seed in (0, 1)]
            torch.cuda.synchronize()
            ran += 1
            if not all(torch.isfinite(o.float()).all() for o in outs):
                failures.append((p.id, shape, "non-finite output"))
            elif torch.equal(outs[0], outs[1]):
                failures.append((p.id, shape, "output does not depend on the input"))
        del model
        torch.cuda.empty_cache()
    assert ran >= 150 and not failures, failures
