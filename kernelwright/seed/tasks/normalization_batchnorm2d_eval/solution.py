import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// One block per (n, c) plane of hw contiguous elements. The per-channel affine map is folded
// into scale = w / sqrt(var + eps), shift = b - mean * scale, computed once per block.
__global__ void batchnorm_eval_kernel(const float* __restrict__ x, const float* __restrict__ mean,
                                      const float* __restrict__ var, const float* __restrict__ w,
                                      const float* __restrict__ b, float* __restrict__ y,
                                      long long channels, long long hw, float eps) {
    const long long plane = blockIdx.x;
    const long long c = plane % channels;
    const float scale = w[c] / sqrtf(var[c] + eps);
    const float shift = b[c] - mean[c] * scale;
    const float* p = x + plane * hw;
    float* q = y + plane * hw;
    for (long long i = threadIdx.x; i < hw; i += blockDim.x) q[i] = p[i] * scale + shift;
}

torch::Tensor batchnorm_eval_cuda(torch::Tensor x, torch::Tensor running_mean, torch::Tensor running_var,
                                  torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() >= 2, "x must be at least 2-D (N, C, ...)");
    for (const auto& t : {running_mean, running_var, weight, bias}) {
        TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32, "parameters must be float32 CUDA tensors");
        TORCH_CHECK(t.numel() == x.size(1), "parameter size must equal the channel count");
    }
    auto xc = x.contiguous();
    auto mc = running_mean.contiguous();
    auto vc = running_var.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const long long channels = xc.size(1);
    long long hw = 1;
    for (int64_t d = 2; d < xc.dim(); ++d) hw *= xc.size(d);
    auto y = torch::empty_like(xc);
    const long long planes = xc.size(0) * channels;
    if (planes == 0 || hw == 0) return y;
    TORCH_CHECK(planes <= 2147483647LL, "too many planes");
    const int threads = 256;
    batchnorm_eval_kernel<<<(unsigned int)planes, threads>>>(
        xc.data_ptr<float>(), mc.data_ptr<float>(), vc.data_ptr<float>(), wc.data_ptr<float>(),
        bc.data_ptr<float>(), y.data_ptr<float>(), channels, hw, (float)eps);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "batchnorm_eval_kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = (
    "torch::Tensor batchnorm_eval_cuda(torch::Tensor x, torch::Tensor running_mean, torch::Tensor running_var, "
    "torch::Tensor weight, torch::Tensor bias, double eps);"
)

_ext = load_inline(
    name="kw_seed_normalization_batchnorm2d_eval",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["batchnorm_eval_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(num_features))
        self.bias = nn.Parameter(torch.randn(num_features))
        self.register_buffer("running_mean", torch.randn(num_features) * 0.5)
        self.register_buffer("running_var", torch.rand(num_features) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.batchnorm_eval_cuda(x, self.running_mean, self.running_var, self.weight, self.bias, self.eps)
