"""PyTorch compute in a candidate's C++/CUDA host code: what is reported and what never is."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.cuda.torch_calls import (
    ALLOWED_OPS,
    COMPUTE_OPS,
    compute_op,
    cpp_sources,
    scan_candidate,
    scan_cpp,
)
from kernelwright.seed import load_seed_tasks

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verify" / "candidates"
KERNEL = "__global__ void k(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = 0.0f; }\n"


def _host(body: str, prelude: str = "") -> str:
    return (f"#include <torch/extension.h>\n{prelude}{KERNEL}"
            f"torch::Tensor run(torch::Tensor x, torch::Tensor w, torch::Tensor input) {{\n{body}\n"
            "  k<<<1, 32>>>(x.data_ptr<float>(), 32);\n  return x;\n}\n")


def _ops(source: str) -> list[tuple[str, str]]:
    return [(c.op, c.call) for c in scan_cpp(source)]


@pytest.mark.parametrize(("body", "expected"), [
    ("auto y = at::matmul(x, w);", ("matmul", "at::matmul")),
    ("auto y = torch::mm(x, w);", ("mm", "torch::mm")),
    ("auto y = at::conv2d(x, w);", ("conv2d", "at::conv2d")),
    ("float s = x.sum().item<float>();", ("sum", "x.sum")),
    ("auto y = input.softmax(-1);", ("softmax", "input.softmax")),
    ("auto y = torch::nn::functional::linear(x, w);", ("linear", "torch::nn::functional::linear")),
    ("auto y = at::native::softmax(x, 1, false);", ("softmax", "at::native::softmax")),
    ("auto y = ::at::bmm(x, w);", ("bmm", "::at::bmm")),
    ("x->relu_();", ("relu", "x->relu_")),
    ("at::mm_out(x, x, w);", ("mm", "at::mm_out")),
    ("auto y = at::_log_softmax(x, 1, false);", ("log_softmax", "at::_log_softmax")),
    ("auto y = at::conv_transpose2d(x, w);", ("conv_transpose2d", "at::conv_transpose2d")),
])
def test_compute_calls_are_reported(body: str, expected: tuple[str, str]) -> None:
    assert _ops(_host(body)) == [expected]


@pytest.mark.parametrize("body", [
    "auto y = torch::empty_like(x);",
    "auto y = at::zeros({4, 4}, x.options());",
    "auto y = x.contiguous();",
    "auto y = x.view({-1}).reshape({2, -1}).permute({1, 0}).transpose(0, 1).unsqueeze(0);",
    "float* p = x.data_ptr<float>(); int64_t n = x.numel() + x.size(0) + x.stride(0) + x.dim();",
    "TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, \"x\");",
    "auto s = at::cuda::getCurrentCUDAStream(); auto y = x.to(x.device()).cuda(); y.copy_(x); y.zero_();",
    "auto y = torch::randn_like(x); auto z = at::full_like(x, 1.0); z.fill_(2.0);",
    "int g = std::max(1, (int)x.size(0) / 256); float m = std::numeric_limits<float>::max();",
    "// at::matmul(x, w) is what the kernel replaces\n  /* x.sum() */",
    "const char* why = \"at::matmul(x, w) and x.sum()\";",
])
def test_allocation_views_metadata_comments_and_strings_are_not(body: str) -> None:
    assert _ops(_host(body)) == []


def test_device_code_max_and_math_builtins_are_not_torch() -> None:
    device = """
__device__ __forceinline__ float clampf(float a) { return max(0.0f, fminf(a, fmaxf(a, 1.0f))); }
template <typename T> __global__ void red(const T* x, T* y, int n) {
    T m = x[0]; for (int i = 1; i < n; ++i) m = max(m, x[i]); y[0] = exp(m) + sqrt(m) + tanh(m);
}
struct Op { __host__ __device__ float operator()(float4 v) const { return v.x; } };
"""
    assert _ops(_host("auto y = torch::empty_like(x);", prelude=device)) == []


def test_aliases_using_directives_and_macro_bodies() -> None:
    aliased = _host("auto y = F::linear(x, w);", prelude="namespace F = torch::nn::functional;\n")
    assert _ops(aliased) == [("linear", "F::linear")]
    using = _host("auto y = matmul(x, w); int g = max(1, 2);", prelude="using namespace at;\n")
    assert _ops(using) == [("matmul", "matmul")]  # max: also std::max / CUDA max
    own = _host("auto y = matmul(x, w);", prelude="using namespace torch;\nint matmul(int a, int b) { return a; }\n")
    assert _ops(own) == []
    macro = _host("auto y = MM(x, w);", prelude="#define MM(a, b) at::matmul(a, b)\n")
    assert _ops(macro) == [("matmul", "at::matmul")]


def test_compute_op_names_and_the_lists() -> None:
    assert not COMPUTE_OPS & ALLOWED_OPS
    assert compute_op("add_") == "add" and compute_op("cudnn_convolution") == "convolution"
    assert compute_op("linalg_vector_norm") == "vector_norm" and compute_op("conv3d") == "conv3d"
    assert all(compute_op(n) is None for n in ("empty_like", "zero_", "copy_", "convert", "data_ptr", "randn_like"))


CANDIDATE = '''
import torch
from torch.utils.cpp_extension import load_inline
"""A docstring that says at::matmul(a, b) is not used."""
cuda_src = r"""
__global__ void noop(float* y) { y[0] = 0.0f; }
void launch(torch::Tensor y) { noop<<<1, 1>>>(y.data_ptr<float>()); }
"""
cpp_src = """
#include <torch/extension.h>
void launch(torch::Tensor y);
torch::Tensor run(torch::Tensor a, torch::Tensor b) {
    auto y = at::matmul(a, b);
    launch(y);
    return y.sum(1);
}
"""
ext = load_inline(name="e", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["run"])
class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return ext.run(a, b)
'''


def test_a_candidate_is_scanned_in_every_cpp_source_with_its_file_lines() -> None:
    scan = scan_candidate(CANDIDATE)
    assert [(c.op, c.line) for c in scan.calls] == [("matmul", 13), ("sum", 15)]
    assert CANDIDATE.splitlines()[12].strip().startswith("auto y = at::matmul")
    assert scan.detail == "host code calls PyTorch compute: at::matmul (line 13), y.sum (line 15)"
    assert len(cpp_sources(CANDIDATE)) == 2  # the docstring is prose, not C++
    assert not scan_candidate("def broken(:\n").flagged and scan_candidate("x = 1\n").detail == ""


def test_honest_seed_solutions_and_verify_fixtures_are_not_flagged() -> None:
    tasks = load_seed_tasks()
    assert len(tasks) == 72
    flagged = {i: scan_candidate(t.solution).detail for i, t in enumerate(tasks) if scan_candidate(t.solution).flagged}
    assert flagged == {}
    assert all(cpp_sources(t.solution) for t in tasks)
    fixtures = {p.name: scan_candidate(p.read_text()).detail for p in sorted(FIXTURES.glob("*.py"))}
    assert fixtures and not any(fixtures.values()), fixtures
