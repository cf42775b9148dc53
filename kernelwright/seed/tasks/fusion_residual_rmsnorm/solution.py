import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

// One block per row. h = x + r is kept in dynamic shared memory between the two passes.
__global__ void residual_rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ r,
                                        const float* __restrict__ w, float* __restrict__ y,
                                        int hidden, float eps) {
    extern __shared__ float hbuf[];
    __shared__ float warp_sums[32];
    const long long base = (long long)blockIdx.x * hidden;
    float ss = 0.0f;
    for (int k = threadIdx.x; k < hidden; k += blockDim.x) {
        float h = x[base + k] + r[base + k];
        hbuf[k] = h;
        ss += h * h;
    }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (lane == 0) warp_sums[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        ss = (lane < nwarps) ? warp_sums[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (lane == 0) warp_sums[0] = ss;
    }
    __syncthreads();
    const float inv_rms = 1.0f / sqrtf(warp_sums[0] / (float)hidden + eps);
    for (int k = threadIdx.x; k < hidden; k += blockDim.x) {
        y[base + k] = (hbuf[k] * inv_rms) * w[k];
    }
}

torch::Tensor residual_rmsnorm_cuda(torch::Tensor x, torch::Tensor residual, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(residual.is_cuda() && residual.scalar_type() == torch::kFloat32, "residual must be a float32 CUDA tensor");
    TORCH_CHECK(weight.is_cuda() && weight.scalar_type() == torch::kFloat32, "weight must be a float32 CUDA tensor");
    TORCH_CHECK(x.sizes() == residual.sizes(), "x and residual must have the same shape");
    TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1), "weight must match the last dim");
    auto xc = x.contiguous();
    auto rc = residual.contiguous();
    auto wc = weight.contiguous();
    const int hidden = (int)xc.size(-1);
    TORCH_CHECK(hidden > 0 && hidden <= 12288, "hidden size must be in [1, 12288]");
    auto y = torch::empty_like(xc);
    long long rows = xc.numel() / hidden;
    if (rows == 0) return y;
    TORCH_CHECK(rows <= 2147483647LL, "too many rows");
    const int threads = 256;
    size_t smem = (size_t)hidden * sizeof(float);
    residual_rmsnorm_kernel<<<(unsigned)rows, threads, smem>>>(xc.data_ptr<float>(), rc.data_ptr<float>(),
                                                               wc.data_ptr<float>(), y.data_ptr<float>(),
                                                               hidden, (float)eps);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "residual_rmsnorm_kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = "torch::Tensor residual_rmsnorm_cuda(torch::Tensor x, torch::Tensor residual, torch::Tensor weight, double eps);"

_ext = load_inline(
    name="kw_seed_fusion_residual_rmsnorm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["residual_rmsnorm_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden) + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return _ext.residual_rmsnorm_cuda(x, residual, self.weight, self.eps)
