"""Isolation and build (kernelwright.verifier.isolation), on the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.verifier import isolation


def test_a_build_without_the_header_leaves_it_for_the_others(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Stock `load_inline(use_pch=False)` deletes torch's shared precompiled header; a worker's
    candidate with its own host flags must not take it from the workers building beside it."""
    import torch.utils.cpp_extension as ext

    removed: list[bool] = []
    calls: list[dict[str, Any]] = []

    def stock(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> str:
        calls.append(kw)
        if not kw.get("use_pch"):
            ext.remove_extension_h_precompiler_headers()  # what torch's load_inline does
        return name

    monkeypatch.setattr(ext, "remove_extension_h_precompiler_headers", lambda: removed.append(True))
    monkeypatch.setattr(ext, "load_inline", stock)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    isolation.patch_load_inline(str(tmp_path))
    assert ext.load_inline("m", "int f();", None, extra_cflags=["-O2"]) == "m"
    assert calls[0]["use_pch"] is False and not removed


CU = """
__global__ void twice_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2 * x[i];
}
torch::Tensor twice(torch::Tensor x) {
    auto y = torch::empty_like(x);
    twice_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""


@pytest.mark.parametrize("flags", [None, [""], ["-O3"]])
def test_split_builds_read_the_smaller_headers_whatever_the_host_flags(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path, flags: Any) -> None:
    """KernelBench's template passes `extra_cflags=[""]` and many kernels `["-O3"]`: that keeps torch's
    shared header out (torch would rebuild it with those flags) but not kernelwright's own, which
    g++ reads as text when the flags do not match its precompiled form."""
    import torch.utils.cpp_extension as ext

    from kernelwright.cuda import slim_header

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(ext, "load_inline", lambda name, cpp, cuda=None, **kw: calls.append({"cpp": cpp, **kw}))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setattr(slim_header, "ready", lambda: "/t/slim.h")
    monkeypatch.setattr(slim_header, "bare_ready", lambda: ("/t/bare.h", "/t/bindings.o"))
    monkeypatch.setattr(isolation, "BUILD_PATHS", [])
    isolation.patch_load_inline(str(tmp_path), split=True)
    ext.load_inline("m", "torch::Tensor twice(torch::Tensor x);", CU, functions=["twice"], extra_cflags=flags)
    assert calls[0]["cpp"][0] == '#include "/t/bare.h"' and calls[0]["extra_ldflags"] == ["/t/bindings.o"]
    assert calls[0]["extra_cflags"] == flags and isolation.BUILD_PATHS == ["split_bare"]


def _flag_library(tmp_path: Path, name: str) -> str:
    """A shared library exporting the split build's skip flag, as a split-built extension does."""
    import shutil
    import subprocess

    from kernelwright.cuda.split_codegen import SKIP_FLAG

    if shutil.which("cc") is None:
        pytest.skip("no C compiler on this machine")
    src, lib = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    src.write_text(f'__attribute__((visibility("default"))) int {SKIP_FLAG} = 0;\n'
                   f'int read_flag(void) {{ return {SKIP_FLAG}; }}\n')
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return str(lib)


def test_own_launches_skipped_sets_every_split_extensions_flag_and_clears_it(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    libs = [_flag_library(tmp_path, "a"), _flag_library(tmp_path, "b")]
    monkeypatch.setattr(isolation, "BUILD_PATHS", ["split", "split"])
    monkeypatch.setattr(isolation, "SPLIT_LIBRARIES", libs)
    with isolation.own_launches_skipped() as count:
        assert count == 2 and [ctypes.CDLL(lib).read_flag() for lib in libs] == [1, 1]
    assert [ctypes.CDLL(lib).read_flag() for lib in libs] == [0, 0]


def test_own_launches_are_not_skipped_when_a_build_was_not_split(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel built as written would still run: no decoy check then (0 extensions)."""
    import ctypes

    lib = _flag_library(tmp_path, "c")
    monkeypatch.setattr(isolation, "BUILD_PATHS", ["split", "as_written"])
    monkeypatch.setattr(isolation, "SPLIT_LIBRARIES", [lib])
    with isolation.own_launches_skipped() as count:
        assert count == 0 and ctypes.CDLL(lib).read_flag() == 0
