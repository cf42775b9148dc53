import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <vector>

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

// One block per row of length n: strided loads (coalesced), block-wide sum, divide by n.
__global__ void mean_rows_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const long long row = blockIdx.x;
    const float* p = x + row * n;
    float acc = 0.0f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) acc += p[i];
    acc = block_reduce_sum(acc);
    if (threadIdx.x == 0) y[row] = acc / (float)n;
}

torch::Tensor mean_last_dim_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    auto xc = x.contiguous();
    const long long n = xc.size(-1);
    TORCH_CHECK(n > 0, "cannot take the mean over an empty dimension");
    std::vector<int64_t> out_sizes = xc.sizes().vec();
    out_sizes.pop_back();
    auto y = torch::empty(out_sizes, xc.options());
    const long long rows = xc.numel() / n;
    if (rows == 0) return y;
    TORCH_CHECK(rows <= 2147483647LL, "too many rows");
    const int threads = 256;
    mean_rows_kernel<<<(unsigned int)rows, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "mean_rows_kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = "torch::Tensor mean_last_dim_cuda(torch::Tensor x);"

_ext = load_inline(
    name="kw_seed_reduction_mean_last_dim",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["mean_last_dim_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.mean_last_dim_cuda(x)
