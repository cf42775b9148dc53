from __future__ import annotations

from kernelwright.cuda.static_checks import check_source

GOOD = '''
from torch.utils.cpp_extension import load_inline
src = r"""__global__ void k(float* x) { x[0] = 1; }
torch::Tensor run(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return x; }"""
ext = load_inline(name="e", cpp_sources="", cuda_sources=src, functions=["run"])
class ModelNew:
    def __init__(self):
        self.w = torch.randn(3)
    def forward(self, x):
        return ext.run(x.contiguous())
'''


def test_honest_candidate_passes() -> None:
    r = check_source(GOOD)
    assert r.ok, r.details
    assert (r.kernels, r.launches) == (1, 1)


def test_try_except_fallback_is_flagged() -> None:
    fallback = "        try:\n            return ext.run(x)\n        except Exception:\n            return x * 2"
    bad = GOOD.replace("        return ext.run(x.contiguous())", fallback)
    assert "fallback_try_except" in check_source(bad).reasons


def test_torch_compute_op_is_flagged() -> None:
    bad = GOOD.replace("return ext.run(x.contiguous())", "return torch.matmul(x, x)")
    assert check_source(bad).reasons == ["fallback_torch_op"]
    bad2 = GOOD.replace("return ext.run(x.contiguous())", "return x.softmax(-1)")
    assert check_source(bad2).reasons == ["fallback_torch_op"]


def test_missing_kernel_and_model_new() -> None:
    assert "no_kernel" in check_source("class ModelNew:\n    pass\n").reasons
    assert "no_model_new" in check_source(GOOD.replace("ModelNew", "Other")).reasons
    assert check_source("def f(:\n").reasons == ["syntax_error"]


def test_an_extension_function_named_like_a_tensor_method_is_the_candidates_own() -> None:
    source = '''
import torch
from torch.utils.cpp_extension import load_inline
cuda = r"""
__global__ void relu_kernel(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = x[i] > 0 ? x[i] : 0; }
torch::Tensor relu(torch::Tensor x) { relu_kernel<<<1, 256>>>(x.data_ptr<float>(), x.numel()); return x; }
"""
_ext = load_inline(name="r", cpp_sources="torch::Tensor relu(torch::Tensor x);", cuda_sources=cuda, functions=["relu"])
class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = _ext
    def forward(self, x):
        return _ext.relu(x)
'''
    assert "fallback_torch_op" not in check_source(source).reasons
    assert "fallback_torch_op" in check_source(source.replace("_ext.relu(x)", "x.relu()")).reasons


def test_model_new_bound_to_another_class_or_inheriting_one_is_checked_as_model_new() -> None:
    """`ModelNew = Fused` runs (the judge reads the module's ModelNew attribute): it was rejected as
    no_model_new; and a forward in a base class runs as ModelNew's, so its fallback counts."""
    aliased = GOOD.replace("class ModelNew:", "class Fused:") + "ModelNew = Fused\n"
    assert check_source(aliased).ok, check_source(aliased).details
    inherited = GOOD.replace("class ModelNew:", "class _Base:") + "class ModelNew(_Base):\n    pass\n"
    assert check_source(inherited).ok, check_source(inherited).details
    fallback = "        try:\n            return ext.run(x)\n        except Exception:\n            return x * 2"
    for honest in (aliased, inherited):
        cheat = honest.replace("        return ext.run(x.contiguous())", fallback)
        assert "fallback_try_except" in check_source(cheat).reasons, cheat
    assert "no_model_new" in check_source(GOOD.replace("class ModelNew:", "class Fused:") +
                                          "ModelNew = make_model()\n").reasons  # not a class of the file


