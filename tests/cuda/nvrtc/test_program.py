"""Which CUDA include folder NVRTC programs get when nvidia.cu13 has several portions on sys.path."""

from pathlib import Path

from kernelwright.cuda.nvrtc.program import cuda_runtime_include, include_dirs


def _portion(root: Path, *headers: str) -> Path:
    inc = root / "nvidia" / "cu13" / "include"
    inc.mkdir(parents=True)
    for h in headers:
        (inc / h).write_text("// header\n")
    return root / "nvidia" / "cu13"


def test_portion_with_runtime_headers_wins_over_an_earlier_one(tmp_path):
    # a portion that only carries CCCL (another package's copy) comes first on sys.path
    cccl_only = _portion(tmp_path / "a")
    (cccl_only / "include" / "cccl").mkdir()
    runtime = _portion(tmp_path / "b", "cuda_fp16.h", "cuda_runtime.h")
    assert cuda_runtime_include([cccl_only, runtime]) == runtime / "include"


def test_first_portion_when_none_has_runtime_headers(tmp_path):
    a, b = _portion(tmp_path / "a"), _portion(tmp_path / "b")
    assert cuda_runtime_include([a, b]) == a / "include"
    assert cuda_runtime_include([]) is None


def test_include_dirs_lead_with_the_shims():
    dirs = include_dirs()
    assert dirs[0].endswith("nvrtc_shims")
    assert all(isinstance(d, str) for d in dirs)
