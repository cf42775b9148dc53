"""Split build: device TU without torch headers + host code for the C++ side (split_codegen.py, split_build.py)."""
# ruff: noqa: E501  (expected C++ texts are kept line for line)

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from kernelwright.cuda import slim_header, split_codegen
from kernelwright.cuda.split_build import capture_load_inline, split_arguments, split_load_inline, try_split_build
from kernelwright.cuda.split_codegen import split_reason, split_sources

ROOT = Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc", "/usr/local/cuda-13.0/bin/nvcc")
                                     if os.path.exists(p)), None)

CU = r"""#include <torch/extension.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAStream.h>
#define BLOCK 256
constexpr int UNROLL = 2;
struct Pair { float a, b; };

__device__ __forceinline__ float sq(float v) { return v * v; }

__global__ void square_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sq(x[i]);
}

__global__ void fill_kernel(Pair p, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = p.a + p.b;
}

torch::Tensor square(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    square_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    square_kernel<<<1, BLOCK, 0>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    fill_kernel<<<dim3(1), dim3(BLOCK), 16, c10::cuda::getCurrentCUDAStream()>>>(Pair{1.f, 2.f}, y.data_ptr<float>(), n);
    return y;
}
"""

DEVICE_BODY = r"""#include <cuda_runtime.h>
#define BLOCK 256
constexpr int UNROLL = 2;
struct Pair { float a, b; };
__device__ __forceinline__ float sq(float v) { return v * v; }
__global__ void square_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sq(x[i]);
}
void kw_launch_square_kernel(dim3 kw_grid, dim3 kw_block, size_t kw_shmem, cudaStream_t kw_stream, const float* __restrict__ x, float* __restrict__ y, int n) {
    if (kw_skip_own_launches) return;
    square_kernel<<<kw_grid, kw_block, kw_shmem, kw_stream>>>(x, y, n);
}
__global__ void fill_kernel(Pair p, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = p.a + p.b;
}
void kw_launch_fill_kernel(dim3 kw_grid, dim3 kw_block, size_t kw_shmem, cudaStream_t kw_stream, Pair p, float* y, int n) {
    if (kw_skip_own_launches) return;
    fill_kernel<<<kw_grid, kw_block, kw_shmem, kw_stream>>>(p, y, n);
}
"""

HOST_BODY = r"""#include <torch/extension.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAStream.h>
#define BLOCK 256
constexpr int UNROLL = 2;
struct Pair { float a, b; };
void kw_launch_square_kernel(dim3 kw_grid, dim3 kw_block, size_t kw_shmem, cudaStream_t kw_stream, const float* __restrict__ x, float* __restrict__ y, int n);
void kw_launch_fill_kernel(dim3 kw_grid, dim3 kw_block, size_t kw_shmem, cudaStream_t kw_stream, Pair p, float* y, int n);
torch::Tensor square(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    kw_launch_square_kernel((n + BLOCK - 1) / BLOCK, BLOCK, 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), n);
    kw_launch_square_kernel(1, BLOCK, 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), n);
    kw_launch_fill_kernel(dim3(1), dim3(BLOCK), 16, c10::cuda::getCurrentCUDAStream(), Pair{1.f, 2.f}, y.data_ptr<float>(), n);
    return y;
}
"""


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def test_split_of_a_small_source() -> None:
    split = split_sources(CU)
    assert split is not None
    assert split.kernels == ("square_kernel", "fill_kernel")
    assert split.device.startswith(split_codegen.DEVICE_PRELUDE)
    assert _lines(split.device[len(split_codegen.DEVICE_PRELUDE):]) == _lines(DEVICE_BODY)
    assert _lines(split.host) == _lines(split_codegen.HOST_PRELUDE) + _lines(HOST_BODY)
    assert "torch" not in split.device and "ATen" not in split.device
    assert "<<<" not in split.host


