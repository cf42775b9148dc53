import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// For each sample n: Y[n] (Cout x P) = W (Cout x Cin) @ X[n] (Cin x P) + b, P = H * W.
// Block tile: 32 output channels x 64 pixels, K-slab 16 over Cin; 256 threads, each
// computing 2 channels x 4 pixels (strided by 16 for conflict-free shared reads).
#define BCO 32
#define BP 64
#define BK 16
#define NTHREADS 256

__global__ void conv1x1_kernel(const float* __restrict__ x, const float* __restrict__ w,
                               const float* __restrict__ bias, float* __restrict__ y,
                               int Cin, int Cout, int P) {
    __shared__ float Ws[BK][BCO + 1];   // Ws[k][co]
    __shared__ float Xs[BK][BP];        // Xs[k][p]

    const int n = blockIdx.z;
    const int co0 = blockIdx.y * BCO;
    const int p0 = blockIdx.x * BP;
    const int tid = threadIdx.x;
    const int tx = tid % 16;
    const int ty = tid / 16;
    const float* xn = x + (long long)n * Cin * P;

    float acc[2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < Cin; k0 += BK) {
        for (int i = tid; i < BCO * BK; i += NTHREADS) {
            int c = i / BK, k = i % BK;
            int co = co0 + c, ci = k0 + k;
            Ws[k][c] = (co < Cout && ci < Cin) ? w[(long long)co * Cin + ci] : 0.0f;
        }
        for (int i = tid; i < BK * BP; i += NTHREADS) {
            int k = i / BP, q = i % BP;
            int ci = k0 + k, p = p0 + q;
            Xs[k][q] = (ci < Cin && p < P) ? xn[(long long)ci * P + p] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a0 = Ws[k][ty], a1 = Ws[k][ty + 16];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                float b = Xs[k][tx + j * 16];
                acc[0][j] = fmaf(a0, b, acc[0][j]);
                acc[1][j] = fmaf(a1, b, acc[1][j]);
            }
        }
        __syncthreads();
    }

    float* yn = y + (long long)n * Cout * P;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        int co = co0 + ty + i * 16;
        if (co >= Cout) continue;
        float bv = bias[co];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int p = p0 + tx + j * 16;
            if (p < P) yn[(long long)co * P + p] = acc[i][j] + bv;
        }
    }
}

torch::Tensor conv1x1_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(weight.is_cuda() && weight.scalar_type() == torch::kFloat32, "weight must be a float32 CUDA tensor");
    TORCH_CHECK(bias.is_cuda() && bias.scalar_type() == torch::kFloat32, "bias must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && bias.dim() == 1, "x NCHW, weight (Cout,Cin,1,1), bias (Cout)");
    TORCH_CHECK(weight.size(2) == 1 && weight.size(3) == 1, "kernel must be 1x1");
    TORCH_CHECK(x.size(1) == weight.size(1), "in_channels mismatch");
    TORCH_CHECK(bias.size(0) == weight.size(0), "bias size mismatch");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const int N = (int)xc.size(0), Cin = (int)xc.size(1), H = (int)xc.size(2), W = (int)xc.size(3);
    const int Cout = (int)wc.size(0);
    const int P = H * W;
    TORCH_CHECK(N <= 65535, "batch too large for gridDim.z");
    auto y = torch::empty({N, Cout, H, W}, xc.options());
    if (N == 0 || Cout == 0 || P == 0) return y;
    dim3 grid((P + BP - 1) / BP, (Cout + BCO - 1) / BCO, N);
    conv1x1_kernel<<<grid, NTHREADS>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                       y.data_ptr<float>(), Cin, Cout, P);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "conv1x1_kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = "torch::Tensor conv1x1_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

_ext = load_inline(
    name="kw_seed_convolution_pointwise1x1",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["conv1x1_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv1x1_cuda(x, self.conv.weight, self.conv.bias)
