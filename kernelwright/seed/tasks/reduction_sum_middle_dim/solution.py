import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <vector>

#define TX 32
#define TY 16

// The input is viewed as [outer, R, inner]; each block owns one outer index and 32 consecutive
// inner indices. Threads with the same ty stride over R (coalesced along inner), then the TY
// partial sums of each column are combined in shared memory.
__global__ void sum_middle_kernel(const float* __restrict__ x, float* __restrict__ y,
                                  long long R, long long inner, long long tiles) {
    __shared__ float part[TY][TX + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long o = blockIdx.x / tiles;
    const long long i = (blockIdx.x % tiles) * TX + tx;
    float acc = 0.0f;
    if (i < inner) {
        const float* p = x + o * R * inner + i;
        for (long long r = ty; r < R; r += TY) acc += p[r * inner];
    }
    part[ty][tx] = acc;
    __syncthreads();
    for (int s = TY / 2; s > 0; s >>= 1) {
        if (ty < s) part[ty][tx] += part[ty + s][tx];
        __syncthreads();
    }
    if (ty == 0 && i < inner) y[o * inner + i] = part[0][tx];
}

torch::Tensor sum_dim_cuda(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    if (dim < 0) dim += x.dim();
    TORCH_CHECK(dim >= 0 && dim < x.dim(), "dim out of range");
    auto xc = x.contiguous();
    long long outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < xc.dim(); ++d) inner *= xc.size(d);
    const long long R = xc.size(dim);
    std::vector<int64_t> out_sizes = xc.sizes().vec();
    out_sizes.erase(out_sizes.begin() + dim);
    auto y = torch::empty(out_sizes, xc.options());
    if (outer == 0 || inner == 0) return y;
    const long long tiles = (inner + TX - 1) / TX;
    const long long blocks = outer * tiles;
    TORCH_CHECK(blocks <= 2147483647LL, "input too large");
    dim3 block(TX, TY);
    sum_middle_kernel<<<(unsigned int)blocks, block>>>(xc.data_ptr<float>(), y.data_ptr<float>(), R, inner, tiles);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "sum_middle_kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim_cuda(torch::Tensor x, int64_t dim);"

_ext = load_inline(
    name="kw_seed_reduction_sum_middle_dim",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["sum_dim_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim_cuda(x, self.dim)
