import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// One block per row (grid-stride over rows). Every thread reads the same v[r]
// (a broadcast load) and the columns are walked coalesced.
__global__ void rsqrt_row_scale_kernel(const float* __restrict__ x, const float* __restrict__ v,
                                       const float* __restrict__ gamma, float* __restrict__ out,
                                       float eps, long long rows, long long cols) {
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        float s = rsqrtf(v[r] + eps);
        long long base = r * cols;
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
            out[base + c] = x[base + c] * s * gamma[c];
        }
    }
}

torch::Tensor rsqrt_row_scale_cuda(torch::Tensor x, torch::Tensor v, torch::Tensor gamma, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(v.is_cuda() && v.scalar_type() == torch::kFloat32, "v must be a float32 CUDA tensor");
    TORCH_CHECK(gamma.is_cuda() && gamma.scalar_type() == torch::kFloat32, "gamma must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() == 2, "x must be 2-D (rows, cols)");
    TORCH_CHECK(v.dim() == 1 && v.size(0) == x.size(0), "v must have shape (rows,)");
    TORCH_CHECK(gamma.dim() == 1 && gamma.size(0) == x.size(1), "gamma must have shape (cols,)");
    auto xc = x.contiguous();
    auto vc = v.contiguous();
    auto gc = gamma.contiguous();
    auto out = torch::empty_like(xc);
    long long rows = xc.size(0), cols = xc.size(1);
    if (rows == 0 || cols == 0) return out;
    const int threads = 256;
    int blocks = (int)std::min<long long>(rows, 65535LL);
    rsqrt_row_scale_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), vc.data_ptr<float>(), gc.data_ptr<float>(),
                                                out.data_ptr<float>(), (float)eps, rows, cols);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "rsqrt_row_scale_kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

cpp_source = "torch::Tensor rsqrt_row_scale_cuda(torch::Tensor x, torch::Tensor v, torch::Tensor gamma, double eps);"

_ext = load_inline(
    name="kw_seed_math_rsqrt_row_scale",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["rsqrt_row_scale_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_cols: int, eps: float):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(1.0 + 0.1 * torch.randn(num_cols))

    def forward(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return _ext.rsqrt_row_scale_cuda(x, v, self.gamma, self.eps)
