"""The pretraining corpus: installed sources, a stable digest, contamination left out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelwright.base_model.corpus import (
    C_SUFFIXES,
    DEVICE_CODE,
    Selection,
    Source,
    build_corpus,
    exclusion_folders,
    folder_sources,
    installed_sources,
    plan_corpus,
)
from kernelwright.errors import UsageError
from kernelwright.seed import load_seed_tasks

from .conftest import PLANTED


def test_installed_sources_are_torch_extension_code_without_generated_headers() -> None:
    sources = {s.name: s for s in installed_sources()}
    assert {"torch-cuda", "torch-cpp", "cuda-runtime", "torch-nn"} <= set(sources)
    cuda = sources["torch-cuda"].files()
    assert cuda and all(re.search(DEVICE_CODE, p.read_text()) for p in cuda[:50])
    assert not any("ops" in p.relative_to(sources["torch-cpp"].root).parts for p in sources["torch-cpp"].files())
    assert all(p.suffix == ".py" for p in sources["torch-nn"].files())


def test_a_file_that_two_sources_hold_is_taken_once(tmp_path: Path) -> None:
    (tmp_path / "k.cuh").write_text("__global__ void k(float* x) { TORCH_CHECK(x); }\n")
    (tmp_path / "h.h").write_text("int f() { TORCH_CHECK(true); return 0; }\n")
    both = [Source("cuda", tmp_path, C_SUFFIXES, contains=DEVICE_CODE),
            Source("cpp", tmp_path, C_SUFFIXES, contains="TORCH_CHECK")]
    docs = plan_corpus(Selection(max_chars=0), both, []).documents
    assert sorted((d.source, d.path) for d in docs) == [("cpp", "h.h"), ("cuda", "k.cuh")]


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


def test_a_corpus_that_decontamination_empties_names_a_document_and_the_setting(tmp_path: Path) -> None:
    solution = load_seed_tasks()[0].solution
    for i in range(2):  # kernels that share the seed solutions' boilerplate, as synthesized ones do
        (tmp_path / f"kernel_{i}.py").write_text(f"# kernel {i}\n" + solution)
    with pytest.raises(UsageError) as strict:
        build_corpus(Selection(max_chars=0), folder_sources([tmp_path]))
    said = str(strict.value)
    assert "all 2 documents share an n-gram" in said and "kernel_" in said and "--decontam-min-share" in said
    with pytest.raises(UsageError) as shared:  # a whole solution is over any share: no hint to raise it
        build_corpus(Selection(max_chars=0, min_share=0.5), folder_sources([tmp_path]))
    assert "more than 0.5 of the n-grams" in str(shared.value) and "--decontam-min-share" not in str(shared.value)