OUT_OF_SCOPE = {
    "template kernel": """#include <torch/extension.h>
template <typename T> __global__ void k(T* x) { x[0] = T(1); }
void f(torch::Tensor x) { k<float><<<1, 1>>>(x.data_ptr<float>()); }
""",
    "kernel used other than by a launch": """#include <torch/extension.h>
__global__ void k(float* x) { x[0] = 1; }
void f(torch::Tensor x) {
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);
    k<<<1, 1, 65536>>>(x.data_ptr<float>());
}
""",
    "kernel launch in a macro": """#include <torch/extension.h>
__global__ void k(float* x) { x[0] = 1; }
#define LAUNCH(p) k<<<1, 1>>>(p)
void f(torch::Tensor x) { LAUNCH(x.data_ptr<float>()); }
""",
    "host code uses a device symbol": """#include <torch/extension.h>
__constant__ float coef[4];
__global__ void k(float* x) { x[0] = coef[0]; }
void f(torch::Tensor x, torch::Tensor c) {
    cudaMemcpyToSymbol(coef, c.data_ptr<float>(), 16);
    k<<<1, 1>>>(x.data_ptr<float>());
}
""",
    "dynamic parallelism": """#include <torch/extension.h>
__global__ void child(float* x) { x[0] = 1; }
__global__ void parent(float* x) { child<<<1, 1>>>(x); }
void f(torch::Tensor x) { parent<<<1, 1>>>(x.data_ptr<float>()); }
""",
    "mutable global variable": """#include <torch/extension.h>
int calls = 0;
__global__ void k(float* x) { x[0] = 1; }
void f(torch::Tensor x) { ++calls; k<<<1, 1>>>(x.data_ptr<float>()); }
""",
    "top-level namespace_definition": """#include <torch/extension.h>
namespace { __global__ void k(float* x) { x[0] = 1; } }
void f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); }
""",
    "torch API in device code": """#include <torch/extension.h>
__global__ void k(c10::Half* x) { x[0] = 1; }
void f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<c10::Half>()); }
""",
    "device code uses a host function": """#include <torch/extension.h>
constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }
__global__ void k(float* x) { x[0] = cdiv(3, 2); }
void f(torch::Tensor x) { k<<<cdiv(4, 2), 1>>>(x.data_ptr<float>()); }
""",
    "CUDA-only construct in host code": """#include <torch/extension.h>
__global__ void k(float* x) { x[0] = 1; }
void f(torch::Tensor x) {
#ifdef __CUDACC__
    k<<<1, 1>>>(x.data_ptr<float>());
#endif
}
""",
    "kernel parameter of kind optional_parameter_declaration": """#include <torch/extension.h>
__global__ void k(float* x, int n = 1) { x[0] = n; }
void f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); }
""",
    "extern": """#include <torch/extension.h>
extern "C" __global__ void k(float* x) { x[0] = 1; }
void f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); }
""",
}


@pytest.mark.parametrize("reason", sorted(OUT_OF_SCOPE))
def test_out_of_scope_sources_are_not_split(reason: str) -> None:
    source = OUT_OF_SCOPE[reason]
    assert split_sources(source) is None
    why = split_reason(source)
    assert why is not None
    if reason != "extern":
        assert why == reason


def test_pragma_inside_a_kernel_body_is_fine_but_not_in_host_code() -> None:
    kernel = """__global__ void k(float* x) {
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) x[i * 4 + j] = 0;
}
"""
    host = "void f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); }\n"
    assert split_sources("#include <torch/extension.h>\n" + kernel + host) is not None


def test_split_arguments_for_load_inline() -> None:
    cpp = "torch::Tensor square(torch::Tensor x);"
    got = split_arguments(cpp, CU, {"functions": ["square"]})
    assert not isinstance(got, str)
    cpp_sources, cuda_sources = got
    assert cpp_sources[0] == "#include <torch/extension.h>" and cpp_sources[1] == cpp
    assert "torch::Tensor square(torch::Tensor x) {" in cpp_sources[2]
    assert len(cuda_sources) == 1 and "torch" not in cuda_sources[0]
    assert split_arguments(cpp, CU, {"no_implicit_headers": True}) == "unsupported load_inline options"
    assert split_arguments(cpp, CU, {"extra_cuda_cflags": ["-DFOO=1"]}) == "preprocessor flags only for nvcc"
    assert split_arguments(cpp, [CU, CU], {}) == "not exactly one CUDA source"
    clash = cpp + "\ntorch::Tensor square(torch::Tensor x) { return x; }"
    assert split_arguments(clash, CU, {}) == "cpp_sources defines a name the host code defines"


