"""Build failures are `compile_error`, naming the stage that failed and the compiler's first error.

Logs below are written in the formats of ninja -v (as torch.utils.cpp_extension runs it), nvcc's
front end, ptxas, nvlink, g++ and GNU ld; the real builds use torch's cpp_extension and g++ here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelwright.verifier.build_failure import build_failure
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.isolation import classify_failure
from kernelwright.verifier.runner import Runner
from kernelwright.verifier.verify import verify_many

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verify"
BUILD = "/root/.cache/torch_extensions/py311_cu130/fused_ext"
NVCC = (f"/usr/local/cuda/bin/nvcc --generate-dependencies-with-compile --dependency-output cuda.cuda.o.d "
        f"-DTORCH_EXTENSION_NAME=fused_ext -DTORCH_API_INCLUDE_EXTENSION_H -isystem /opt/torch/include "
        f"-D__CUDA_NO_HALF_OPERATORS__ --expt-relaxed-constexpr -gencode=arch=compute_90,code=sm_90 "
        f"--compiler-options '-fPIC' -O3 -std=c++17 -c {BUILD}/cuda.cu -o cuda.cuda.o ")
CXX = (f"c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=fused_ext -DTORCH_API_INCLUDE_EXTENSION_H "
       f"-isystem /opt/torch/include -fPIC -std=c++17 -c {BUILD}/main.cpp -o main.o ")
LINK = "c++ main.o cuda.cuda.o -shared -L/opt/torch/lib -lc10 -ltorch -L/usr/local/cuda/lib64 -lcudart -o fused_ext.so"
DLINK = "/usr/local/cuda/bin/nvcc cuda.cuda.o -dlink -o dlink.o -L/usr/local/cuda/lib64 -lcudadevrt"
STOPPED = "ninja: build stopped: subcommand failed.\n"

LOGS = {
    "nvcc": (f"[1/3] {NVCC}\nFAILED: cuda.cuda.o \n{NVCC}\n"
             f"{BUILD}/cuda.cu(27): error: identifier \"blockDimx\" is undefined\n"
             "      int idx = blockIdx.x * blockDimx + threadIdx.x;\n"
             "                             ^\n\n"
             f"{BUILD}/cuda.cu(41): error: no instance of overloaded function \"atomicAdd\" matches the argument list\n"
             "            argument types are: (double *, float)\n"
             "        atomicAdd(&out[0], v);\n        ^\n\n"
             f"2 errors detected in the compilation of \"{BUILD}/cuda.cu\".\n"
             f"[2/3] {CXX}\n" + STOPPED,
             "nvcc", "cuda.cuda.o", "cuda.cu(27): error: identifier \"blockDimx\" is undefined",
             "blockIdx.x * blockDimx"),
    "nvcc_ptxas": (f"[1/3] {CXX}\n[2/3] {NVCC}\nFAILED: cuda.cuda.o \n{NVCC}\n"
              "ptxas error   : Entry function '_Z11tile_kernelPKfPfi' uses too much shared data (0x30000 bytes, "
              "0xc000 max)\n" + STOPPED,
              "nvcc", "cuda.cuda.o",
              "ptxas error   : Entry function '_Z11tile_kernelPKfPfi' uses too much shared data", None),
    "host_compiler": (f"[1/3] {NVCC}\n[2/3] {CXX}\nFAILED: [code=1] main.o \n{CXX}\n"
                      "In file included from /opt/torch/include/pybind11/attr.h:13,\n"
                      "                 from /opt/torch/include/pybind11/detail/class.h:12,\n"
                      f"{BUILD}/main.cpp: In function 'PyObject* PyInit_fused_ext()':\n"
                      f"{BUILD}/main.cpp:12:1: error: redefinition of 'PyObject* PyInit_fused_ext()'\n"
                      "   12 | PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
                      "      | ^~~~~~~~~~~~~~~\n"
                      f"{BUILD}/main.cpp:5:1: note: 'PyObject* PyInit_fused_ext()' previously defined here\n"
                      "/opt/torch/include/pybind11/detail/common.h:439:33: note: in definition of macro "
                      "'PYBIND11_PLUGIN_IMPL'\n" + STOPPED,
                      "host_compiler", "main.o", "main.cpp:12:1: error: redefinition of 'PyObject* PyInit_fused_ext()'",
                      "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)"),
    "link": (f"[1/3] {NVCC}\n[2/3] {CXX}\n[3/3] {LINK}\nFAILED: fused_ext.so \n{LINK}\n"
             "/usr/bin/ld: cuda.cuda.o: in function `scale(at::Tensor)':\n"
             "tmpxft_0001_00000000-6_cuda.cudafe1.cpp:(.text+0x90): multiple definition of `scale(at::Tensor)'; "
             "main.o:main.cpp:(.text+0x0): first defined here\n"
             "collect2: error: ld returned 1 exit status\n" + STOPPED,
             "link", "fused_ext.so", "ld: cuda.cuda.o: in function `scale(at::Tensor)':", "multiple definition of"),
    "device_link": (f"[1/4] {NVCC}\n[2/4] {DLINK}\nFAILED: dlink.o \n{DLINK}\n"
                    "nvlink error   : Undefined reference to '_Z6helperf' in 'cuda.cuda.o'\n" + STOPPED,
                    "device_link", "dlink.o",
                    "nvlink error   : Undefined reference to '_Z6helperf' in 'cuda.cuda.o'", None),
}


def _failed_build(log: str) -> RuntimeError:
    """What cpp_extension raises: RuntimeError("Error building extension ...: <log>") from ninja's error."""
    try:
        try:
            raise subprocess.CalledProcessError(1, ["ninja", "-v"], output=log.encode())
        except subprocess.CalledProcessError as err:
            raise RuntimeError(f"Error building extension 'fused_ext': {log}") from err
    except RuntimeError as exc:
        return exc


