"""The generic bindings of split builds' host files (kernelwright.cuda.host_bindings)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kernelwright.cuda import slim_header
from kernelwright.cuda.host_bindings import Bound, bound_functions, shim


@pytest.mark.parametrize("decl, result, params", [
    ("torch::Tensor f(torch::Tensor x);", "T", "T"),
    ("at::Tensor f(const at::Tensor& x, torch::Tensor &y, Tensor z);", "T", "TTT"),
    ("static inline torch::Tensor f(torch::Tensor x, int64_t n, long m, long long k, int i) { return x; }", "T",
     "Tllli"),
    ("void f(torch::Tensor x, double s = 1.0, float t, bool b, const int64_t& n);", "v", "Tdfbl"),
    ("std::vector<torch::Tensor> f(torch::Tensor x);", "V", "T"),
    ("std::tuple<torch::Tensor, at::Tensor> f(torch::Tensor x) { return {x, x}; }", "U", "T"),
    ("int64_t f(void);", "l", ""),
    ("bool f();", "b", ""),
    ("const torch::Tensor f(torch::Tensor /*x*/);", "T", "T"),
    ("torch::Tensor f(c10::optional<torch::Tensor> b, const std::optional<at::Tensor>& c, std::vector<int64_t> s,"
     " const std::vector<double>& w, std::vector<long> k);", "T", "OOLDL"),
    ("torch::Tensor f(const std::vector<torch::Tensor>& xs, std::vector<at::Tensor> ys, std::vector<int> k,"
     " c10::optional<int64_t> n, const std::optional<double>& e, std::optional<long> m);", "T", "VVIqpq"),
])
def test_signatures_the_generic_bindings_convert(decl: str, result: str, params: str) -> None:
    assert bound_functions([decl], ["f"]) == [Bound("f", "f", result, params)]


@pytest.mark.parametrize("decl", [
    "torch::Tensor f(c10::optional<float> x);",  # a type it does not convert
    "torch::Tensor f(std::vector<torch::Tensor>& xs);",  # a list by non-const reference
    "torch::Tensor f(std::vector<float> xs);",
    "torch::Tensor f(std::vector<long long> xs);",
    "torch::Tensor f(std::vector<int64_t>& xs);",  # a list by non-const reference
    "torch::Tensor f(float* p);",  # a pointer
    "torch::Tensor f(torch::Tensor&& x);",  # an rvalue reference
    "torch::Tensor f(int64_t& n);",  # a scalar by non-const reference
    "torch::Tensor f(unsigned n);",
    "torch::Tensor& f(torch::Tensor& x);",  # a reference result
    "std::tuple<torch::Tensor, int64_t> f(torch::Tensor x);",  # a tuple of mixed types
    "auto f(torch::Tensor x) { return x; }",
    "torch::Tensor f(torch::Tensor x);\ntorch::Tensor f(torch::Tensor x, double s);",  # an overload
    "namespace k { torch::Tensor f(torch::Tensor x); }",  # not at top level
    "torch::Tensor f(torch::Tensor x);\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}",  # its own bindings
])
def test_signatures_out_of_scope_say_why(decl: str) -> None:
    assert isinstance(bound_functions([decl], ["f"]), str)


def test_functions_as_torch_takes_them() -> None:
    decl = ["torch::Tensor f(torch::Tensor x);", "torch::Tensor g(torch::Tensor x) { return x; }"]
    assert [b.name for b in bound_functions(decl, "f")] == ["f"]  # type: ignore[union-attr]
    assert bound_functions(decl, {"f": "doc of f", "g": "doc of g"}) == [Bound("f", "doc of f", "T", "T"),
                                                                          Bound("g", "doc of g", "T", "T")]
    # a declaration and its definition agree: one signature
    assert bound_functions([decl[0], "at::Tensor f(const at::Tensor& x) { return x; }"], ["f"]) \
        == [Bound("f", "f", "T", "T")]
    for functions in (None, [], {}, ["f", "f"], ["f(x)"], [1]):
        assert isinstance(bound_functions(decl, functions), str)


def test_shim_quotes_docstrings_and_names_the_module_after_the_extension() -> None:
    text = shim([Bound("f", 'say "hi"\\ ??=\n\u00e9', "U", "Tl")])
    assert '"say \\042hi\\042\\134 \\077\\077=\\012\\303\\251"' in text
    assert "kw_tuple(f(*static_cast<at::Tensor*>(kw_a[0]), *static_cast<int64_t*>(kw_a[1]))" in text
    assert "KW_CAT(PyInit_, TORCH_EXTENSION_NAME)" in text and '"U:Tl"' in text


CPP = r"""
torch::Tensor scale(torch::Tensor x, double s) {
    TORCH_CHECK(x.dim() == 1, "x must be 1-D, got ", x.dim());
    return x * s;
}
std::tuple<torch::Tensor, torch::Tensor> split2(const torch::Tensor& x, int64_t k) {
    return {x.slice(0, 0, k), x.slice(0, k)};
}
std::vector<at::Tensor> many(torch::Tensor x, int n) { return std::vector<at::Tensor>(n, x); }
void fill(torch::Tensor x, float v, bool twice) { x.fill_(twice ? 2 * v : v); }
int64_t count(const torch::Tensor& x) { return x.numel(); }
bool check(torch::Tensor x) { TORCH_CHECK_INDEX(x.numel() < 3, "bad index ", x.numel()); return true; }
double half(double v) { TORCH_WARN("halving ", v); return v / 2; }
torch::Tensor shaped(torch::Tensor x, c10::optional<torch::Tensor> b, std::vector<int64_t> shape,
                     const std::vector<double>& ws) {
    auto y = x.reshape(shape) * (ws.empty() ? 1.0 : ws[0]);
    return b.has_value() ? y + b->reshape(shape) : y;
}
torch::Tensor joined(const std::vector<torch::Tensor>& xs, std::vector<int> dims, c10::optional<int64_t> n,
                     std::optional<double> scale) {
    TORCH_CHECK(!xs.empty(), "no tensors");
    auto y = torch::cat(xs, dims.empty() ? 0 : dims[0]);
    if (n.has_value()) y = y.slice(0, 0, *n);
    return scale.has_value() ? y * *scale : y;
}
"""
FUNCTIONS = {"scale": "scale x by s", "split2": "split2", "many": "many", "fill": "fill", "count": "count",
             "check": "check", "half": "half", "shaped": "shaped", "joined": "joined"}


def _calls() -> list[tuple[str, tuple[Any, ...]]]:
    import torch

    x = torch.arange(6.0)
    return [("scale", (x, 2.0)), ("scale", (x, 2)), ("scale", (x.view(2, 3), 2.0)), ("scale", (x,)),
            ("scale", ("a", 1.0)), ("scale", (torch.nn.Parameter(x), 1.0)), ("split2", (x, 2)),
            ("split2", (x, 2.5)), ("split2", (x, True)), ("many", (x, 3)), ("many", (x, 2**40)),
            ("fill", (x.clone(), 3.0, True)), ("fill", (x.clone(), 3, 1)), ("count", (x,)), ("count", (None,)),
            ("check", (x[:2],)), ("check", (x,)), ("half", (3,)), ("half", (x,)),
            ("shaped", (x, None, [2, 3], [2.0])), ("shaped", (x, x, (3, 2), [])), ("shaped", (x, None, [6], [1])),
            ("shaped", (x, None, [2.5, 3], [1.0])), ("shaped", (x, "b", [6], [1.0])), ("shaped", (x, None, 6, [1.0])),
            ("shaped", (x, None, [7], [1.0])), ("shaped", (x, None, [6], ["a"])),
            ("joined", ([x, x], [0], None, None)), ("joined", ((x, x[:2]), [], 3, 0.5)), ("joined", ([], [0], 1, 2)),
            ("joined", ([x, "a"], [0], None, None)), ("joined", ([x], [0], 2.5, None)), ("joined", ([x], [0], None, 2)),
            ("joined", (x, [0], None, None)), ("joined", ([x, x.view(2, 3)], [0], None, None))]


def _outcome(fn: Any, args: tuple[Any, ...]) -> tuple[str, str]:
    import warnings

    import torch

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            out = fn(*args)
        except Exception as exc:  # noqa: BLE001 - the exception is the outcome compared
            return type(exc).__name__, str(exc).splitlines()[0] if type(exc) is not TypeError else ""
    parts = out if isinstance(out, (list, tuple)) else [out]
    shown = [o.tolist() if isinstance(o, torch.Tensor) else o for o in parts]
    said = "".join(str(w.message).split(" (Triggered internally")[0] for w in seen)  # less the file and line
    return type(out).__name__, repr(shown) + said


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_generic_bindings_behave_as_torchs_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same host code bound by torch's `load_inline(functions=...)` and by the generic bindings
    (bare header, the object linked in): every call, good or bad, has the same outcome (35 calls)."""
    import torch.utils.cpp_extension as ext

    monkeypatch.setattr(ext, "remove_extension_h_precompiler_headers", lambda: None)  # other tests' headers
    assert slim_header.BARE.build(600) and slim_header.BINDINGS.build(600), slim_header.failures()
    bare = slim_header.bare_ready()
    assert bare is not None
    bound = bound_functions([CPP], FUNCTIONS)
    assert not isinstance(bound, str)
    for sub in ("generic", "torch"):
        (tmp_path / sub).mkdir()
    generic = ext.load_inline("kw_generic_bindings_test", [f'#include "{bare[0]}"', CPP, shim(bound)],
                              functions=None, extra_ldflags=[bare[1]], no_implicit_headers=True, with_cuda=False,
                              build_directory=str(tmp_path / "generic"))
    own = ext.load_inline("kw_torch_bindings_test", ["#include <torch/types.h>\n#include <torch/python.h>", CPP],
                          functions=FUNCTIONS, no_implicit_headers=True, with_cuda=False,
                          build_directory=str(tmp_path / "torch"))
    for name, args in _calls():
        assert _outcome(getattr(generic, name), args) == _outcome(getattr(own, name), args), (name, args)
    assert generic.scale.__doc__.rstrip().endswith("scale x by s")
    assert "pybind11" not in (tmp_path / "generic" / "main.cpp").read_text()


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_the_shim_survives_the_candidates_short_macros(tmp_path: Path) -> None:
    """Host code defines macros before the shim (`#define T 16` in a seed solution): the shim's own
    names must not be one of them. Checked by compiling the shim after torch/types.h with them."""
    import subprocess

    import torch.utils.cpp_extension as ext

    macros = "".join(f"#define {m} 16\n" for m in ("T", "U", "V", "N", "K", "x", "t", "out", "fn", "args", "r", "a"))
    decl = "std::tuple<torch::Tensor, torch::Tensor> f(torch::Tensor x, int64_t n);"
    src = tmp_path / "host.cpp"
    src.write_text("#include <torch/types.h>\n" + decl + "\n" + macros + shim(bound_functions([decl], ["f"])))
    includes = [f"-I{p}" for p in ext.include_paths()]
    proc = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-DTORCH_EXTENSION_NAME=kw_m", *includes, str(src)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
