import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// Grid-stride over the (B, T, D) output. cond is indexed as (B, 1, D) and y as (T, D),
// i.e. the broadcast is resolved by index arithmetic, never materialised.
__global__ void where_broadcast_kernel(const bool* __restrict__ cond, const float* __restrict__ x,
                                       const float* __restrict__ y, float* __restrict__ out,
                                       long long T, long long D, long long total) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    long long TD = T * D;
    for (; i < total; i += stride) {
        long long b = i / TD;
        long long td = i - b * TD;     // t * D + d
        long long d = td % D;
        out[i] = cond[b * D + d] ? x[i] : y[td];
    }
}

torch::Tensor where_broadcast_cuda(torch::Tensor cond, torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(cond.is_cuda() && cond.scalar_type() == torch::kBool, "cond must be a bool CUDA tensor");
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(y.is_cuda() && y.scalar_type() == torch::kFloat32, "y must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() == 3, "x must be 3-D (B, T, D)");
    long long B = x.size(0), T = x.size(1), D = x.size(2);
    TORCH_CHECK(cond.dim() == 3 && cond.size(0) == B && cond.size(1) == 1 && cond.size(2) == D,
                "cond must have shape (B, 1, D)");
    TORCH_CHECK(y.dim() == 2 && y.size(0) == T && y.size(1) == D, "y must have shape (T, D)");
    auto cc = cond.contiguous();
    auto xc = x.contiguous();
    auto yc = y.contiguous();
    auto out = torch::empty_like(xc);
    long long total = xc.numel();
    if (total == 0) return out;
    const int threads = 256;
    int blocks = (int)std::min<long long>((total + threads - 1) / threads, 65535LL);
    where_broadcast_kernel<<<blocks, threads>>>(cc.data_ptr<bool>(), xc.data_ptr<float>(), yc.data_ptr<float>(),
                                                out.data_ptr<float>(), T, D, total);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "where_broadcast_kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

cpp_source = "torch::Tensor where_broadcast_cuda(torch::Tensor cond, torch::Tensor x, torch::Tensor y);"

_ext = load_inline(
    name="kw_seed_indexing_where_broadcast",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["where_broadcast_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, cond: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _ext.where_broadcast_cuda(cond, x, y)
