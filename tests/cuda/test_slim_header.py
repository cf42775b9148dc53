"""The slim precompiled header of split builds' host files (kernelwright.cuda.slim_header)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
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
        == ("module", "split")
    slim, full = calls
    assert slim["use_pch"] is False and slim["build_directory"] == str(tmp_path / "split" / "slim")
    assert full["use_pch"] is True and full["cpp"][0] == "#include <torch/extension.h>"
    assert full["build_directory"] == str(tmp_path / "split")

    calls.clear()
    assert try_split_build(lambda *a, **k: (calls.append(k), "slim module")[1], "ext",
                           "torch::Tensor square(torch::Tensor x);", CU, dict(kw), HEADER) \
        == ("slim module", "split_slim")
    assert len(calls) == 1


BARE = ("/opt/torch/include/torch/kw_host_types.h", "/opt/torch/include/torch/kw_host_bindings.cpp.o")


def test_split_build_tries_the_bare_header_with_generic_bindings_first(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def record(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> Any:
        calls.append({"cpp": cpp_sources, **kw})
        if BARE[0] in cpp_sources[0]:
            raise RuntimeError("'pybind11' has not been declared")
        return "module"

    kw = {"functions": ["square"], "build_directory": str(tmp_path), "use_pch": True, "extra_ldflags": ["-lcublas"]}
    decl = "torch::Tensor square(torch::Tensor x);"
    assert try_split_build(record, "ext", decl, CU, dict(kw), HEADER, BARE) == ("module", "split_slim")
    bare, slim = calls
    assert bare["cpp"][0] == f'#include "{BARE[0]}"' and "PyInit_" in bare["cpp"][-1]
    assert "extension.h" not in "\n".join(bare["cpp"]) and "PYBIND11" not in "\n".join(bare["cpp"])
    assert bare["functions"] is None and bare["extra_ldflags"] == ["-lcublas", BARE[1]]
    assert bare["use_pch"] is False and bare["build_directory"] == str(tmp_path / "split" / "bare")
    assert slim["functions"] == ["square"] and slim["cpp"][0] == f'#include "{HEADER}"'

    calls.clear()
    assert try_split_build(lambda *a, **k: (calls.append(k), "bare module")[1], "ext", decl, CU, dict(kw), HEADER,
                           BARE) == ("bare module", "split_bare")
    assert len(calls) == 1


@pytest.mark.parametrize("cpp, functions", [
    ("torch::Tensor square(torch::Tensor x);", ["square", "missing"]),  # a function declared nowhere
    ("torch::Tensor square(torch::Tensor x, c10::optional<torch::Tensor> y);", ["square"]),  # another type
    ("#include <torch/all.h>\ntorch::Tensor square(torch::Tensor x);", ["square"]),  # a header it lacks
    ("torch::Tensor square(torch::Tensor x);\nPYBIND11_MODULE(m, m) {}", None),  # its own bindings
])
def test_split_build_skips_the_bare_header_out_of_its_scope(tmp_path: Path, cpp: str, functions: Any) -> None:
    calls: list[dict[str, Any]] = []
    kw = {"functions": functions, "build_directory": str(tmp_path), "use_pch": True}
    built = try_split_build(lambda *a, **k: (calls.append({"cpp": a[1], **k}), "m")[1], "ext", cpp, CU, kw, HEADER,
                            BARE)
    assert built is not None and built[1] != "split_bare"
    assert all(BARE[0] not in c["cpp"][0] for c in calls)


def _artifact(tmp_path: Path, text: str, suffix: str = ".gch") -> slim_header.HostArtifact:
    folder = tmp_path / "include" / "torch"
    folder.mkdir(parents=True, exist_ok=True)
    return slim_header.HostArtifact("kw_test.h" if suffix == ".gch" else "kw_test.cpp", text, suffix, folder)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_build_stamps_the_header_and_ready_follows_the_stamp(tmp_path: Path) -> None:
    art = _artifact(tmp_path, "#pragma once\n#include <cstddef>\ninline int kw_one() { return 1; }\n")
    header = art.path()
    assert header is not None and art.ready() is None  # never built
    assert art.build(120)
    assert art.ready() == str(header)
    assert Path(f"{header}.gch").stat().st_size > 0
    assert not list(header.parent.glob("*.tmp"))
    other = dataclasses.replace(art, text=art.text + "inline int kw_two() { return 2; }\n")
    assert other.ready() is None  # another text: stale until built again
    assert other.build(120) and other.ready() == str(header)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_an_object_artifact_compiles_to_an_object(tmp_path: Path) -> None:
    art = _artifact(tmp_path, "extern \"C\" int kw_answer() { return 42; }\n", ".o")
    assert art.build(120) and art.ready() == str(art.path())
    assert "kw_answer" in subprocess.run(["nm", f"{art.path()}.o"], capture_output=True, text=True, check=False).stdout


def test_a_failed_build_leaves_nothing_ready(tmp_path: Path) -> None:
    art = _artifact(tmp_path, "#pragma once\n#include <no_such_header_kw.h>\n")
    header = art.path()
    assert header is not None
    assert not art.build(120)
    assert art.ready() is None
    assert not Path(f"{header}.gch").exists() and not list(header.parent.glob("*.tmp"))


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_a_compile_error_is_not_paid_for_again_until_the_text_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    art = _artifact(tmp_path, "#pragma once\n#include <no_such_header_kw.h>\n")
    assert not art.build(120) and art.failed()
    assert "no_such_header_kw.h" in (art.failure() or "")  # g++'s own words, for whoever asks why
    calls: list[Any] = []
    real_run = slim_header.subprocess.run
    monkeypatch.setattr(slim_header.subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    assert not art.build(120) and not calls  # the same text and command: g++ is not started again
    fixed = dataclasses.replace(art, text="#pragma once\n#include <cstddef>\n")
    assert not fixed.failed()
    assert fixed.build(120) and len(calls) == 1 and fixed.ready() is not None


def test_a_timeout_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(*args: Any, **kwargs: Any) -> Any:
        raise subprocess.TimeoutExpired("c++", 1)

    monkeypatch.setattr(slim_header.subprocess, "run", slow)
    art = _artifact(tmp_path, "#pragma once\n")
    assert not art.build(1) and not art.failed()  # a busy host, not a fact about the text


def test_known_failures_start_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every verify_many call asks for the headers; one g++ rejects is not built by each of them."""
    monkeypatch.setattr(slim_header.HostArtifact, "ready", lambda self: None if self is slim_header.SLIM else HEADER)
    monkeypatch.setattr(slim_header.HostArtifact, "failed", lambda self: self is slim_header.SLIM)
    monkeypatch.setattr(slim_header.subprocess, "run", lambda *a, **k: pytest.fail("started a process"))
    assert not slim_header.build_in_subprocess(60)


