"""Compile check on the CPU: NVRTC device stage, host stage (libclang, and g++ where it says so),
include policy, limits, cache.

The host stage needs the precompiled torch/extension.h (libclang: ~15 s to build once, 0.1 GB;
g++: ~45 s, 0.8 GB); it is built into a temporary folder per run, or kept in $KW_TEST_PCH_DIR
when that is set.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from kernelwright.cuda import compile_workers, host_compile
from kernelwright.cuda.candidate_sources import candidate_sources
from kernelwright.cuda.compile_check import CompileCheckSettings, allowed_roots, check_candidate, check_many
from kernelwright.cuda.compile_log import filter_log
from kernelwright.cuda.compile_workers import Limits, run_limited
from kernelwright.cuda.include_policy import refused_includes
from kernelwright.cuda.nvrtc import program
from kernelwright.cuda.source_views import device_view, host_view
from kernelwright.seed import load_seed_tasks

TASKS = load_seed_tasks()
SEED = TASKS[0].solution  # convolution_conv1d_basic
DEVICE_SAMPLE = [t.solution for t in TASKS[::12]]  # 6 tasks across the categories
HOST_SAMPLE = [TASKS[0].solution]  # one host compile per seed costs ~8 s here: all 72 run under `slow`
BROKEN_DEVICE = SEED.replace("const int tid = threadIdx.x;", "const int tid = threadIdx.x +;")
BROKEN_HOST = SEED.replace("auto xc = x.contiguous();", "auto xc = x.contiguous_typo();").replace(
    "#include <cuda_runtime.h>", "#include <cuda_runtime.h>\n#include <ATen/cuda/CUDAContext.h>", 1)  # needs shims
TREE = """
template <int D, long I> struct KwTree {
    static constexpr long v = KwTree<D - 1, 2 * I>::v + KwTree<D - 1, 2 * I + 1>::v;
};
template <long I> struct KwTree<0, I> { static constexpr long v = I; };
"""
SLOW = f'''from torch.utils.cpp_extension import load_inline
src = r"""{TREE}
__global__ void k(long* o) {{ *o = KwTree<24, 0>::v; }}
long host_side() {{ return KwTree<24, 0>::v; }}
"""
ext = load_inline(name="slow", cpp_sources="", cuda_sources=src)
'''


def _candidate(cuda: str, cpp: str = "", functions: str = "None") -> str:
    return (f"from torch.utils.cpp_extension import load_inline\ncuda_src = r'''{cuda}'''\ncpp_src = r'''{cpp}'''\n"
            f"ext = load_inline(name='t', cpp_sources=cpp_src, cuda_sources=cuda_src, functions={functions})\n")


def _line_of(source: str, needle: str) -> int:
    cuda = candidate_sources(source).builds[0].cuda[0]
    return next(i for i, line in enumerate(cuda.splitlines(), 1) if needle in line)


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, pch_dir: Path) -> CompileCheckSettings:
    pch = pch_dir
    return CompileCheckSettings(cache_dir=tmp_path_factory.mktemp("cc"), pch_dir=pch, timeout_s=180, workers=2,
                                host_frontend="libclang")


@pytest.fixture(scope="module")
def gcc_settings(settings: CompileCheckSettings, tmp_path_factory: pytest.TempPathFactory) -> CompileCheckSettings:
    return CompileCheckSettings(cache_dir=tmp_path_factory.mktemp("gcc"), pch_dir=settings.pch_dir, timeout_s=180,
                                workers=2, host_frontend="gcc")


@pytest.fixture(scope="module")
def device_only(settings: CompileCheckSettings, tmp_path_factory: pytest.TempPathFactory) -> CompileCheckSettings:
    return CompileCheckSettings(cache_dir=tmp_path_factory.mktemp("dev"), pch_dir=settings.pch_dir, host=False)


@pytest.fixture(scope="module")
def host_batch(settings: CompileCheckSettings) -> list:
    return check_many([*HOST_SAMPLE, BROKEN_HOST], settings)


@pytest.fixture(scope="module")
def gcc_host_batch(gcc_settings: CompileCheckSettings) -> list:
    return check_many([*HOST_SAMPLE, BROKEN_HOST], gcc_settings)


BATCHES = ["host_batch", "gcc_host_batch"]


# ------------------------------------------------------------------------- both stages


def test_seed_sample_passes_device_stage(device_only: CompileCheckSettings) -> None:
    results = check_many(DEVICE_SAMPLE, device_only)
    assert [(r.device.status, r.host.status) for r in results] == [("ok", "skipped")] * len(DEVICE_SAMPLE), \
        [r.device.log[:300] for r in results]
    assert all(r.host.log == "not run: the host stage is turned off (CompileCheckSettings.host)" for r in results)
    assert all(r.ok and r.cuda_sources and r.device.seconds > 0 for r in results)


@pytest.mark.parametrize("batch", BATCHES)
def test_seed_sample_passes_both_stages(batch: str, request: pytest.FixtureRequest) -> None:
    for r in request.getfixturevalue(batch)[: len(HOST_SAMPLE)]:
        assert (r.ok, r.device.status, r.host.status) == (True, "ok", "ok"), (r.device.log, r.host.log)
        assert r.host.seconds > 0 and not r.host.cached


def test_broken_kernel_fails_the_device_stage_naming_the_line(device_only: CompileCheckSettings) -> None:
    r = check_candidate(BROKEN_DEVICE, device_only)
    assert (r.ok, r.device.status) == (False, "failed")
    line = _line_of(BROKEN_DEVICE, "const int tid = threadIdx.x +;")
    assert f"cuda_sources[0]({line}): error" in r.device.log, r.device.log


@pytest.mark.parametrize("batch", BATCHES)
def test_broken_host_wrapper_fails_the_host_stage(batch: str, request: pytest.FixtureRequest) -> None:
    r = request.getfixturevalue(batch)[-1]
    assert (r.ok, r.device.status, r.host.status) == (False, "ok", "failed")
    line = _line_of(BROKEN_HOST, "contiguous_typo")
    assert re.search(rf"cuda_sources\[0\]:{line}:\d+: error: .*contiguous_typo", r.host.log), r.host.log
    assert "No such file" not in r.host.log and "CUDAContext" not in r.host.log  # the CUDA headers resolved


@pytest.mark.parametrize("batch", BATCHES)
def test_host_log_quotes_only_the_candidates_own_lines(batch: str, request: pytest.FixtureRequest) -> None:
    log = request.getfixturevalue(batch)[-1].host.log
    if batch == "gcc_host_batch":
        assert "torch/include" in log  # g++'s notes point into torch's headers (file and line only)
    own = "\n".join(candidate_sources(BROKEN_HOST).builds[0].cuda)
    quoted = [m.group(1).strip() for m in re.finditer(r"^\s*\d+ \|(.*)$", log, re.M)]  # `  68 | source line`
    assert any("contiguous_typo" in q for q in quoted), log
    assert all(q in own for q in quoted), [q for q in quoted if q not in own]


def test_filter_log_drops_header_excerpts() -> None:
    gcc = ("In file included from /usr/include/x.h:3,\n                 from cuda_sources[0]:1:\n"
           "/usr/include/y.h:7:5: note: declared here\n    7 | secret header text\n      |     ^~~\n"
           "cuda_sources[0]:4:2: error: bad\n    4 |   my line\n      |   ^\n")
    assert filter_log(gcc, {"cuda_sources[0]"}).splitlines() == [
        "                 from cuda_sources[0]:1:", "/usr/include/y.h:7:5: note: declared here",
        "cuda_sources[0]:4:2: error: bad", "    4 |   my line", "      |   ^"]
    edg = ('/opt/h.h(9): error: in header\n    secret text\n    ^\n\ncuda_sources[0](2): error: mine\n  x = y;\n'
           '1 error detected in the compilation of "kw_device.cu".')
    kept = filter_log(edg, {"cuda_sources[0]"})
    assert "secret" not in kept and "/opt/h.h(9): error: in header" in kept and "  x = y;" in kept


# ----------------------------------------------------------------------------- includes

INJECTIONS = {
    "absolute": '#include "/etc/passwd"',
    "dotdot": "#include <../../etc/passwd>",
    "stringify": "#define P(x) #x\n#include P(/etc/passwd)",
    "file_macro": "#include __FILE__",
    "pasted": "#define CAT(a, b) a##b\n#include CAT(<cuda_fp16, .h>)",
    "spliced": '#inc\\\nlude "/etc/passwd"',
    "line_marker": '#line 1 "/etc/passwd"\n#error leak',
}


@pytest.mark.parametrize("name", sorted(INJECTIONS))
def test_include_injection_is_refused_before_compiling(name: str, device_only: CompileCheckSettings) -> None:
    cuda = INJECTIONS[name] + "\n__global__ void k(float* x) { x[0] = 1.0f; }\n"
    before = dict(compile_workers.COMPILES)
    r = check_candidate(_candidate(cuda), device_only)
    assert (r.ok, r.device.status, r.host.status) == (False, "failed", "skipped")
    assert r.device.log.startswith("include_refused: cuda_sources[0]:"), r.device.log
    assert r.host.log == "not run: an #include was refused (see the device stage)"
    assert "root:" not in r.device.log and dict(compile_workers.COMPILES) == before


def test_a_refused_include_fails_the_stage_of_its_source(settings: CompileCheckSettings) -> None:
    cuda = "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    before = dict(compile_workers.COMPILES)
    cpp_only = check_candidate(_candidate(cuda, cpp=INJECTIONS["absolute"]), settings)
    both = check_candidate(_candidate(INJECTIONS["dotdot"] + "\n" + cuda, cpp=INJECTIONS["absolute"]), settings)
    assert (cpp_only.ok, cpp_only.device.status, cpp_only.host.status) == (False, "skipped", "failed")
    assert cpp_only.host.log.startswith("include_refused: cpp_sources[0]:1:"), cpp_only.host.log
    assert cpp_only.device.log == "not run: an #include was refused (see the host stage)"
    assert (both.device.status, both.host.status) == ("failed", "failed")
    assert "cuda_sources[0]" in both.device.log and "cpp_sources" not in both.device.log
    assert "cpp_sources[0]" in both.host.log and "cuda_sources" not in both.host.log
    assert dict(compile_workers.COMPILES) == before


def test_function_names_are_not_pasted_into_the_bindings(device_only: CompileCheckSettings) -> None:
    cuda = "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    r = check_candidate(_candidate(cuda, functions="['f\\n#include \"/etc/passwd\"\\n']"), device_only)
    assert (r.ok, r.host.status) == (False, "failed") and r.host.log.startswith("functions_refused:"), r.host.log
    assert r.device.status == "skipped" and "functions named for the bindings were refused" in r.device.log


@pytest.mark.parametrize(("source", "log", "reason"), [
    (SEED.replace("class ModelNew(", "class ModelNew((", 1), "python_syntax: line ", "the Python source did not parse"),
    ("import torch\nx = 1\n", "no_cuda_source: ", "no CUDA source was found"),
    (_candidate("__global__ void k() {}").replace("cuda_sources=cuda_src", "cuda_sources=cuda_source"),
     "unbound_name: load_inline reads cuda_sources=cuda_source, a name the file never binds",
     "a load_inline source is a name the file never binds"),
])
def test_a_candidate_refused_before_compiling_skips_the_stage_that_never_ran(source: str, log: str, reason: str,
                                                                            settings: CompileCheckSettings) -> None:
    before = dict(compile_workers.COMPILES)
    r = check_candidate(source, settings)
    assert (r.ok, r.device.status, r.host.status) == (False, "failed", "skipped")
    assert r.device.log.startswith(log), r.device.log
    assert r.host.log == f"not run: {reason} (see the device stage)" and r.host.seconds == 0
    assert dict(compile_workers.COMPILES) == before


def test_refusal_names_the_include_and_reason(settings: CompileCheckSettings) -> None:
    refused = refused_includes([("cuda_sources[0]", "#include <a.h>\n\n#include <../x>\n")], allowed_roots(settings))
    assert [r.log_line() for r in refused] == [
        "include_refused: cuda_sources[0]:1: #include <a.h>: not a system, CUDA or torch header",
        "include_refused: cuda_sources[0]:3: #include <../x>: '..' in the path"]


def test_system_cuda_and_torch_headers_pass(settings: CompileCheckSettings, device_only: CompileCheckSettings) -> None:
    includes = "#include <cuda_fp16.h>\n#include <torch/extension.h>\n#include <cstdint>\n"
    assert refused_includes([("cuda_sources[0]", includes)], allowed_roots(settings)) == []
    kernel = includes + "__global__ void k(__half* x, int64_t n) { if (threadIdx.x < n) x[0] = __float2half(1.f); }"
    r = check_candidate(_candidate(kernel), device_only)
    assert r.ok, r.device.log


# ------------------------------------------------------------------------ limits, cache


def test_runaway_compile_is_stopped_at_the_time_limit(tmp_path: Path, settings: CompileCheckSettings) -> None:
    limited = CompileCheckSettings(cache_dir=tmp_path, pch_dir=settings.pch_dir, timeout_s=2, workers=2)
    start = time.perf_counter()
    r = check_candidate(SLOW, limited)
    assert (r.ok, r.device.status, r.host.status) == (False, "failed", "failed")
    assert r.device.log.startswith("timeout:") and r.host.log.startswith("timeout:"), (r.device.log, r.host.log)
    assert r.device.seconds < 5 and r.host.seconds < 5
    assert time.perf_counter() - start < 120  # the header build aside, nothing waited on the runaway
    assert not list((tmp_path / "results").rglob("*.json"))  # a stopped compile is not cached
    assert check_candidate(SEED, CompileCheckSettings(cache_dir=tmp_path, host=False, timeout_s=30)).ok


def test_compiler_subprocess_limits(tmp_path: Path) -> None:
    src = tmp_path / "tree.cpp"
    src.write_text(TREE + "long f() { return KwTree<24, 0>::v; }\n")
    cmd = ["g++", "-std=c++20", "-fsyntax-only", str(src)]
    slow = run_limited(cmd, Limits(timeout_s=1, memory_mb=0), cwd=str(tmp_path))
    assert (slow.returncode, slow.limit) == (None, "timeout") and slow.seconds < 4
    small = run_limited(cmd, Limits(timeout_s=20, memory_mb=48), cwd=str(tmp_path))
    assert small.returncode != 0 and small.limit == "memory_limit", small.output


def test_second_check_compiles_nothing(host_batch: list, settings: CompileCheckSettings) -> None:
    before = dict(compile_workers.COMPILES)
    again = check_many([*HOST_SAMPLE, BROKEN_HOST], settings)
    assert dict(compile_workers.COMPILES) == before
    assert all(r.device.cached and r.host.cached for r in again)
    assert [(r.ok, r.device.status, r.host.status, r.host.log) for r in again] == \
        [(r.ok, r.device.status, r.host.status, r.host.log) for r in host_batch]


def test_unloadable_nvrtc_is_unavailable_not_ok(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def no_nvrtc() -> None:
        raise ImportError("no NVRTC wheel for this platform")

    monkeypatch.setattr(program, "load_nvrtc", no_nvrtc)
    r = check_candidate(SEED, CompileCheckSettings(cache_dir=tmp_path, host=False))
    assert (r.ok, r.device.status) == (False, "unavailable") and "NVRTC" in r.device.log


def test_missing_compiler_makes_the_host_stage_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(host_compile, "find_compiler", lambda: None)
    r = check_candidate(SEED, CompileCheckSettings(cache_dir=tmp_path))
    assert (r.ok, r.device.status, r.host.status) == (False, "ok", "unavailable")


# ------------------------------------------------------------------------ sources, views


def test_sources_resolved_without_running_the_candidate() -> None:
    source = ('import os\nos.system("touch /tmp/kw_should_not_run")\nTILE = 16\nhead = f"#define TILE {TILE}\\n"\n'
              'body = "__global__ void k() {}"\nkernels = [head + body]\n'
              'm = load_inline("m", cpp_sources="void f();", cuda_sources=kernels, functions={"f": "doc"})\n')
    build = candidate_sources(source).builds[0]
    assert build.cuda == ["#define TILE 16\n__global__ void k() {}"]
    assert (build.cpp, build.functions) == (["void f();"], ["f"])
    assert (candidate_sources("def f(:\n").problem or "").startswith("python_syntax")
    fallback = candidate_sources('src = "__global__ void k() {}" * 1\nload_inline("m", "", src)\n')
    assert not fallback.builds[0].resolved and fallback.cuda == ["__global__ void k() {}"]


@pytest.mark.parametrize("binding", [
    "cuda_src = '__global__ void k() {}'",  # plain assignment
    "from kernels import cuda_src",  # imported
    "def build(cuda_src):\n    return load_inline('m', '', cuda_src)",  # an argument
    "for cuda_src in ['__global__ void k() {}']:\n    pass",  # a loop target
    "with open('k.cu') as cuda_src:\n    pass",  # a with target
    "if (cuda_src := '__global__ void k() {}'):\n    pass",  # a walrus
    "from kernels import *",  # bound out of sight: never called unbound
    "exec('cuda_src = 1')",  # the same
])
def test_a_source_name_bound_anywhere_is_not_called_unbound(binding: str) -> None:
    source = f"{binding}\next = load_inline('m', cpp_sources='', cuda_sources=cuda_src)\n"
    assert candidate_sources(source).unbound == [], binding


def test_only_names_bound_nowhere_are_unbound() -> None:
    source = ("import torch\nsrc = '__global__ void k() {}'\n"
              "ext = load_inline('m', cpp_sources=cpp_text, cuda_sources=[src, extra], functions=len and names)\n")
    found = candidate_sources(source)
    assert found.unbound == [("cpp_sources", "cpp_text"), ("cuda_sources", "extra"), ("functions", "names")]
    assert not found.builds and (found.problem or "").startswith("unbound_name: ")


def test_views_keep_every_line_in_place() -> None:
    cuda = ("#include <torch/extension.h>\n__global__ void k(float* x) {\n  x[0] = 1;\n}\n"
            "torch::Tensor f(torch::Tensor t) {\n  k<<<dim3(1),\n    32>>>(t.data_ptr<float>());\n  return t;\n}\n")
    host, device = host_view(cuda), device_view(cuda)
    assert host.count("\n") == device.count("\n") == cuda.count("\n")
    assert "(::kw_launch_config(dim3(1),\n    32), k)(t.data_ptr<float>());" in host and "x[0]" not in host
    assert "x[0] = 1;" in device.splitlines()[2] and "torch::Tensor" not in device


def test_every_setting_has_help() -> None:
    assert set(CompileCheckSettings.help()) == {"arch", "cache_dir", "timeout_s", "memory_mb", "host", "workers",
                                                "host_frontend", "pch_dir"}
    assert all(len(h) > 20 for h in CompileCheckSettings.help().values())


def test_every_seed_solution_passes_both_stages(settings: CompileCheckSettings) -> None:
    """All 72 through libclang's host check (about a minute on 2 cores)."""
    results = check_many([t.solution for t in TASKS], settings)
    failed = [(t.id, r.device.log[:200], r.host.log[:200]) for t, r in zip(TASKS, results, strict=True) if not r.ok]
    assert not failed


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KERNELWRIGHT_FULL_COMPILE_CHECK"),
                    reason="all 72 seed solutions through g++'s host check take ~7 min on 2 cores: set "
                           "KERNELWRIGHT_FULL_COMPILE_CHECK=1 (bench/compile_check.py --host-frontend gcc)")
