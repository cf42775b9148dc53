"""Build fallbacks: a try/except or suppress around any build, and a missing build that selects another path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.cuda.static_checks import check_source
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.verify import static_verdict, verify_many

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verify"
CASES: dict[str, dict[str, str]] = json.loads((FIXTURES / "build_fallbacks" / "expected.json").read_text())

KERNEL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline
src = r"""__global__ void k(float* x) { x[0] = 1; }
torch::Tensor run(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return x; }"""
'''
BUILD = 'load_inline(name="e", cpp_sources="", cuda_sources=src, functions=["run"])'
USE = '''
class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.run(x)
'''


def _fallback(source: str) -> list[str]:
    return check_source(source, require_call=True).by_reason.get("fallback_try_except", [])


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_is_judged_by_the_static_check(name: str) -> None:
    source = (FIXTURES / "build_fallbacks" / name).read_text()
    verdict = static_verdict(source)
    if CASES[name]["reason"] == "ok":
        assert verdict is None, verdict
        assert check_source(source, require_call=True).ok
    else:
        assert verdict is not None and verdict.reason == CASES[name]["reason"], verdict


def test_verify_static_rejects_the_public_corpus_fallback(tmp_path: Path) -> None:
    """The commonest public fallback: `_ext = None` in the module's except, PyTorch when it is None
    (it was `correct (static_ok)`, exit 0, with only a warning about F.layer_norm)."""
    candidate = tmp_path / "c.py"
    candidate.write_text(KERNEL + f"try:\n    _ext = {BUILD}\nexcept Exception:\n    _ext = None\n" + '''
class ModelNew(nn.Module):
    def forward(self, x):
        if _ext is None:
            return F.layer_norm(x, x.shape[-1:])
        return _ext.run(x)
''')
    problem = str(FIXTURES / "problems" / "affine.py")
    out = tmp_path / "v.json"
    assert main(["verify", "--problem", problem, "--candidate", str(candidate), "--static", "--json", str(out)]) == 1
    verdict = json.loads(out.read_text())
    assert verdict["reason"] == "fallback_try_except"
    assert "module level" in verdict["detail"] and "_ext" in verdict["detail"]
    honest = FIXTURES / "build_fallbacks" / "honest_try_reraises.py"
    assert main(["verify", "--problem", problem, "--candidate", str(honest), "--static"]) == 0


@pytest.mark.parametrize("guard", [
    "try:\n    _ext = {b}\nexcept:\n    _ext = None\n",
    "try:\n    _ext = {b}\nexcept (RuntimeError, OSError) as exc:\n    print(exc)\n    _ext = None\n",
    "try:\n    _ext = {b}\nexcept ImportError:\n    pass\n",
    "import contextlib\nwith contextlib.suppress(Exception):\n    _ext = {b}\n",
    "from contextlib import suppress\nwith suppress(RuntimeError):\n    _ext = {b}\n",
    "import torch.utils.cpp_extension as ce\ntry:\n    _ext = ce.load_inline(\"e\", \"\", src, functions=[\"run\"])\n"
    "except Exception:\n    _ext = None\n",
])
def test_a_swallowed_build_at_module_level_is_flagged(guard: str) -> None:
    found = _fallback(KERNEL + guard.format(b=BUILD) + USE)
    assert any("around a build at module level" in d for d in found), found


def test_builds_reached_through_helpers_classes_and_properties_are_flagged() -> None:
    helper = f"def _make():\n    return {BUILD}\n\ndef _get():\n    return _make()\n\n"
    in_helper = KERNEL + helper + "try:\n    _ext = _get()\nexcept Exception:\n    _ext = None\n" + USE
    assert any("at module level" in d for d in _fallback(in_helper))
    in_class = KERNEL + f"class Op:\n    def __init__(self):\n        self.ext = {BUILD}\n\n" + \
        "class Holder:\n    def __init__(self):\n        try:\n            self.op = Op()\n" + \
        "        except Exception:\n            self.op = None\n\n_ext = Op().ext\n" + USE
    assert any("at Holder.__init__" in d for d in _fallback(in_class))
    prop = KERNEL + "import functools\nclass Lazy:\n    @functools.cached_property\n    def ext(self):\n" + \
        f"        return {BUILD}\n\n    def get(self):\n        try:\n            return self.ext\n" + \
        "        except Exception:\n            return None\n\n_ext = Lazy().get()\n" + USE
    assert any("at Lazy.get" in d for d in _fallback(prop))


def test_honest_guards_are_not_flagged() -> None:
    reraise = KERNEL + f"try:\n    _ext = {BUILD}\nexcept Exception as exc:\n    print('build failed', exc)\n" \
                       "    raise\n" + USE
    unrelated = KERNEL + "try:\n    import numpy\nexcept ImportError:\n    numpy = None\n" + \
        f"_ext = {BUILD}\n" + USE
    no_handler = KERNEL + f"try:\n    _ext = {BUILD}\nfinally:\n    pass\n" + USE
    cache = KERNEL + f"_C = {{}}\ndef get():\n    try:\n        return _C['e']\n    except KeyError:\n" \
                     f"        _C['e'] = {BUILD}\n        return _C['e']\n_ext = get()\n" + USE
    for source in (reraise, unrelated, no_handler, cache):
        assert check_source(source, require_call=True).ok, check_source(source, require_call=True).details


def test_a_missing_build_result_that_selects_another_path_is_flagged() -> None:
    conditional = KERNEL + f"_ext = {BUILD} if torch.cuda.is_available() else None\n"
    cases = {
        "if _ext is not None:\n            return _ext.run(x)\n        return x * 2.0 + 1.0": "_ext",
        "if not _ext:\n            return torch.relu(x)\n        return _ext.run(x)": "_ext",
        "fn = getattr(_ext, 'run', None)\n        if fn is None:\n            return x.relu()\n"
        "        return fn(x)": "fn",
        "return _ext.run(x) if _ext else F.relu(x)": "_ext",
        "if x.is_cuda and _ext is not None:\n            y = _ext.run(x)\n        else:\n"
        "            y = x.clamp(min=0)\n        return y": "_ext",
    }
    for forward, name in cases.items():
        source = conditional + f"class ModelNew(nn.Module):\n    def forward(self, x):\n        {forward}\n"
        found = _fallback(source)
        assert any(f"ModelNew.forward computes without the build when {name}" in d for d in found), (forward, found)


def test_a_missing_build_result_that_builds_or_raises_is_honest() -> None:
    lazy = KERNEL + "_ext = None\n" + '''
class ModelNew(nn.Module):
    def forward(self, x):
        global _ext
        if _ext is None:
''' + f"            _ext = {BUILD}\n        return _ext.run(x)\n"
    raising = KERNEL + f"_ext = {BUILD} if torch.cuda.is_available() else None\n" + '''
class ModelNew(nn.Module):
    def forward(self, x):
        if _ext is None:
            raise RuntimeError("no extension: needs a GPU")
        return _ext.run(x)
'''
    for source in (lazy, raising):
        assert check_source(source, require_call=True).ok, check_source(source, require_call=True).details


def test_the_flag_of_a_guarded_build_is_a_build_result() -> None:
    source = KERNEL + f"class Op(nn.Module):\n    def __init__(self):\n        super().__init__()\n" \
                      f"        try:\n            self.fused = {BUILD}\n            self.has_ext = True\n" \
                      "        except Exception:\n            self.has_ext = False\n\n" \
                      "    def forward(self, x):\n        if hasattr(self, 'has_ext') and self.has_ext:\n" \
                      "            return self.fused.run(x)\n        return torch.tanh(x)\n\n_ext = Op().fused\n" + USE
    found = _fallback(source)
    assert any("around a build at Op.__init__" in d for d in found), found
    assert any("Op.forward computes without the build when self.has_ext" in d for d in found), found


@pytest.mark.gpu
def test_honest_controls_are_correct_on_gpu(tmp_path: Path) -> None:
    names = sorted(n for n, c in CASES.items() if c["reason"] == "ok")
    cfgs = [VerifyConfig(problem=str(FIXTURES / "problems" / CASES[n]["problem"]),
                         candidate=str(FIXTURES / "build_fallbacks" / n), compile_baseline=False,
                         build_cache=str(tmp_path / "builds")) for n in names]
    got = {n: (v.reason, v.detail[:300]) for n, v in zip(names, verify_many(cfgs, jobs=4), strict=True)}
    assert all(reason == "ok" for reason, _ in got.values()), got


def test_a_build_handed_to_an_executor_or_thread_is_a_build() -> None:
    """The build runs where the caller hands it over; its failure shows as a missing result."""
    fallback = '''
class ModelNew(nn.Module):
    def forward(self, x):
        if _ext is None:
            return F.relu(x)
        return _ext.run(x)
'''
    future = KERNEL + "import concurrent.futures as cf\n" + \
        f"_fut = cf.ThreadPoolExecutor(1).submit(lambda: {BUILD})\n" + \
        "_ext = None if _fut.exception() else _fut.result()\n" + fallback
    thread = KERNEL + "import threading\n_ext = None\n" + \
        f"def _build():\n    global _ext\n    _ext = {BUILD}\n" + \
        "_t = threading.Thread(target=_build)\n_t.start()\n_t.join()\n" + fallback
    for source in (future, thread):
        found = _fallback(source)
        assert any("ModelNew.forward computes without the build when _ext" in d for d in found), found
    honest = KERNEL + "import concurrent.futures as cf\n" + \
        f"_ext = cf.ThreadPoolExecutor(1).submit(lambda: {BUILD}).result()\n" + USE
    assert check_source(honest, require_call=True).ok, check_source(honest, require_call=True).details


def test_a_builder_imported_under_another_name_is_a_build() -> None:
    """`from torch.utils.cpp_extension import load_inline as li` was read as no build at all: an honest
    candidate rejected as no_kernel, and a fallback around the aliased build unseen."""
    from kernelwright.cuda.candidate_sources import candidate_sources

    aliased = KERNEL.replace("import load_inline", "import load_inline as li")
    honest = aliased + f"_ext = {BUILD.replace('load_inline(', 'li(')}\n" + USE
    report = check_source(honest, require_call=True)
    assert report.ok, report.details
    assert [b.functions for b in candidate_sources(honest).builds] == [["run"]]
    swallowed = aliased + f"try:\n    _ext = {BUILD.replace('load_inline(', 'li(')}\nexcept Exception:\n" \
        "    _ext = None\n" + USE
    assert any("around a build at module level" in d for d in _fallback(swallowed)), _fallback(swallowed)
    load_alias = KERNEL + "from torch.utils.cpp_extension import load as build_from_files\n" + \
        "_ext = build_from_files(name='e', sources=['k.cu'])\n" + USE
    assert "no_kernel" not in check_source(load_alias, require_call=True).reasons


def test_an_except_star_around_a_build_is_a_swallowed_build() -> None:
    found = _fallback(KERNEL + f"try:\n    _ext = {BUILD}\nexcept* Exception:\n    _ext = None\n" + USE)
    assert any("around a build at module level" in d for d in found), found
