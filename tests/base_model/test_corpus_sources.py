"""The CUDA sources of the `corpus` extra: found in (fake) installed packages, licences recorded, files
filtered by suffix and by what they say of themselves, every document decontaminated."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from kernelwright.base_model.config import PretrainConfig
from kernelwright.base_model.corpus import Selection, build_corpus, main, plan_corpus
from kernelwright.base_model.corpus_sources import (
    Source,
    installed_sources,
    package_dirs,
    require_installed,
    spdx_tag,
)
from kernelwright.errors import UsageError
from kernelwright.seed import load_seed_tasks

KERNEL = "__global__ void scale(float* x, float a, int n) {{ int i = threadIdx.x; if (i < n) x[i] *= a; }}  // {}\n"


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    """A fake site-packages holding the folders nvidia-cutlass, nvidia-cuda-cccl and flashinfer-python install."""
    site = tmp_path / "site"
    cutlass = "cutlass_library/source/"
    _write(site, cutlass + "include/cutlass/gemm.h", KERNEL.format("gemm") * 3)
    _write(site, cutlass + "examples/00_basic_gemm/basic_gemm.cu", KERNEL.format("example") * 3)
    _write(site, cutlass + "examples/00_basic_gemm/CMakeLists.txt", "add_executable(basic_gemm basic_gemm.cu)\n")
    _write(site, "cutlass_library/generator.py", "def generate():\n    return 1\n")
    cccl = "nvidia/cu13/include/cccl/"
    _write(site, cccl + "cub/warp/warp_reduce.cuh", KERNEL.format("cub") * 3)
    _write(site, cccl + "thrust/sort.h", "// SPDX-License-Identifier: Apache-2.0\n" + KERNEL.format("thrust"))
    _write(site, cccl + "cuda/std/atomic", KERNEL.format("no suffix: left out"))
    _write(site, cccl + "cuda/__ptx/instructions/generated/bmsk.h",
           "// This file was automatically generated. Do not edit.\n" + KERNEL.format("ptx"))
    _write(site, "nvidia/cu13/include/cuda_runtime.h", KERNEL.format("runtime"))
    data = "flashinfer/data/"
    _write(site, data + "include/flashinfer/norm.cuh", KERNEL.format("norm") * 3)
    _write(site, data + "include/flashinfer/megamoe/layout.cuh", KERNEL.format("megamoe"))
    _write(site, data + "csrc/norm.cu", KERNEL.format("norm binding") * 2)
    _write(site, data + "csrc/fmha_v2/softmax.h",
           "// SPDX-License-Identifier: NVIDIA TensorRT Source Code License Agreement\n" + KERNEL.format("fmha"))
    _write(site, data + "csrc/cake_dsv4/decode.cu", KERNEL.format("a Cake export"))
    _write(site, data + "csrc/fused_moe/generated/part1.cuh", KERNEL.format("a generated part"))
    _write(site, data + "csrc/kda/kernel.cu", "// Frozen kernel export; do not edit by hand.\n" + KERNEL.format(1))
    _write(site, data + "cutlass/include/cutlass/gemm.h", KERNEL.format("FlashInfer's copy of CUTLASS"))
    _write(site, data + "cccl/cub/cub.cuh", KERNEL.format("FlashInfer's copy of CCCL"))
    return site


def _locate(site: Path):
    return lambda name: [site / name] if (site / name).is_dir() else []


def _sources(site: Path) -> dict[str, Source]:
    return {s.name: s for s in installed_sources(_locate(site))}


def _plan(site: Path) -> dict[str, dict[str, str]]:
    """Per source: path -> licence of every document planned."""
    out: dict[str, dict[str, str]] = {}
    for d in plan_corpus(Selection(max_chars=0), list(_sources(site).values()), []).documents:
        out.setdefault(d.source, {})[d.path] = d.licence
    return out


def test_each_source_is_found_where_its_package_installs_it(site: Path) -> None:
    sources = _sources(site)
    assert set(sources) == {"cuda-runtime", "cutlass", "cccl", "flashinfer"}
    assert sources["cutlass"].root == site / "cutlass_library/source"
    assert sources["cccl"].root == site / "nvidia/cu13/include/cccl"
    assert sources["flashinfer"].root == site / "flashinfer/data"
    assert {s.name: s.licence for s in sources.values()} == {
        "cuda-runtime": "LicenseRef-NVIDIA-Proprietary", "cutlass": "BSD-3-Clause",
        "cccl": "Apache-2.0 WITH LLVM-exception", "flashinfer": "Apache-2.0"}


def test_a_package_not_installed_gives_no_source(site: Path) -> None:
    only_cutlass = installed_sources(lambda name: [site / name] if name == "cutlass_library" else [])
    assert [s.name for s in only_cutlass] == ["cutlass"]
    assert installed_sources(lambda name: []) == []
    assert package_dirs("no_such_package_for_the_corpus") == []


def test_a_required_source_not_installed_is_an_error_naming_its_package(site: Path) -> None:
    require_installed(["cutlass", "cccl", "flashinfer"], _locate(site))
    no_cccl = lambda name: [site / name] if name != "nvidia" else []  # noqa: E731
    with pytest.raises(UsageError, match=r"cccl, cuda-runtime not installed; install .*nvidia-cuda-cccl"):
        require_installed(["cutlass", "cccl", "cuda-runtime"], no_cccl)
    require_installed([], lambda name: [])
    with pytest.raises(UsageError, match="unknown source.*no-such"):
        require_installed(["no-such"], _locate(site))


def test_required_sources_are_not_given_beside_source_folders() -> None:
    assert PretrainConfig(require_sources=["cutlass", "cccl"]).require_sources == ["cutlass", "cccl"]
    with pytest.raises(ValueError, match="--source folders replace"):
        PretrainConfig(require_sources=["cutlass"], source=["somewhere"])


def test_the_cccl_of_the_cuda_cccl_python_package_and_of_the_cuda_12_wheel(tmp_path: Path) -> None:
    _write(tmp_path / "a", "cuda/cccl/headers/include/cub/cub.cuh", KERNEL.format("cub"))
    _write(tmp_path / "b", "nvidia/cuda_cccl/include/cub/cub.cuh", KERNEL.format("cub"))
    for site, root in ((tmp_path / "a", "cuda/cccl/headers/include"), (tmp_path / "b", "nvidia/cuda_cccl/include")):
        assert [(s.name, s.root) for s in installed_sources(_locate(site))] == [("cccl", site / root)]


def test_code_files_only_and_no_copies_nor_generated_kernels(site: Path) -> None:
    plan = _plan(site)
    assert set(plan["cutlass"]) == {"include/cutlass/gemm.h", "examples/00_basic_gemm/basic_gemm.cu"}
    assert set(plan["cccl"]) == {"cub/warp/warp_reduce.cuh", "thrust/sort.h"}
    assert set(plan["flashinfer"]) == {"include/flashinfer/norm.cuh", "include/flashinfer/megamoe/layout.cuh",
                                       "csrc/norm.cu", "csrc/fmha_v2/softmax.h"}
    assert set(plan["cuda-runtime"]) == {"cuda_runtime.h"}  # CCCL under the same include folder is its own source


def test_every_document_records_its_licence(site: Path) -> None:
    plan = _plan(site)
    assert plan["cccl"] == {"cub/warp/warp_reduce.cuh": "BSD-3-Clause", "thrust/sort.h": "Apache-2.0"}
    assert set(plan["cutlass"].values()) == {"BSD-3-Clause"}
    assert plan["flashinfer"] == {
        "include/flashinfer/norm.cuh": "Apache-2.0", "csrc/norm.cu": "Apache-2.0",
        "include/flashinfer/megamoe/layout.cuh": "MIT",  # a vendored folder of its own licence
        "csrc/fmha_v2/softmax.h": "LicenseRef-NVIDIA-TensorRT-Source-Code-License-Agreement"}
    manifest = plan_corpus(Selection(max_chars=0), list(_sources(site).values()), []).manifest()
    assert manifest["sources"]["cccl"]["licences"] == {"BSD-3-Clause": 1, "Apache-2.0": 1}
    assert {f["key"]: f["licence"] for f in manifest["files"]}["cutlass:include/cutlass/gemm.h"] == "BSD-3-Clause"


@pytest.mark.parametrize(("line", "spdx"), [
    ("// SPDX-License-Identifier: BSD-3-Clause\n", "BSD-3-Clause"),
    ("/* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception */\n", "Apache-2.0 WITH LLVM-exception"),
    ("// SPDX-License-Identifier: // Apache-2.0 WITH LLVM-exception\n", "Apache-2.0 WITH LLVM-exception"),
    (" * SPDX-License-Identifier: BSD-3\n", "BSD-3-Clause"),
    ("# SPDX-License-Identifier: GPL-2.0-only OR BSD-3-Clause\n", "GPL-2.0-only OR BSD-3-Clause"),
    ("// SPDX-License-Identifier: Some Vendor Licence v2\n", "LicenseRef-Some-Vendor-Licence-v2"),
    ("// no tag here\n", ""),
])
def test_spdx_tags_are_read_and_normalised(line: str, spdx: str) -> None:
    assert spdx_tag("#pragma once\n" + line + "int x;\n") == spdx


def test_the_new_sources_are_decontaminated_like_the_others(site: Path) -> None:
    solution = load_seed_tasks()[0].solution
    _write(site, "cutlass_library/source/examples/copied/seed.cu", "// a copy\n" + solution)
    _write(site, "flashinfer/data/csrc/copied_seed.cu", "// a copy\n" + solution)
    corpus = build_corpus(Selection(max_chars=0), list(_sources(site).values()))
    assert {"cutlass:examples/copied/seed.cu", "flashinfer:csrc/copied_seed.cu"} <= set(corpus.excluded)
    assert "cccl:cub/warp/warp_reduce.cuh" in {d.key for d in corpus.documents}


def test_the_command_prints_sources_sizes_and_licences(capsys, tmp_path: Path) -> None:
    main(["200000", "--manifest", str(tmp_path / "m.json")])
    out = json.loads(capsys.readouterr().out)
    assert out["sources"] and all(s["licence"] for s in out["sources"].values())
    manifest = json.loads((tmp_path / "m.json").read_text())
    assert manifest["digest"] == out["digest"] and len(manifest["files"]) == out["documents"]


@pytest.mark.parametrize(("dist", "name", "licence"), [("nvidia-cutlass", "cutlass", "BSD-3-Clause"),
                                                       ("flashinfer-python", "flashinfer", "Apache-2.0")])
def test_an_installed_package_gives_its_source_under_the_licence_it_declares(dist: str, name: str,
                                                                             licence: str) -> None:
    try:
        meta = importlib.metadata.metadata(dist)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{dist} is not installed (pip install 'kernelwright[corpus]')")
    assert licence in (meta.get("License-Expression"), meta.get("License"))
    source = {s.name: s for s in installed_sources()}[name]
    assert source.licence == licence and any(p.suffix in {".cu", ".cuh", ".h"} for p in source.files()[:20])


def test_an_installed_cccl_is_its_own_source_not_part_of_the_runtime_headers() -> None:
    sources = {s.name: s for s in installed_sources()}
    if "cccl" not in sources:
        pytest.skip("nvidia-cuda-cccl is not installed (pip install 'kernelwright[corpus]')")
    assert (sources["cccl"].root / "cub").is_dir()
    if "cuda-runtime" in sources:
        assert not any("cccl" in p.relative_to(sources["cuda-runtime"].root).parts
                       for p in sources["cuda-runtime"].files())
