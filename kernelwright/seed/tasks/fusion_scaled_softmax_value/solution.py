import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

#define THREADS 256

template <bool IS_MAX>
__device__ float block_reduce_f(float v, float* sh) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_down_sync(0xffffffffu, v, o);
        v = IS_MAX ? fmaxf(v, other) : v + other;
    }
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = (lane < nwarps) ? sh[lane] : (IS_MAX ? -INFINITY : 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            float other = __shfl_down_sync(0xffffffffu, v, o);
            v = IS_MAX ? fmaxf(v, other) : v + other;
        }
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}

// One block per (batch, head) row. scores: (R, L), values: (R, L, D), out: (R, D).
__global__ void softmax_value_kernel(const float* __restrict__ scores, const float* __restrict__ values,
                                     float* __restrict__ out, int L, int D, float scale) {
    extern __shared__ float probs[];           // L floats
    __shared__ float red[THREADS];
    __shared__ float sh[32];
    const int tid = threadIdx.x;
    const long long row = blockIdx.x;
    const float* s = scores + row * L;
    const float* v = values + row * (long long)L * D;

    float m = -INFINITY;
    for (int l = tid; l < L; l += blockDim.x) {
        float z = s[l] * scale;
        probs[l] = z;
        m = fmaxf(m, z);
    }
    m = block_reduce_f<true>(m, sh);
    float sum = 0.0f;
    for (int l = tid; l < L; l += blockDim.x) {
        float e = expf(probs[l] - m);
        probs[l] = e;
        sum += e;
    }
    sum = block_reduce_f<false>(sum, sh);   // ends with __syncthreads, so probs[] is complete
    for (int l = tid; l < L; l += blockDim.x) probs[l] = probs[l] / sum;
    __syncthreads();

    // Weighted sum over L: threads split into G groups of dchunk columns; each group takes every G-th l.
    const int dchunk = D < (int)blockDim.x ? D : (int)blockDim.x;
    const int G = blockDim.x / dchunk;
    const int g = tid / dchunk;
    const int dl = tid - g * dchunk;
    for (int d0 = 0; d0 < D; d0 += dchunk) {
        const int d = d0 + dl;
        float acc = 0.0f;
        if (g < G && d < D) {
            for (int l = g; l < L; l += G) acc += probs[l] * v[(long long)l * D + d];
        }
        red[tid] = acc;
        __syncthreads();
        if (tid < dchunk && d0 + tid < D) {
            float total = 0.0f;
            for (int gg = 0; gg < G; ++gg) total += red[gg * dchunk + tid];
            out[row * D + d0 + tid] = total;
        }
        __syncthreads();
    }
}

torch::Tensor softmax_value_cuda(torch::Tensor scores, torch::Tensor values, double scale) {
    TORCH_CHECK(scores.is_cuda() && scores.scalar_type() == torch::kFloat32, "scores must be a float32 CUDA tensor");
    TORCH_CHECK(values.is_cuda() && values.scalar_type() == torch::kFloat32, "values must be a float32 CUDA tensor");
    TORCH_CHECK(scores.dim() >= 1 && values.dim() == scores.dim() + 1, "values must have one more dim than scores");
    for (int i = 0; i < scores.dim(); ++i)
        TORCH_CHECK(values.size(i) == scores.size(i), "scores and values leading dims must match");
    auto sc = scores.contiguous();
    auto vc = values.contiguous();
    const int L = (int)sc.size(-1);
    const int D = (int)vc.size(-1);
    TORCH_CHECK(L > 0 && L <= 10000, "L must be in [1, 10000]");
    TORCH_CHECK(D > 0, "D must be positive");
    auto out_sizes = sc.sizes().vec();
    out_sizes.back() = D;
    auto out = torch::empty(out_sizes, sc.options());
    long long rows = sc.numel() / L;
    if (rows == 0) return out;
    size_t smem = (size_t)L * sizeof(float);
    softmax_value_kernel<<<(unsigned)rows, THREADS, smem>>>(sc.data_ptr<float>(), vc.data_ptr<float>(),
                                                           out.data_ptr<float>(), L, D, (float)scale);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "softmax_value_kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

cpp_source = "torch::Tensor softmax_value_cuda(torch::Tensor scores, torch::Tensor values, double scale);"

_ext = load_inline(
    name="kw_seed_fusion_scaled_softmax_value",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_value_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, scores: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_value_cuda(scores, values, self.scale)
