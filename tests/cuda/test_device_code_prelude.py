"""The plain NVRTC path (evaluation's nvrtc_ok, curation's NVRTC filter) sees what load_inline's implicit
torch header shows nvcc, also in a CUDA source that includes nothing itself."""

from __future__ import annotations

from kernelwright.cuda.device_code import device_source
from kernelwright.cuda.nvrtc import compile_device_code

NO_INCLUDES = r"""
__global__ void row_max(const float* x, float* out, int n) {
    float best = -INFINITY;
    for (int i = threadIdx.x; i < n; i += blockDim.x) best = fmaxf(best, x[i]);
    out[threadIdx.x] = best > FLT_MAX ? FLT_MAX : best;
}
torch::Tensor run(torch::Tensor x) {
    auto out = torch::empty({256}, x.options());
    row_max<<<1, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    return out;
}
"""


def test_a_source_without_includes_sees_the_implicit_torch_headers() -> None:
    assert device_source(NO_INCLUDES).startswith("#include <kw_torch_prelude.h>\n")
    result = compile_device_code(NO_INCLUDES)
    assert result.ok, result.log
