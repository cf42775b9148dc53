"""The slim precompiled header of split builds' host files (kernelwright.cuda.slim_header)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kernelwright.cuda import slim_header
from kernelwright.cuda.split_build import try_split_build

CU = """
#include <torch/extension.h>
__global__ void square_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}
torch::Tensor square(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    square_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
HEADER = "/opt/torch/include/torch/kw_slim_extension.h"


def test_host_sources_read_the_slim_header_first_and_drop_extension_h() -> None:
    cpp = ["#include <torch/extension.h>", "  #  include \"torch/extension.h\"\n#include <cuda_runtime.h>\nint f();",
           "#include <torch/types.h>\n#include <torch/python.h>"]
    out = slim_header.host_sources(cpp, HEADER)
    assert out is not None
    assert out[0] == f'#include "{HEADER}"'
    assert "extension.h" not in "\n".join(out[1:])
    assert "#include <cuda_runtime.h>" in out[2] and "int f();" in out[2]
    assert "#include <torch/types.h>" in out[3]  # kept: read again, it is a no-op after the header


@pytest.mark.parametrize("other", ["torch/all.h", "torch/torch.h", "torch/nn/functional.h"])
def test_host_sources_keep_torch_header_for_other_torch_includes(other: str) -> None:
    assert slim_header.host_sources(["#include <torch/extension.h>", f"#include <{other}>"], HEADER) is None


def test_split_build_tries_the_slim_header_then_torch_header(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def slim_fails(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> Any:
        calls.append({"cpp": cpp_sources, **kw})
        if HEADER in cpp_sources[0]:
            raise RuntimeError("'torch::nn' has not been declared")
        return "module"

    kw = {"functions": ["square"], "build_directory": str(tmp_path), "use_pch": True}
    assert try_split_build(slim_fails, "ext", "torch::Tensor square(torch::Tensor x);", CU, kw, HEADER) \
        == ("module", False)
    slim, full = calls
    assert slim["use_pch"] is False and slim["build_directory"] == str(tmp_path / "split" / "slim")
    assert full["use_pch"] is True and full["cpp"][0] == "#include <torch/extension.h>"
    assert full["build_directory"] == str(tmp_path / "split")

    calls.clear()
    assert try_split_build(lambda *a, **k: (calls.append(k), "slim module")[1], "ext",
                           "torch::Tensor square(torch::Tensor x);", CU, dict(kw), HEADER) == ("slim module", True)
    assert len(calls) == 1


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_build_stamps_the_header_and_ready_follows_the_stamp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = tmp_path / "include" / "torch" / slim_header.NAME
    header.parent.mkdir(parents=True)
    monkeypatch.setattr(slim_header, "header_path", lambda: header)
    monkeypatch.setattr(slim_header, "TEXT", "#pragma once\n#include <cstddef>\ninline int kw_one() { return 1; }\n")
    assert slim_header.ready() is None  # never built
    assert slim_header.build(120)
    assert slim_header.ready() == str(header)
    assert Path(f"{header}.gch").stat().st_size > 0
    assert not list(header.parent.glob("*.tmp"))
    monkeypatch.setattr(slim_header, "TEXT", slim_header.TEXT + "inline int kw_two() { return 2; }\n")
    assert slim_header.ready() is None  # another text: stale until built again
    assert slim_header.build(120) and slim_header.ready() == str(header)


def test_a_failed_build_leaves_nothing_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = tmp_path / "include" / "torch" / slim_header.NAME
    header.parent.mkdir(parents=True)
    monkeypatch.setattr(slim_header, "header_path", lambda: header)
    monkeypatch.setattr(slim_header, "TEXT", "#pragma once\n#include <no_such_header_kw.h>\n")
    assert not slim_header.build(120)
    assert slim_header.ready() is None
    assert not Path(f"{header}.gch").exists() and not list(header.parent.glob("*.tmp"))


def test_std_flag_follows_torch_signature(tmp_path: Path) -> None:
    assert slim_header._std_flag(tmp_path) == "-std=c++17"  # torch has not built its header here
    (tmp_path / "extension.h.sign").write_text("c++_-x_c++-header_/a_b/extension.h_-DX_-std=c++20_-fPIC")
    assert slim_header._std_flag(tmp_path) == "-std=c++20"


def test_verify_config_slim_header_reaches_the_worker_spec() -> None:
    from kernelwright.verifier.config import VerifyConfig
    from kernelwright.verifier.verify import make_spec

    assert make_spec(VerifyConfig(problem="p.py", candidate="c.py")).slim_header is True
    assert make_spec(VerifyConfig(problem="p.py", candidate="c.py", slim_header=False)).slim_header is False


def test_an_up_to_date_header_starts_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every verify_many call asks for the header; once built, the answer costs no Python start."""
    monkeypatch.setattr(slim_header, "ready", lambda: HEADER)
    monkeypatch.setattr(slim_header.subprocess, "run", lambda *a, **k: pytest.fail("started a process"))
    assert slim_header.build_in_subprocess(60)


def test_command_takes_the_compiler_from_cxx_like_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CXX", "g++-12")
    cmd = slim_header.command(tmp_path / "include" / "torch" / slim_header.NAME)
    assert cmd[0] == "g++-12" and cmd[1:3] == ["-x", "c++-header"]
    assert cmd[5] == f"{tmp_path / 'include' / 'torch' / slim_header.NAME}.gch"