def test_every_way_of_swallowing_the_kernels_failure_in_model_new_is_a_fallback() -> None:
    """try/except was flagged in ModelNew; `except*` and `contextlib.suppress` did the same unseen."""
    ways = {
        "except*": "        try:\n            return ext.run(x)\n        except* Exception:\n            pass\n"
                   "        return x * 2",
        "suppress": "        with contextlib.suppress(Exception):\n            return ext.run(x)\n        return x * 2",
        "suppress in __init__": "        return ext.run(x)\n    def __init__(self):\n"
                                "        with suppress(RuntimeError):\n            self.ok = ext.run(torch.ones(1))",
    }
    for name, body in ways.items():
        bad = "import contextlib\nfrom contextlib import suppress\n" + \
            GOOD.replace("        return ext.run(x.contiguous())", body)
        assert "fallback_try_except" in check_source(bad).reasons, name
    honest = "import contextlib\n" + GOOD.replace("        return ext.run(x.contiguous())",
                                                  "        with torch.no_grad():\n            return ext.run(x)")
    assert check_source(honest).ok, check_source(honest).details


def test_a_helper_that_swallows_the_kernels_failure_is_a_fallback() -> None:
    """ModelNew calls a helper (a function or another class) whose try/except falls back to PyTorch when
    the extension's call fails: it passed, since only tries inside ModelNew were looked at."""
    helper = "def _safe(x):\n    try:\n        return ext.run(x)\n    except Exception:\n        return x.relu()\n"
    in_function = GOOD.replace("        return ext.run(x.contiguous())", "        return _safe(x)") + helper
    in_class = GOOD.replace("        return ext.run(x.contiguous())", "        return _R().go(x)") + \
        "class _R:\n    def go(self, x):\n        with contextlib.suppress(RuntimeError):\n" \
        "            return ext.run(x)\n        return x.relu()\n"
    for source in (in_function, in_class):
        report = check_source(source)
        assert any("a failed call of the built extension is swallowed" in d
                   for d in report.by_reason.get("fallback_try_except", [])), report.details
    reraising = GOOD.replace("        return ext.run(x.contiguous())", "        return _safe(x)") + \
        "def _safe(x):\n    try:\n        return ext.run(x)\n    except RuntimeError as e:\n" \
        "        raise RuntimeError(f'kernel failed: {e}')\n"
    unrelated = GOOD + "def _load(p):\n    try:\n        return open(p).read()\n" \
        "    except OSError:\n        return ''\n"
    for source in (reraising, unrelated):
        assert check_source(source).ok, check_source(source).details


FALLBACK = "        try:\n            return ext.run(x)\n        except Exception:\n            return x * 2"
HONEST_BODY = "        return ext.run(x.contiguous())"


def _factory(source: str) -> str:
    """GOOD's ModelNew made by a factory function of the file."""
    body = source[source.index("class ModelNew:"):]
    nested = "".join(f"    {line}\n" if line else "\n" for line in body.replace("class ModelNew:", "class _Made:")
                     .splitlines())
    return source[:source.index("class ModelNew:")] + "def make_model():\n" + nested + "    return _Made\n" + \
        "ModelNew = make_model()\n"


def test_model_new_from_a_factory_or_type_of_the_file_is_checked_as_model_new() -> None:
    """`ModelNew = make_model()` with make_model in the file, and `type("ModelNew", (Base,), {})`, bind a class
    the file defines: they were rejected as no_model_new; their code is checked as ModelNew's."""
    def typed(source: str) -> str:
        return source.replace("class ModelNew:", "class _Base:") + 'ModelNew = type("ModelNew", (_Base,), {})\n'

    for bind in (_factory, typed):
        honest = bind(GOOD)
        assert check_source(honest, require_call=True).ok, check_source(honest).details
        assert "fallback_try_except" in check_source(bind(GOOD.replace(HONEST_BODY, FALLBACK))).reasons, honest
        torch_op = bind(GOOD.replace("ext.run(x.contiguous())", "torch.matmul(x, x)"))
        assert "fallback_torch_op" in check_source(torch_op).reasons, honest
    unknown = check_source(GOOD.replace("class ModelNew:", "class Fused:") + "ModelNew = make_model()\n")
    assert unknown.by_reason["no_model_new"] == [
        "ModelNew is bound to make_model(), which is no class this file defines"]


