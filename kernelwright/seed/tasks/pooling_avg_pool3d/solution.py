import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// One thread per output element of (N*C, Dout, Hout, Wout). count_include_pad = True:
// the divisor is the window clipped to the padded volume, the sum covers real voxels only.
__global__ void avg_pool3d_kernel(const float* __restrict__ x, float* __restrict__ y,
                                  long long total, int D, int H, int W,
                                  int Dout, int Hout, int Wout, int k, int s, int p) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; idx < total; idx += stride) {
        const int ow = (int)(idx % Wout);
        long long t = idx / Wout;
        const int oh = (int)(t % Hout);
        t /= Hout;
        const int od = (int)(t % Dout);
        const long long plane = t / Dout;

        int ds = od * s - p, hs = oh * s - p, ws = ow * s - p;
        int de = min(ds + k, D + p), he = min(hs + k, H + p), we = min(ws + k, W + p);
        const int pool_size = (de - ds) * (he - hs) * (we - ws);
        ds = max(ds, 0); hs = max(hs, 0); ws = max(ws, 0);
        de = min(de, D); he = min(he, H); we = min(we, W);

        const float* xp = x + plane * D * H * W;
        float sum = 0.0f;
        for (int dd = ds; dd < de; ++dd)
            for (int h = hs; h < he; ++h) {
                const float* xr = xp + ((long long)dd * H + h) * W;
                for (int w = ws; w < we; ++w) sum += xr[w];
            }
        y[idx] = sum / (float)pool_size;
    }
}

torch::Tensor avg_pool3d_cuda(torch::Tensor x, int64_t k, int64_t s, int64_t p) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() == 5, "x must be NCDHW");
    TORCH_CHECK(k > 0 && s > 0 && p >= 0 && 2 * p <= k, "bad pooling parameters");
    auto xc = x.contiguous();
    const int N = (int)xc.size(0), C = (int)xc.size(1);
    const int D = (int)xc.size(2), H = (int)xc.size(3), W = (int)xc.size(4);
    TORCH_CHECK(D + 2 * p >= k && H + 2 * p >= k && W + 2 * p >= k, "window larger than padded input");
    const int Dout = (D + 2 * (int)p - (int)k) / (int)s + 1;
    const int Hout = (H + 2 * (int)p - (int)k) / (int)s + 1;
    const int Wout = (W + 2 * (int)p - (int)k) / (int)s + 1;
    auto y = torch::empty({N, C, Dout, Hout, Wout}, xc.options());
    long long total = y.numel();
    if (total == 0) return y;
    const int threads = 256;
    int blocks = (int)std::min<long long>((total + threads - 1) / threads, 65535LL);
    avg_pool3d_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), total,
                                           D, H, W, Dout, Hout, Wout, (int)k, (int)s, (int)p);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "avg_pool3d_kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = "torch::Tensor avg_pool3d_cuda(torch::Tensor x, int64_t k, int64_t s, int64_t p);"

_ext = load_inline(
    name="kw_seed_pooling_avg_pool3d",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["avg_pool3d_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.avg_pool3d_cuda(x, self.kernel_size, self.stride, self.padding)
