import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// out[m, n] = C[m, n] + alpha * sum_r U[m, r] * V[n, r]  (R <= MAX_R)
// Block (32, 8) threads covers a 32 x 32 output tile; each thread computes 4 rows.
// The 32 rows of U and 32 rows of V needed by the tile are staged in shared memory.
#define TILE 32
#define ROWS_PER_THREAD 4
#define MAX_R 16

__global__ void lowrank_update_kernel(const float* __restrict__ C, const float* __restrict__ U,
                                      const float* __restrict__ V, float* __restrict__ out,
                                      int M, int N, int R, float alpha) {
    __shared__ float Us[TILE][MAX_R + 1];
    __shared__ float Vs[TILE][MAX_R + 1];

    const int tx = threadIdx.x;   // 0..31 -> column
    const int ty = threadIdx.y;   // 0..7
    const int tid = ty * TILE + tx;
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;

    for (int i = tid; i < TILE * R; i += TILE * 8) {
        int t = i / R, r = i % R;
        int gm = row0 + t, gn = col0 + t;
        Us[t][r] = (gm < M) ? U[(long long)gm * R + r] : 0.0f;
        Vs[t][r] = (gn < N) ? V[(long long)gn * R + r] : 0.0f;
    }
    __syncthreads();

    const int col = col0 + tx;
    if (col >= N) return;   // no barrier after this point
#pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; ++i) {
        const int lr = ty + i * 8;
        const int row = row0 + lr;
        if (row >= M) break;
        float acc = 0.0f;
        for (int r = 0; r < R; ++r) acc = fmaf(Us[lr][r], Vs[tx][r], acc);
        const long long idx = (long long)row * N + col;
        out[idx] = C[idx] + alpha * acc;
    }
}

torch::Tensor lowrank_update_cuda(torch::Tensor C, torch::Tensor U, torch::Tensor V, double alpha) {
    TORCH_CHECK(C.is_cuda() && C.scalar_type() == torch::kFloat32, "C must be a float32 CUDA tensor");
    TORCH_CHECK(U.is_cuda() && U.scalar_type() == torch::kFloat32, "U must be a float32 CUDA tensor");
    TORCH_CHECK(V.is_cuda() && V.scalar_type() == torch::kFloat32, "V must be a float32 CUDA tensor");
    TORCH_CHECK(C.dim() == 2 && U.dim() == 2 && V.dim() == 2, "C, U, V must be 2-D");
    TORCH_CHECK(U.size(0) == C.size(0) && V.size(0) == C.size(1), "U/V rows must match C");
    TORCH_CHECK(U.size(1) == V.size(1), "U and V must share their rank dimension");
    TORCH_CHECK(U.size(1) <= MAX_R, "rank larger than MAX_R");
    auto Cc = C.contiguous();
    auto Uc = U.contiguous();
    auto Vc = V.contiguous();
    const int M = (int)Cc.size(0), N = (int)Cc.size(1), R = (int)Uc.size(1);
    auto out = torch::empty({M, N}, Cc.options());
    if (M == 0 || N == 0) return out;
    dim3 block(TILE, 8);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    lowrank_update_kernel<<<grid, block>>>(Cc.data_ptr<float>(), Uc.data_ptr<float>(),
                                           Vc.data_ptr<float>(), out.data_ptr<float>(),
                                           M, N, R, (float)alpha);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "lowrank_update_kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

cpp_source = "torch::Tensor lowrank_update_cuda(torch::Tensor C, torch::Tensor U, torch::Tensor V, double alpha);"

_ext = load_inline(
    name="kw_seed_matmul_outer_accumulate",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["lowrank_update_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, C: torch.Tensor, U: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        return _ext.lowrank_update_cuda(C, U, V, self.alpha)