def test_std_flag_follows_torch_signature_else_torch_source(tmp_path: Path) -> None:
    include_torch = tmp_path / "include" / "torch"
    include_torch.mkdir(parents=True)
    assert slim_header._std_flag(include_torch) == "-std=c++17"  # neither a signature nor torch's source
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "cpp_extension.py").write_text(
        "def _write(): flags = ['-std=c++14']\n\ndef _check_and_build_extension_h_precompiler_headers(a):\n"
        "    common_cflags += ['-std=c++20', '-fPIC']\n\ndef later(): pass\n")
    assert slim_header._std_flag(include_torch) == "-std=c++20"  # a signature deleted by a stock load_inline
    (include_torch / "extension.h.sign").write_text("c++_-x_c++-header_/a_b/extension.h_-DX_-std=c++23_-fPIC")
    assert slim_header._std_flag(include_torch) == "-std=c++23"


def test_verify_config_slim_header_reaches_the_worker_spec() -> None:
    from kernelwright.verifier.config import VerifyConfig
    from kernelwright.verifier.verify import make_spec

    assert make_spec(VerifyConfig(problem="p.py", candidate="c.py")).slim_header is True
    assert make_spec(VerifyConfig(problem="p.py", candidate="c.py", slim_header=False)).slim_header is False
    assert make_spec(VerifyConfig(problem="p.py", candidate="c.py")).generic_bindings is True
    spec = make_spec(VerifyConfig(problem="p.py", candidate="c.py", generic_bindings=False))
    assert spec.generic_bindings is False
    from kernelwright.verifier.judge_process import _settings

    assert _settings(spec, Path("/scratch"))["generic_bindings"] is False  # what the runner reads


def test_up_to_date_artifacts_start_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every verify_many call asks for the headers; once built, the answer costs no Python start."""
    monkeypatch.setattr(slim_header.HostArtifact, "ready", lambda self: HEADER)
    monkeypatch.setattr(slim_header.subprocess, "run", lambda *a, **k: pytest.fail("started a process"))
    assert slim_header.build_in_subprocess(60)


def test_command_takes_the_compiler_from_cxx_like_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CXX", "g++-12")
    art = _artifact(tmp_path, "")
    cmd = art.command()
    assert cmd[0] == "g++-12" and cmd[1:3] == ["-x", "c++-header"]
    assert cmd[5] == f"{art.path()}.gch"
    assert _artifact(tmp_path, "", ".o").command()[1:5] == ["-x", "c++", "-c", "-O2"]
