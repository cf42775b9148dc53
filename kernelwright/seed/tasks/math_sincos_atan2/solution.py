import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <stdint.h>

__device__ __forceinline__ float trig_f(float a, float b, float k) {
    return sinf(a) * cosf(b) + k * atan2f(a, b);
}

// float4 body over the first n4 * 4 elements, scalar tail for the rest.
__global__ void sincos_atan2_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                    float* __restrict__ out, float k, long long n, long long n4) {
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* o4 = reinterpret_cast<float4*>(out);
    for (long long i = tid; i < n4; i += stride) {
        float4 va = a4[i];
        float4 vb = b4[i];
        float4 r;
        r.x = trig_f(va.x, vb.x, k);
        r.y = trig_f(va.y, vb.y, k);
        r.z = trig_f(va.z, vb.z, k);
        r.w = trig_f(va.w, vb.w, k);
        o4[i] = r;
    }
    for (long long i = n4 * 4 + tid; i < n; i += stride) {
        out[i] = trig_f(a[i], b[i], k);
    }
}

torch::Tensor sincos_atan2_cuda(torch::Tensor a, torch::Tensor b, double k) {
    TORCH_CHECK(a.is_cuda() && a.scalar_type() == torch::kFloat32, "a must be a float32 CUDA tensor");
    TORCH_CHECK(b.is_cuda() && b.scalar_type() == torch::kFloat32, "b must be a float32 CUDA tensor");
    TORCH_CHECK(a.sizes() == b.sizes(), "a and b must have the same shape");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto out = torch::empty_like(ac);
    long long n = ac.numel();
    if (n == 0) return out;
    const float* ap = ac.data_ptr<float>();
    const float* bp = bc.data_ptr<float>();
    float* op = out.data_ptr<float>();
    bool aligned = ((reinterpret_cast<uintptr_t>(ap) | reinterpret_cast<uintptr_t>(bp) |
                     reinterpret_cast<uintptr_t>(op)) & 15) == 0;
    long long n4 = aligned ? n / 4 : 0;
    long long work = aligned ? (n + 3) / 4 : n;
    const int threads = 256;
    int blocks = (int)std::min<long long>((work + threads - 1) / threads, 65535LL);
    if (blocks == 0) return out;
    sincos_atan2_kernel<<<blocks, threads>>>(ap, bp, op, (float)k, n, n4);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "sincos_atan2_kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

cpp_source = "torch::Tensor sincos_atan2_cuda(torch::Tensor a, torch::Tensor b, double k);"

_ext = load_inline(
    name="kw_seed_math_sincos_atan2",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["sincos_atan2_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, k: float):
        super().__init__()
        self.k = k

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.sincos_atan2_cuda(a, b, self.k)
