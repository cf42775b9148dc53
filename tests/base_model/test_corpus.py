"""The pretraining corpus: installed sources, a stable digest, contamination left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.base_model.corpus import (
    Selection,
    build_corpus,
    exclusion_folders,
    folder_sources,
    installed_sources,
    plan_corpus,
)
from kernelwright.errors import UsageError
from kernelwright.seed import load_seed_tasks

from .conftest import PLANTED


def test_installed_sources_hold_torch_headers_and_the_standard_library() -> None:
    names = {s.name for s in installed_sources()}
    assert {"torch-include", "python-stdlib"} <= names
    stdlib = next(s for s in installed_sources() if s.name == "python-stdlib")
    assert not any("site-packages" in p.parts for p in stdlib.files()[:200])


def test_a_planted_evaluation_problem_and_a_seed_solution_are_excluded(code_dir: Path) -> None:
    solution = load_seed_tasks()[0].solution
    (code_dir / "copied_seed_solution.py").write_text("# a copy\n" + solution)
    corpus = build_corpus(Selection(max_chars=0), folder_sources([code_dir]))
    kept = {d.path for d in corpus.documents}
    assert {f"code:{PLANTED}", "code:copied_seed_solution.py"} <= set(corpus.excluded)
    assert PLANTED not in kept and "copied_seed_solution.py" not in kept
    assert "textwrap.py" in kept and len(kept) == 6
    assert "suite/" in corpus.excluded[f"code:{PLANTED}"] and "(1.00)" in corpus.excluded[f"code:{PLANTED}"]


def test_the_seed_corpus_and_suite_are_the_exclusion_set() -> None:
    seed, suite = exclusion_folders()[:2]
    assert (seed / load_seed_tasks()[0].path.name / "solution.py").is_file()
    assert any(suite.rglob("*.py"))


def test_digest_is_stable_and_follows_the_text_and_the_settings(code_dir: Path) -> None:
    sources = folder_sources([code_dir])
    a = plan_corpus(Selection(max_chars=0), sources).digest
    assert plan_corpus(Selection(max_chars=0), sources).digest == a
    assert plan_corpus(Selection(max_chars=0, min_share=0.1), sources).digest != a
    (code_dir / "heapq.py").write_text((code_dir / "heapq.py").read_text() + "\n# changed\n")
    assert plan_corpus(Selection(max_chars=0), sources).digest != a


def test_max_chars_takes_documents_from_every_source_in_turn(code_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "headers"
    other.mkdir()
    for i in range(5):
        (other / f"h{i}.cuh").write_text(f"__global__ void k{i}(float* x) {{ x[threadIdx.x] = {i}; }}\n" * 40)
    corpus = plan_corpus(Selection(max_chars=20_000), folder_sources([code_dir, other]))
    assert set(corpus.by_source()) == {"code", "headers"}
    assert corpus.chars < 20_000 + max(len(d.text) for d in corpus.documents)


def test_a_missing_source_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--source"):
        folder_sources([tmp_path / "nope"])
