from __future__ import annotations

from kernelwright.cuda.spans import completion_spans, cuda_source_spans, python_file_spans
from kernelwright.prompting import completion_text

CUDA = """#define IDX(r, c) ((r) * blockDim.x + (c))
__global__ void __launch_bounds__(256) k(const float* __restrict__ x, float* y, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { tile[threadIdx.x] = x[i]; }
    __syncthreads();
    float v = __shfl_down_sync(0xffffffff, tile[0], 1);
    atomicAdd(&y[0], v);
}
void launch(float* x, float* y, int n) { k<<<(n + 255) / 256, 256>>>(x, y, n); cudaMemsetAsync(y, 0, 4); }
"""


def _kinds(src: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for s in cuda_source_spans(src):
        out.setdefault(s.kind, []).append(src[s.start:s.end])
    return out


def test_every_kind_is_found_with_its_text() -> None:
    kinds = _kinds(CUDA)
    assert kinds["launch_bounds"] == ["__launch_bounds__(256)"]
    assert kinds["shared_decl"] == ["__shared__ float tile[256];"]
    assert "blockIdx.x * blockDim.x + threadIdx.x" in kinds["thread_index"]
    assert kinds["bounds_guard"] == ["(i < n)"]
    assert "x[i]" in kinds["global_access"] and "tile[threadIdx.x]" not in kinds["global_access"]
    assert kinds["barrier"] == ["__syncthreads()"]
    assert kinds["warp_intrinsic"] == ["__shfl_down_sync(0xffffffff, tile[0], 1)"]
    assert kinds["atomic"] == ["atomicAdd(&y[0], v)"]
    assert kinds["launch_config"] == ["<<<(n + 255) / 256, 256>>>"]
    assert kinds["memory_api"] == ["cudaMemsetAsync(y, 0, 4)"]


def test_macro_bodies_are_parsed() -> None:
    kinds = _kinds(CUDA)
    assert "((r) * blockDim.x + (c))" in kinds["thread_index"]


def test_offsets_map_back_into_python_and_completion() -> None:
    py = f'import torch\nsrc = r"""{CUDA}"""\nother = "no cuda here"\n'
    res = python_file_spans(py)
    assert res.cuda_strings == 1 and res.strings_skipped == 0
    assert any(py[s.start:s.end] == "__syncthreads()" for s in res.spans)
    completion = completion_text(py)
    res2 = completion_spans(completion)
    assert [completion[s.start:s.end] for s in res2.spans] == [py[s.start:s.end] for s in res.spans]


def test_escaped_strings_are_skipped_and_counted() -> None:
    py = 'src = "__global__ void k(float* x) {\\n x[0] = 1; }"\n'
    res = python_file_spans(py)
    assert res.strings_skipped == 1 and res.spans == []


def test_non_python_completion_gives_no_spans() -> None:
    res = completion_spans("```python\ndef broken(:\n```")
    assert not res.python_ok and res.spans == []
