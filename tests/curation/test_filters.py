"""Filters: kernel present, exact and near duplicates, NVRTC (cached), and counts that add up."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelwright.code_norm import code_tokens
from kernelwright.cuda.static_checks import check_source
from kernelwright.curation.filters import FilterReport, FilterSettings, run_filters
from kernelwright.curation.near_dup import near_duplicates
from kernelwright.prompting import completion_text
from kernelwright.seed import load_seed_tasks

GOOD = '''
import torch
from torch.utils.cpp_extension import load_inline
src = r"""
__global__ void scale_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
torch::Tensor scale(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="e", cpp_sources="torch::Tensor scale(torch::Tensor x);", cuda_sources=src,
                  functions=["scale"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.scale(x)
'''
CUPY = '''
import cupy as cp
import torch
kernel = cp.RawKernel(r"""extern "C" __global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * x[i]; }""", "twice")
class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        kernel(((x.numel() + 255) // 256,), (256,), (x, y, x.numel()))
        return y
'''


@dataclass(frozen=True)
class S:
    id: str
    completion: str


def _s(key: str, code: str) -> S:
    return S(key, completion_text(code))


def _settings(tmp_path: Path, **kw) -> FilterSettings:
    return FilterSettings(cache_dir=tmp_path / "nvrtc", workers=1, **kw)


def test_kernel_must_be_built_launched_and_called() -> None:
    assert check_source(GOOD, require_call=True).ok
    assert check_source(CUPY, require_call=True).ok
    never_launched = GOOD.replace("scale_kernel<<<(n + 255) / 256, 256>>>", "other_fn")
    assert "never launched" in check_source(never_launched).by_reason["no_kernel"][0]
    not_called = GOOD.replace("return ext.scale(x)", "return torch.empty_like(x)")
    assert check_source(not_called).ok  # verification sees this at run time
    assert "never called" in check_source(not_called, require_call=True).by_reason["no_kernel"][0]
    not_built = GOOD.replace("ext = load_inline(", "ext = dict(")
    assert check_source(not_built).reasons == ["no_kernel"]
    torch_load = GOOD.replace("load_inline(", "torch.load(")
    assert "no_kernel" in check_source(torch_load).reasons


def test_near_duplicates_are_removed_once() -> None:
    renamed = GOOD.replace("y[i] = 2.0f * x[i]", "y[i] = 2.0f * x[i] + 0.0f")
    other = load_seed_tasks()[0].solution
    a, b, c = code_tokens(GOOD), code_tokens(renamed), code_tokens(other)
    found = near_duplicates([("a", a), ("b", b), ("c", c)], threshold=0.85)
    assert set(found) == {"b"} and found["b"].of == "a" and found["b"].jaccard >= 0.85
    assert near_duplicates([("a", a), ("b", b)], threshold=0.99) == {}


def test_filters_count_every_removal_and_reason(tmp_path: Path) -> None:
    commented = GOOD.replace("import torch\n", "import torch  # a comment\n\n")
    guarded = "        try:\n            return ext.scale(x)\n        except Exception:\n            return x * 2"
    fallback = GOOD.replace("        return ext.scale(x)", guarded)
    broken = load_seed_tasks()[1].solution.replace("threadIdx.x", "threadIdx.q", 1)
    near = GOOD.replace("y[i] = 2.0f * x[i]", "y[i] = 2.0f * x[i] + 0.0f")
    samples = [_s("good", GOOD), _s("dup", commented), _s("fallback", fallback),
               _s("nokernel", "class ModelNew:\n  pass"), _s("broken", broken), _s("near", near), _s("cupy", CUPY),
               _s("dirty", GOOD.replace("2.0f", "3.0f"))]
    report = FilterReport(input_rows=len(samples) + 1, parse_errors={"row9": "not JSON"})
    kept, report = run_filters(samples, _settings(tmp_path), {"dirty": "level1/1_x (1.00)"}, report)
    removed = {k: v for k, v in report.removed.items() if v}
    assert removed == {"exact_duplicate": ["dup"], "fallback_try_except": ["fallback"], "no_kernel": ["nokernel"],
                       "contaminated": ["dirty"], "near_duplicate": ["near"], "nvrtc_error": ["broken"]}
    assert [s.id for s in kept] == ["good", "cupy"] and report.kept == 2
    d = report.as_dict()
    assert d["input_rows"] == d["kept"] + d["parse_errors"]["count"] + sum(v["count"] for v in d["removed"].values())
    assert "no member \"q\"" in d["removed"]["nvrtc_error"]["details"]["broken"]
    assert d["removed"]["near_duplicate"]["details"]["near"].startswith("~good")
    assert "fallback" in d["flagged"]["fallback_try_except"]["ids"]


def test_nvrtc_results_are_cached_on_disk(tmp_path: Path) -> None:
    samples = [_s("a", GOOD), _s("b", GOOD.replace("2.0f", "4.0f"))]
    settings = FilterSettings(cache_dir=tmp_path / "nvrtc", workers=2, near_dup_threshold=2.0)
    _, first = run_filters(samples, settings)
    assert first.stats == {"nvrtc_compiled": 2, "nvrtc_cache_hits": 0}
    assert len(list((tmp_path / "nvrtc" / "results").rglob("*.json"))) == 2
    kept, second = run_filters(samples, settings)
    assert second.stats == {"nvrtc_compiled": 0, "nvrtc_cache_hits": 2} and len(kept) == 2


def test_torch_compute_in_the_host_code_is_removed_with_its_own_reason(tmp_path: Path) -> None:
    from kernelwright.curation.config import CurateConfig

    wrapper = GOOD.replace("auto y = torch::empty_like(x);", "auto y = at::matmul(x, x).contiguous();")
    honest = load_seed_tasks()[0].solution
    samples = [_s("matmul", wrapper), _s("honest", honest)]
    settings = _settings(tmp_path, nvrtc=False, near_dup_threshold=2.0)
    kept, report = run_filters(samples, settings)
    assert [s.id for s in kept] == ["honest"]
    assert {k: v for k, v in report.removed.items() if v} == {"torch_compute_in_cuda": ["matmul"]}
    detail = report.as_dict()["removed"]["torch_compute_in_cuda"]["details"]["matmul"]
    assert detail == "host code calls PyTorch compute: at::matmul (line 9)"  # of the extracted code
    assert report.as_dict()["flagged"]["torch_compute_in_cuda"]["ids"] == ["matmul"]
    off = _settings(tmp_path, nvrtc=False, near_dup_threshold=2.0, torch_compute_filter=False)
    assert len(run_filters(samples, off)[0]) == 2
    assert CurateConfig(torch_compute_filter=False).filters(tmp_path).torch_compute_filter is False


def test_pytorch_compute_in_model_new_goes_to_the_gpu_in_evaluation_but_is_filtered_in_curation(
        tmp_path: Path) -> None:
    """evaluate's pre-verdict lets it through (the run-time share decides, and the verdict carries
    the warning); curation removes it as fallback_torch_op."""
    from kernelwright.evaluation.candidates import Candidate
    from kernelwright.evaluation.checking import check_candidates, pre_verdict
    from kernelwright.verifier.config import VerifyConfig
    from kernelwright.verifier.problems import load_problem
    from kernelwright.verifier.verdict import Verdict

    fixtures = Path(__file__).parent.parent / "fixtures" / "verify"
    path = fixtures / "candidates" / "fallback_torch_op.py"
    cand = Candidate(problem=load_problem(fixtures / "problems" / "affine_large.py"), sample=0, path=path)
    assert pre_verdict(cand) is None
    fake = Verdict.of("fallback_runtime", "only 3% of GPU time in the candidate's kernels")
    rows = check_candidates([cand], VerifyConfig(), 1, True, lambda cfgs, _jobs: [fake for _ in cfgs])
    assert rows[0].gpu_verified and rows[0].verdict.reason == "fallback_runtime"
    assert rows[0].verdict.warnings == ["ModelNew calls PyTorch compute: torch.add (line 28), torch.mul (line 28)"]
    kept, report = run_filters([_s("torch_op", path.read_text())], _settings(tmp_path, nvrtc=False))
    assert kept == [] and report.removed["fallback_torch_op"] == ["torch_op"]