BUILD = 'ext = load_inline(name="e", cpp_sources="", cuda_sources=src, functions=["run"])'
IMPORT = "from torch.utils.cpp_extension import load_inline"
BUILD_SPELLINGS = {  # (import line, build line) of the same build
    "getattr": ("from torch.utils import cpp_extension", BUILD.replace(
        "load_inline(", 'getattr(cpp_extension, "load_inline")(')),
    "getattr, assigned": ("from torch.utils import cpp_extension", 'build = getattr(cpp_extension, "load_inline")\n'
                          + BUILD.replace("load_inline(", "build(")),
    "assigned": (IMPORT, "build = load_inline\nagain = build\n" + BUILD.replace("load_inline(", "again(")),
    "partial": (IMPORT + "\nimport functools", "build = functools.partial(load_inline, verbose=False)\n"
                + BUILD.replace("load_inline(", "build(")),
    "module alias": ("import torch.utils.cpp_extension as ce", BUILD.replace("load_inline(", "ce.load_inline(")),
    "module imported under another name": ("from torch.utils import cpp_extension as ce",
                                           BUILD.replace("load_inline(", "ce.load_inline(")),
}


def test_a_build_under_any_spelling_is_a_build() -> None:
    """A build through getattr, a name assigned the builder, a partial or a module alias was no build at all
    (`no_kernel`) for an honest file; a build so spelt that swallows its failure was not a fallback."""
    for spelling, (imports, build) in BUILD_SPELLINGS.items():
        honest = GOOD.replace(IMPORT, imports).replace(BUILD, build)
        assert check_source(honest, require_call=True).ok, (spelling, check_source(honest, require_call=True).details)
        guarded = honest.replace(build, "try:\n" + "".join(f"    {ln}\n" for ln in build.splitlines()) +
                                 "except Exception:\n    ext = None")
        assert "fallback_try_except" in check_source(guarded).reasons, spelling


def test_torch_compute_and_tampering_behind_getattr_are_seen() -> None:
    hidden = GOOD.replace("return ext.run(x.contiguous())", 'return getattr(torch, "matmul")(x, x)')
    assert check_source(hidden).reasons == ["fallback_torch_op"]
    nested = GOOD.replace("return ext.run(x.contiguous())",
                          'return getattr(getattr(torch, "nn").functional, "gelu")(x)')
    assert check_source(nested).reasons == ["fallback_torch_op"]
    patched = GOOD + 'getattr(torch, "cuda").Event = object\n'
    assert "harness_tampering" in check_source(patched).reasons


RAW_KERNEL = '''import cupy as cp
import torch
import torch.nn as nn

SRC = r"""
extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
_scale = cp.RawKernel(SRC, "scale")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _scale(((n + 255) // 256,), (256,), (cp.asarray(x), cp.asarray(y), cp.int32(n)))
        return y
'''


def test_a_raw_kernel_built_under_another_name_launches_its_kernel() -> None:
    """Built through an alias of RawKernel, its kernel was "defined but never launched" (`no_kernel`)."""
    assert check_source(RAW_KERNEL, require_call=True).ok
    for spelling in ("RK = cp.RawKernel", "import functools\nRK = functools.partial(cp.RawKernel, options=())",
                     'RK = getattr(cp, "RawKernel")'):
        honest = RAW_KERNEL.replace('_scale = cp.RawKernel(', f'{spelling}\n_scale = RK(')
        assert check_source(honest, require_call=True).ok, (spelling, check_source(honest, require_call=True).details)
        unused = honest.replace("        _scale(((n", "        pass  # _scale(((n")
        assert check_source(unused, require_call=True).reasons == ["no_kernel"], spelling
