"""NVRTC compiles of device code through the pool and the cache (`kernelwright.cuda.nvrtc.device`)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

from kernelwright.cuda.device_code import device_source
from kernelwright.cuda.nvrtc import program
from kernelwright.cuda.nvrtc.device import NvrtcUnavailable, compile_device_code, compile_many, device_options
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
BROKEN = "__global__ void k(float* x) { x[threadIdx.x] = undefined_name; }"


def test_host_glue_is_stripped() -> None:
    dev = device_source(LOAD_INLINE_SOURCE)
    assert "torch::" not in dev and "__global__ void k" in dev and "twice" in dev
    assert "kw_torch_prelude.h" in dev


def test_load_inline_source_compiles_without_gpu() -> None:
    r = compile_device_code(LOAD_INLINE_SOURCE)
    assert r.ok, r.log
    assert r.ptx_bytes > 0


def test_broken_kernel_fails_with_a_log() -> None:
    r = compile_device_code(BROKEN)
    assert not r.ok and "undefined_name" in r.log and r.ptx_bytes == 0


def test_every_seed_solution_compiles_with_nvrtc() -> None:
    tasks = load_seed_tasks()
    batch = compile_many([cuda_source_of(t.solution) for t in tasks], workers=2)
    failed = [(t.id, r.log[:300]) for t, r in zip(tasks, batch.results, strict=True) if not r.ok]
    assert not failed


def test_results_are_kept_on_disk_by_content_and_each_source_compiles_once(tmp_path: Path) -> None:
    other = LOAD_INLINE_SOURCE.replace("v + v", "v * 2")
    first = compile_many([LOAD_INLINE_SOURCE, BROKEN, LOAD_INLINE_SOURCE, other], 2, cache_dir=tmp_path)
    assert (first.compiled, first.cache_hits) == (3, 0)
    assert [r.ok for r in first.results] == [True, False, True, True]
    assert len(list((tmp_path / "results").rglob("*.json"))) == 3
    again = compile_many([other, BROKEN], 2, cache_dir=tmp_path)
    assert (again.compiled, again.cache_hits) == (0, 2)
    assert again.results == [first.results[3], first.results[1]]


def test_a_cached_result_is_read_back_from_disk_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.cuda.nvrtc import cache

    made = compile_many([BROKEN], 1, cache_dir=tmp_path).results[0]
    monkeypatch.setattr(cache, "_memo", type(cache._memo)())  # a fresh process: nothing in memory
    again = compile_many([BROKEN], 1, cache_dir=tmp_path)
    assert again.cache_hits == 1 and again.results == [made]


def test_another_architecture_is_another_result(tmp_path: Path) -> None:
    compile_many([BROKEN], 1, cache_dir=tmp_path)
    assert compile_many([BROKEN], 1, arch="compute_80", cache_dir=tmp_path).compiled == 1
    assert "--gpu-architecture=compute_80" in device_options("compute_80")


def test_nvrtc_that_does_not_load_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_nvrtc() -> None:
        raise ImportError("no NVRTC wheel for this platform")

    monkeypatch.setattr(program, "load_nvrtc", no_nvrtc)
    with pytest.raises(NvrtcUnavailable, match="NVRTC could not be loaded"):
        compile_many([LOAD_INLINE_SOURCE])
    assert compile_many([]).results == []  # nothing to compile: nothing to load


def test_clean_compile_leaves_python_bytes_intact() -> None:
    """An empty NVRTC log once got written into CPython's shared 1-byte b" " object, after which
    torch.load misread every checkpoint in the process."""
    source = "__global__ void kw_clean_log(float* x) { x[threadIdx.x] = 1.0f; }"
    done = program.run_nvrtc(program.load_nvrtc(), source, "clean.cu", [o.encode() for o in device_options()])
    assert done.ok and done.log == ""
    assert b" " == bytes([32])
    buf = io.BytesIO()
    torch.save({"a": torch.arange(32, dtype=torch.float32)}, buf)
    buf.seek(0)
    assert torch.equal(torch.load(buf)["a"], torch.arange(32, dtype=torch.float32))
