import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// Input viewed as [outer, C, inner] with the softmax along C. One thread per (outer, inner)
// position; consecutive threads take consecutive inner positions, so every load/store of a
// channel slice is coalesced. Each thread makes three passes over its C values.
__global__ void softmax_channel_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long outer, long long C, long long inner) {
    const long long total = outer * inner;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        const long long o = t / inner;
        const long long i = t % inner;
        const float* p = x + o * C * inner + i;
        float* q = y + o * C * inner + i;
        float m = -INFINITY;
        for (long long c = 0; c < C; ++c) m = fmaxf(m, p[c * inner]);
        float s = 0.0f;
        for (long long c = 0; c < C; ++c) s += expf(p[c * inner] - m);
        const float inv = 1.0f / s;
        for (long long c = 0; c < C; ++c) q[c * inner] = expf(p[c * inner] - m) * inv;
    }
}

torch::Tensor softmax_dim1_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() >= 2, "x must be at least 2-D");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long outer = xc.size(0), C = xc.size(1);
    long long inner = 1;
    for (int64_t d = 2; d < xc.dim(); ++d) inner *= xc.size(d);
    const long long total = outer * inner;
    if (total == 0 || C == 0) return y;
    const int threads = 256;
    const int blocks = (int)std::min<long long>((total + threads - 1) / threads, 65535LL);
    softmax_channel_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), outer, C, inner);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "softmax_channel_kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = "torch::Tensor softmax_dim1_cuda(torch::Tensor x);"

_ext = load_inline(
    name="kw_seed_softmax_dim1_4d",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_dim1_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_dim1_cuda(x)
