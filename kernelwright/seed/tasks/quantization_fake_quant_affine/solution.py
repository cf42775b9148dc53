import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void fake_quant_kernel(const float* __restrict__ x, float* __restrict__ y, long long n,
                                  float scale, float inv_scale, float zero_point, float qmin, float qmax) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float q = rintf(x[i] * inv_scale) + zero_point;   // round half to even, like torch.round
        q = fminf(fmaxf(q, qmin), qmax);
        y[i] = (q - zero_point) * scale;
    }
}

torch::Tensor fake_quant_cuda(torch::Tensor x, double scale, int64_t zero_point, int64_t quant_min, int64_t quant_max) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(scale > 0.0 && quant_min <= quant_max, "invalid quantization parameters");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long long n = xc.numel();
    if (n == 0) return y;
    const double inv_scale = 1.0 / scale;   // same double reciprocal as the reference, then rounded to float
    const int threads = 256;
    int blocks = (int)std::min<long long>((n + threads - 1) / threads, 65535LL);
    fake_quant_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n, (float)scale,
                                           (float)inv_scale, (float)zero_point, (float)quant_min, (float)quant_max);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "fake_quant_kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = "torch::Tensor fake_quant_cuda(torch::Tensor x, double scale, int64_t zero_point, int64_t quant_min, int64_t quant_max);"

_ext = load_inline(
    name="kw_seed_quantization_fake_quant_affine",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["fake_quant_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, scale: float, zero_point: int, quant_min: int, quant_max: int):
        super().__init__()
        self.scale = scale
        self.inv_scale = 1.0 / scale
        self.zero_point = zero_point
        self.quant_min = quant_min
        self.quant_max = quant_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.fake_quant_cuda(x, self.scale, self.zero_point, self.quant_min, self.quant_max)
