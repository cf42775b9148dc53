"""The NVRTC gate: a device-code rejection that stands for nvcc's is compile_error without a build;
one that may be NVRTC's own gap (a header, a torch namespace, a -D flag) goes on to the build."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.cuda.compile_result import CompileCheckSettings
from kernelwright.cuda.nvrtc import program
from kernelwright.verifier import verify as verify_module
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.nvrtc_gate import nvrtc_outcome, nvrtc_verdict
from kernelwright.verifier.verdict import JUDGE_VERSION, Verdict
from kernelwright.verifier.verify import verify_many

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verify"
HONEST = (FIXTURES / "candidates" / "honest_affine.py").read_text()
KERNEL_LINE = "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
needs_nvrtc = pytest.mark.skipif(program.nvrtc_version() is None, reason="NVRTC does not load here")


def _no_nvrtc() -> None:
    raise ImportError("no NVRTC wheel for this platform")


def _with_line(line: str, source: str = HONEST) -> str:
    assert KERNEL_LINE in source
    return source.replace(KERNEL_LINE, KERNEL_LINE + f"    {line}\n")


@pytest.fixture
def settings(tmp_path: Path) -> CompileCheckSettings:
    return CompileCheckSettings(cache_dir=tmp_path / "cache", host=False, workers=1)


@needs_nvrtc
@pytest.mark.parametrize("line, error", [
    ("float kw_lane = __shfl_down(0.0f, 1);", 'identifier "__shfl_down" is undefined'),
    ("__syncthreads(1);", "too many arguments in function call"),
    ("float* kw_p = 1.5f;", 'a value of type "float" cannot be used to initialize'),
])
def test_a_device_error_is_compile_error_without_a_build(line: str, error: str,
                                                          settings: CompileCheckSettings) -> None:
    verdict = nvrtc_verdict(_with_line(line), settings)
    assert verdict is not None and verdict.reason == "compile_error" and verdict.status == "compile_error"
    assert verdict.detail.startswith("build failed in nvrtc (device code; the nvcc build was skipped): "
                                     "cuda_sources[0]("), verdict.detail
    assert error in verdict.detail


@needs_nvrtc
def test_the_detail_leads_with_the_first_error_not_the_warnings_before_it(settings: CompileCheckSettings) -> None:
    helper = "__device__ float kw_helper(float x) {\n    float kw_q = x * x;\n    return x;\n}\n"  # warns first
    source = _with_line("float kw_t = kw_total;").replace("__global__", helper + "__global__", 1)
    verdict = nvrtc_verdict(source, settings)
    assert verdict is not None and verdict.reason == "compile_error"
    head = verdict.detail.removeprefix("build failed in nvrtc (device code; the nvcc build was skipped): ")
    assert head.startswith("cuda_sources[0]("), verdict.detail
    assert "error: identifier" in head.splitlines()[0] and "warning" not in verdict.detail, verdict.detail


@needs_nvrtc
@pytest.mark.parametrize("change, why", [
    (lambda s: _with_line("float kw_big = std::numeric_limits<float>::max();", s), "uses std:: names"),
    (lambda s: _with_line("at::Half kw_h = at::Half(0.5f);", s), "uses at:: names"),
    (lambda s: _with_line("int kw_tile = KW_TILE;", s).replace('extra_cuda_cflags=["-O3"]',
                                                                 'extra_cuda_cflags=["-O3", "-DKW_TILE=32"]'),
     "extra_cuda_cflags '-DKW_TILE=32'"),
    (lambda s: _with_line("int kw_tile = 1 +;", s).replace('extra_cuda_cflags=["-O3"]', "extra_cuda_cflags=FLAGS"),
     "extra_cuda_cflags not a literal"),
    (lambda s: _with_line("int kw_tile = 1 +;", s).replace('extra_cuda_cflags=["-O3"]', "extra_cuda_cflags=5"),
     "extra_cuda_cflags not a list of strings"),
    (lambda s: _with_line("int kw_tile = 1 +;", s).replace('extra_cuda_cflags=["-O3"]',
                                                          "extra_cuda_cflags=" + "-" * 1500 + "1"),
     "extra_cuda_cflags not a literal"),
    (lambda s: _with_line("int kw_x = 1 +;", s).replace("#include <torch/extension.h>",
                                                          "#include <torch/extension.h>\n#include <limits>"),
     "#include <limits> is not an NVRTC header"),
    (lambda s: _with_line("int kw_x = 1 +;", s).replace("cuda_sources=cuda_source", "cuda_sources=make()")
     .replace("_ext = load_inline(", "def make():\n    return cuda_source\n\n\n_ext = load_inline("),
     "sources guessed from string literals"),
])
def test_a_rejection_nvrtc_may_not_share_with_nvcc_goes_to_the_build(change, why: str,
                                                                      settings: CompileCheckSettings) -> None:
    source = change(HONEST)
    outcome = nvrtc_outcome(source, settings)
    assert outcome is not None and outcome.rejected, outcome
    assert why in outcome.untrusted, outcome.untrusted
    assert nvrtc_verdict(source, settings) is None


@needs_nvrtc
def test_honest_code_and_unavailable_nvrtc_are_not_gated(settings: CompileCheckSettings,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = nvrtc_outcome(HONEST, settings)
    assert outcome is not None and not outcome.rejected
    assert nvrtc_verdict(HONEST, settings) is None
    typo = _with_line("__syncthreads(1);")
    monkeypatch.setattr(program, "load_nvrtc", _no_nvrtc)
    assert nvrtc_verdict(typo, CompileCheckSettings(cache_dir=settings.cache_dir / "other", host=False)) is None


@needs_nvrtc
def test_verify_builds_nothing_for_a_gated_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gated candidate never reaches a worker; the honest one does; the CLI answers without a GPU."""
    typo, honest = tmp_path / "typo.py", tmp_path / "honest.py"
    typo.write_text(_with_line("__syncthreads(1);"))
    honest.write_text(HONEST)
    problem = str(FIXTURES / "problems" / "affine.py")
    built: list[str] = []

    def worker(spec, *_a, **_k) -> Verdict:
        built.append(Path(spec.candidate).name)
        return Verdict.of("ok", "ran")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the gate's result cache
    monkeypatch.setattr(verify_module, "run_worker", worker)
    monkeypatch.setattr(verify_module, "cuda_available", lambda: False)
    cfgs = [VerifyConfig(problem=problem, candidate=str(p), forkserver=False) for p in (typo, honest)]
    got = verify_many(cfgs, jobs=2)
    assert built == ["honest.py"]
    assert got[0].reason == "compile_error" and got[0].judge_version == JUDGE_VERSION
    assert "too many arguments in function call" in got[0].detail
    assert got[1].detail == "ran"
    off = verify_many([VerifyConfig(problem=problem, candidate=str(typo), nvrtc_gate=False, forkserver=False)], 1)
    assert off[0].detail == "ran" and built == ["honest.py", "typo.py"]
    assert main(["verify", "--problem", problem, "--candidate", str(typo)]) == 1  # no GPU needed for this verdict