def test_every_seed_solution_passes_both_stages_with_gcc(gcc_settings: CompileCheckSettings) -> None:
    results = check_many([t.solution for t in TASKS], gcc_settings)
    assert not [t.id for t, r in zip(TASKS, results, strict=True) if not r.ok]


def test_a_host_frontend_is_named_or_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="host_frontend"):
        CompileCheckSettings(cache_dir=tmp_path, host_frontend="msvc")


def test_without_libclang_auto_takes_gcc_and_libclang_says_why(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.cuda import clang_host, compile_stages

    monkeypatch.setattr(clang_host, "version", lambda: None)
    auto = compile_stages.host_toolchain(CompileCheckSettings(cache_dir=tmp_path))
    assert not isinstance(auto, str) and auto[0] == host_compile.find_compiler()
    named = compile_stages.host_toolchain(CompileCheckSettings(cache_dir=tmp_path, host_frontend="libclang"))
    assert isinstance(named, str) and "libclang package is not installed" in named


def test_a_libclang_header_that_cannot_be_built_sends_auto_to_gcc(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.cuda import clang_host, compile_stages

    monkeypatch.setattr(clang_host, "version", lambda: "18.1.1")
    monkeypatch.setattr(clang_host, "ensure_pch", lambda root, flags: None)
    monkeypatch.setattr(host_compile, "ensure_pch", lambda root, cxx, flags: tmp_path / "gcc-header")
    auto = compile_stages.toolchain(CompileCheckSettings(cache_dir=tmp_path))
    assert not isinstance(auto, str) and auto[0] == host_compile.find_compiler() and auto[2] == tmp_path / "gcc-header"
    named = compile_stages.toolchain(CompileCheckSettings(cache_dir=tmp_path, host_frontend="libclang"))
    assert not isinstance(named, str) and named[0] == clang_host.FRONTEND and named[2] is None
