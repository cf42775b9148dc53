from __future__ import annotations

from kernelwright.cuda.device_code import device_source
from kernelwright.cuda.nvrtc import compile_device_code, compile_many
from kernelwright.cuda.spans import cuda_source_of
from kernelwright.seed import load_seed_tasks

LOAD_INLINE_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_fp16.h>
template <typename T> __device__ T twice(T v) { return v + v; }
__global__ void k(const int64_t* idx, __half* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2half(twice((float)idx[i]) + INFINITY * 0.0f);
}
torch::Tensor run(torch::Tensor idx) {
    auto out = torch::empty({idx.numel()}, idx.options().dtype(torch::kHalf));
    k<<<1, 256>>>(idx.data_ptr<int64_t>(), (__half*)out.data_ptr<at::Half>(), idx.numel());
    return out;
}
"""


def test_host_glue_is_stripped() -> None:
    dev = device_source(LOAD_INLINE_SOURCE)
    assert "torch::" not in dev and "__global__ void k" in dev and "twice" in dev
    assert "kw_torch_prelude.h" in dev


def test_load_inline_source_compiles_without_gpu() -> None:
    r = compile_device_code(LOAD_INLINE_SOURCE)
    assert r.ok, r.log
    assert r.ptx_bytes > 0


def test_broken_kernel_fails_with_a_log() -> None:
    r = compile_device_code("__global__ void k(float* x) { x[threadIdx.x] = undefined_name; }")
    assert not r.ok and "undefined_name" in r.log


def test_every_seed_solution_compiles_with_nvrtc() -> None:
    tasks = load_seed_tasks()
    sources = [cuda_source_of(t.solution) for t in tasks]
    results = compile_many(sources, workers=2)
    failed = [(t.id, r.log[:300]) for t, r in zip(tasks, results, strict=True) if not r.ok]
    assert not failed


def test_clean_compile_leaves_python_bytes_intact() -> None:
    """An empty NVRTC log once got written into CPython's shared 1-byte b" " object, after which
    torch.load misread every checkpoint in the process."""
    import io

    import torch

    from kernelwright.cuda.nvrtc import _compile_cached

    source = "__global__ void kw_clean_log(float* x) { x[threadIdx.x] = 1.0f; }"
    assert _compile_cached("clean-log-test", source, "compute_90").ok
    assert b" " == bytes([32])
    buf = io.BytesIO()
    torch.save({"a": torch.arange(32, dtype=torch.float32)}, buf)
    buf.seek(0)
    assert torch.equal(torch.load(buf)["a"], torch.arange(32, dtype=torch.float32))