@pytest.mark.parametrize("case", sorted(LOGS))
def test_each_stage_and_its_first_error_are_named(case: str) -> None:
    log, stage, target, first, excerpt = LOGS[case]
    reason, detail = classify_failure(_failed_build(log))
    assert reason == "compile_error"
    assert detail.startswith(f"build failed in {stage} ({target}): {first}"), detail
    if excerpt:
        assert excerpt in detail
    assert "ninja: build stopped" not in detail and "-isystem" not in detail and BUILD not in detail


def test_the_error_count_and_the_first_of_several() -> None:
    failure = build_failure(_failed_build(LOGS["nvcc"][0]))
    assert failure is not None and failure.errors == 2
    assert "atomicAdd" not in failure.first_error  # the second error is counted, not kept


def test_a_candidate_that_wraps_the_build_error_keeps_its_cause() -> None:
    try:
        try:
            raise _failed_build(LOGS["host_compiler"][0])
        except RuntimeError as exc:
            raise ValueError("could not build the fused kernel") from exc
    except ValueError as wrapped:
        assert classify_failure(wrapped)[0] == "compile_error"


def test_other_failures_are_not_build_failures() -> None:
    assert classify_failure(RuntimeError("Error building extension: not really"))[0] == "exception"
    try:
        subprocess.run(["false"], check=True)
    except subprocess.CalledProcessError as exc:
        assert build_failure(exc) is None  # a process, but no build tool
    direct = subprocess.CalledProcessError(1, ["g++-12", "-c", "k.cpp"], output=b"k.cpp:3:1: error: expected ';'\n")
    failure = build_failure(direct)
    assert failure is not None and (failure.stage, failure.first_error) == ("host_compiler",
                                                                           "k.cpp:3:1: error: expected ';'")


needs_toolchain = pytest.mark.skipif(shutil.which("c++") is None or shutil.which("ninja") is None,
                                     reason="needs a C++ compiler and ninja")


def _load(tmp_path: Path, name: str, sources: dict[str, str]) -> BaseException:
    from torch.utils.cpp_extension import load

    for file, text in sources.items():
        (tmp_path / file).write_text(text)
    build = tmp_path / name
    build.mkdir()
    with pytest.raises(Exception) as info:  # noqa: B017 - whatever cpp_extension raises is what is judged
        load(name, [str(tmp_path / f) for f in sources], build_directory=str(build), verbose=False)
    return info.value


@needs_toolchain
def test_real_builds_that_fail_in_each_host_stage(tmp_path: Path) -> None:
    compile_fail = _load(tmp_path, "kw_bf_compile", {"bad.cpp": "int f(int x) {\n  return x + undefined_name;\n}\n"})
    reason, detail = classify_failure(compile_fail)
    assert reason == "compile_error"
    assert detail.startswith("build failed in host_compiler (bad.o): bad.cpp:2:14: error: "), detail
    assert "undefined_name" in detail
    link_fail = _load(tmp_path, "kw_bf_link", {"a.cpp": "int dup() { return 1; }\n",
                                               "b.cpp": "int dup() { return 2; }\n"})
    reason, detail = classify_failure(link_fail)
    assert reason == "compile_error" and detail.startswith("build failed in link (kw_bf_link.so): "), detail
    assert "multiple definition of `dup()'" in detail
    load_fail = _load(tmp_path, "kw_bf_load", {"plain.cpp": "int g() { return 3; }\n"})
    reason, detail = classify_failure(load_fail)
    assert reason == "compile_error" and detail.startswith("build failed in load (kw_bf_load.so): ImportError"), detail


@needs_toolchain
def test_the_runner_names_a_build_that_fails_at_import(tmp_path: Path) -> None:
    (tmp_path / "bad.cpp").write_text("int f(int x) {\n  return x + undefined_name;\n}\n")
    candidate = tmp_path / "candidate.py"
    candidate.write_text("from torch.utils.cpp_extension import load\n"
                         f"_ext = load('kw_bf_runner', [{str(tmp_path / 'bad.cpp')!r}], "
                         f"build_directory={str(tmp_path)!r})\nclass ModelNew:\n    pass\n")
    settings = {"problem": str(FIXTURES / "problems" / "affine.py"), "candidate": str(candidate),
                "profiler_warm_up": False, "timing": {}}
    runner = Runner(settings, tmp_path, end=None)  # type: ignore[arg-type]
    reply = runner.answer("load", runner._load)
    assert reply["rejected"] == "compile_error"
    assert reply["detail"].startswith("build failed in host_compiler (bad.o): bad.cpp:2:14: error: "), reply


CASES: dict[str, dict[str, str]] = json.loads((FIXTURES / "build_failures" / "expected.json").read_text())


@pytest.mark.gpu
def test_build_failures_are_compile_errors_on_gpu(tmp_path: Path) -> None:
    names = sorted(CASES)
    cfgs = [VerifyConfig(problem=str(FIXTURES / "problems" / CASES[n]["problem"]),
                         candidate=str(FIXTURES / "build_failures" / n), compile_baseline=False,
                         build_cache=str(tmp_path / "builds")) for n in names]
    verdicts = dict(zip(names, verify_many(cfgs, jobs=4), strict=True))
    got = {n: (v.reason, v.detail[:300]) for n, v in verdicts.items()}
    assert all(v.reason == "compile_error" for v in verdicts.values()), got
    assert all(v.detail.startswith(f"build failed in {CASES[n]['stage']}") and CASES[n]["first_error"] in v.detail
               for n, v in verdicts.items()), got
