"""The compile rate on a machine without a GPU: NVRTC's device compile, then the whole compile check
(its load_inline sources resolved, the host stage), so that it counts what a GPU build would."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.cuda.nvrtc import program
from kernelwright.evaluation.candidates import Candidate
from kernelwright.evaluation.checking import host_checks, not_verified, nvrtc_checks
from kernelwright.seed import load_seed_tasks
from kernelwright.verifier.problems import Problem

pytestmark = pytest.mark.skipif(program.nvrtc_version() is None, reason="NVRTC does not load here")
TASK = next(t for t in load_seed_tasks() if t.id == "elementwise_elu")


def _candidates(tmp_path: Path, sources: dict[str, str]) -> list[Candidate]:
    problem = Problem(id=TASK.id, path=Path(TASK.path) / "reference.py", category="elementwise", dtype="float32")
    out = []
    for i, (name, text) in enumerate(sources.items()):
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        out.append(Candidate(problem=problem, sample=i, path=path))
    return out


def test_device_code_that_compiles_is_not_enough_without_a_gpu(tmp_path: Path) -> None:
    honest = TASK.solution
    unbound = honest.replace("cuda_sources=cuda_source", "cuda_sources=cuda_src")  # NameError at import
    host = honest.replace("xc.numel()", "xc.numel_typo()")  # the launcher's host code does not compile
    assert unbound != honest and host != honest
    cands = _candidates(tmp_path, {"honest": honest, "unbound": unbound, "host": host})
    nvrtc = nvrtc_checks(cands)
    assert [c.ok for c in nvrtc] == [True, True, True]  # NVRTC sees the device code only
    whole = host_checks(cands, nvrtc)
    assert [c.ok for c in whole] == [True, False, False]
    assert whole[2].why.startswith("the host code does not compile (host compiler): ") and "numel_typo" in whole[2].why
    verdict = not_verified(whole[2], "no GPU here")
    assert verdict.reason == "compile_error" and verdict.detail == whole[2].why


def test_a_device_compile_error_names_nvrtc_and_its_first_error(tmp_path: Path) -> None:
    broken = TASK.solution.replace("__global__ void", "__global__ void undeclared_type_t x;\n__global__ void", 1)
    assert broken != TASK.solution
    (check,) = nvrtc_checks(_candidates(tmp_path, {"broken": broken}))
    assert not check.ok and check.why.startswith("the device code does not compile (NVRTC): ")
    assert "error" in check.why and "\n" not in check.why
