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

// One block per row: mean, biased variance (two-pass), then y = (x - mean) * rstd * w + b.
__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y,
                                 long long n, float eps) {
    const long long row = blockIdx.x;
    const float* p = x + row * n;
    float* q = y + row * n;
    float s = 0.0f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) s += p[i];
    const float mean = block_reduce_sum(s) / (float)n;
    float ss = 0.0f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        const float d = p[i] - mean;
        ss += d * d;
    }
    const float var = block_reduce_sum(ss) / (float)n;
    const float rstd = 1.0f / sqrtf(var + eps);
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        q[i] = (p[i] - mean) * rstd * w[i] + b[i];
    }
}

torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(weight.is_cuda() && weight.scalar_type() == torch::kFloat32, "weight must be a float32 CUDA tensor");
    TORCH_CHECK(bias.is_cuda() && bias.scalar_type() == torch::kFloat32, "bias must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const long long n = xc.size(-1);
    TORCH_CHECK(n > 0, "empty normalized dimension");
    TORCH_CHECK(wc.numel() == n && bc.numel() == n, "weight/bias size must equal the last dimension");
    auto y = torch::empty_like(xc);
    const long long rows = xc.numel() / n;
    if (rows == 0) return y;
    TORCH_CHECK(rows <= 2147483647LL, "too many rows");
    const int threads = 256;
    layernorm_kernel<<<(unsigned int)rows, threads>>>(xc.data_ptr<float>(), wc.data_ptr<float>(),
                                                      bc.data_ptr<float>(), y.data_ptr<float>(), n, (float)eps);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "layernorm_kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = "torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

_ext = load_inline(
    name="kw_seed_normalization_layernorm_affine",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["layernorm_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_size: int, eps: float):
        super().__init__()
        self.normalized_size = normalized_size
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(normalized_size))
        self.bias = nn.Parameter(torch.randn(normalized_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layernorm_cuda(x, self.weight, self.bias, self.eps)