def test_try_split_build_calls_load_inline_split_and_falls_back(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def fake(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> Any:
        calls.append({"name": name, "cpp": cpp_sources, "cuda": cuda_sources, **kw})
        return "module"

    kw = {"functions": ["square"], "build_directory": str(tmp_path)}
    assert try_split_build(fake, "ext", "torch::Tensor square(torch::Tensor x);", CU, kw) == ("module", "split")
    assert calls[0]["no_implicit_headers"] is True
    assert calls[0]["build_directory"] == str(tmp_path / "split")
    assert kw["build_directory"] == str(tmp_path)  # the caller's arguments are left alone
    assert try_split_build(fake, "ext", "", OUT_OF_SCOPE["template kernel"], {}) is None
    assert len(calls) == 1

    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("nvcc failed")

    assert try_split_build(broken, "ext", "", CU, {}) is None

    def split_fails(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> Any:
        if kw.get("no_implicit_headers"):
            raise RuntimeError("link error")
        return ("as written", cuda_sources)

    assert split_load_inline(split_fails)("ext", "", CU) == ("as written", CU)


def test_verify_config_split_build_reaches_the_worker_spec() -> None:
    from kernelwright.verifier.config import VerifyConfig
    from kernelwright.verifier.verify import make_spec

    assert make_spec(VerifyConfig(problem="p.py", candidate="c.py")).split_build is True
    assert make_spec(VerifyConfig(problem="p.py", candidate="c.py", split_build=False)).split_build is False


def _seed_args(task: str) -> tuple[list[str], list[str]]:
    got = capture_load_inline(ROOT / "kernelwright/seed/tasks" / task / "solution.py")
    res = split_arguments(got["cpp"], got["cuda"], got["kw"])
    assert not isinstance(res, str), res
    return res


SEEDS = ["loss_mse_mean", "matmul_tiled_gemm", "convolution_conv1d_basic"]


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("task", SEEDS)
def test_seed_device_tu_compiles_without_torch(task: str, tmp_path: Path) -> None:
    _, cuda = _seed_args(task)
    src = tmp_path / "device.cu"
    src.write_text(cuda[0])
    flags = ["-std=c++17", "-arch=sm_90", "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
             "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--compiler-options", "-fPIC"]
    proc = subprocess.run([str(NVCC), *flags, "-c", str(src), "-o", str(tmp_path / "device.o")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    symbols = subprocess.run(["nm", "-C", str(tmp_path / "device.o")], capture_output=True, text=True,
                             check=False).stdout
    assert "kw_launch_" in symbols


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA headers for the host side)")
@pytest.mark.parametrize("header", ["#include <torch/extension.h>\n", slim_header.SLIM.text],
                         ids=["extension_h", "slim"])
def test_seed_host_parts_compile_with_gxx(tmp_path: Path, header: str) -> None:
    import torch.utils.cpp_extension as ext

    homes = [os.environ.get("CUDA_HOME"), ext.CUDA_HOME, str(Path(str(NVCC)).resolve().parents[1]),
             "/usr/local/cuda", "/usr/local/cuda-13.0"]
    cuda_home = next((h for h in homes if h and Path(h, "include", "cuda_runtime.h").exists()), None)
    if cuda_home is None:
        pytest.skip("no CUDA headers")
    includes = [f"-I{p}" for p in ext.include_paths()] + [f"-I{cuda_home}/include",
                                                          f"-I{sysconfig.get_paths()['include']}"]
    # one g++ run (one torch parse, ~15 s): every host part in a namespace of its own, includes hoisted
    parts = [_seed_args(t) for t in SEEDS]  # (not CU: a CPU torch build lacks c10/cuda's generated macros)
    includes_, bodies = set(), []
    for i, (cpp, _) in enumerate(parts):
        lines = "\n".join(cpp).splitlines()
        includes_ |= {line for line in lines if line.startswith("#include")}
        body = "\n".join(line for line in lines if not line.startswith("#include"))
        bodies.append(f"namespace part{i} {{\n{body}\n}}\n")
    src = tmp_path / "host.cpp"
    includes_ -= {"#include <torch/extension.h>"}  # the slim header stands in for it
    src.write_text(header + "\n".join(sorted(includes_)) + "\n" + "".join(bodies))
    proc = subprocess.run(["g++", "-std=c++20", "-fsyntax-only", "-fPIC", "-w", *includes, str(src)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
