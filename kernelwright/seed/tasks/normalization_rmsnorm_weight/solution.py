import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// Sum over the whole block; every thread gets the result. blockDim.x must be a multiple of 32.
__device__ float block_reduce_sum(float v) {
    __shared__ float warp_part[32];
    __shared__ float total;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_reduce_sum(v);
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = blockDim.x >> 5;
        float t = lane < nwarps ? warp_part[lane] : 0.0f;
        t = warp_reduce_sum(t);
        if (lane == 0) total = t;
    }
    __syncthreads();
    const float r = total;
    __syncthreads();  // the shared slots may be reused by the next call
    return r;
}

// One block per row: mean of squares, inv_rms = 1 / sqrt(ms + eps), then y = x * inv_rms * w.
__global__ void rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                               float* __restrict__ y, long long n, float eps) {
    const long long row = blockIdx.x;
    const float* p = x + row * n;
    float* q = y + row * n;
    float ss = 0.0f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = p[i];
        ss += v * v;
    }
    const float ms = block_reduce_sum(ss) / (float)n;
    const float inv_rms = 1.0f / sqrtf(ms + eps);
    for (long long i = threadIdx.x; i < n; i += blockDim.x) q[i] = p[i] * inv_rms * w[i];
}

torch::Tensor rmsnorm_cuda(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(weight.is_cuda() && weight.scalar_type() == torch::kFloat32, "weight must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    const long long n = xc.size(-1);
    TORCH_CHECK(n > 0, "empty normalized dimension");
    TORCH_CHECK(wc.numel() == n, "weight size must equal the last dimension");
    auto y = torch::empty_like(xc);
    const long long rows = xc.numel() / n;
    if (rows == 0) return y;
    TORCH_CHECK(rows <= 2147483647LL, "too many rows");
    const int threads = 256;
    rmsnorm_kernel<<<(unsigned int)rows, threads>>>(xc.data_ptr<float>(), wc.data_ptr<float>(),
                                                    y.data_ptr<float>(), n, (float)eps);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "rmsnorm_kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = "torch::Tensor rmsnorm_cuda(torch::Tensor x, torch::Tensor weight, double eps);"

_ext = load_inline(
    name="kw_seed_normalization_rmsnorm_weight",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["rmsnorm_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm_cuda(x, self.weight, self.eps)
