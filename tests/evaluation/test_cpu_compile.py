"""The compile rate on a machine without a GPU: NVRTC's device compile, then the whole compile check
(its load_inline sources resolved, the host stage), so that it counts what a GPU build would."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.cuda.nvrtc import program
from kernelwright.evaluation.candidates import Candidate
from kernelwright.evaluation.checking import nvrtc_results, with_host_checks
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
    nvrtc = nvrtc_results(cands)
    assert nvrtc == [True, True, True]  # NVRTC sees the device code only
    assert with_host_checks(cands, nvrtc) == [True, False, False]
