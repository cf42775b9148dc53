"""Curation drops records whose build is guarded by a fallback, as public corpora hold them (CUDA-L1's format)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kernelwright.curation.filters import FilterSettings, run_filters
from kernelwright.curation.ingest import ingest_one

REF = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.clamp(x, -1.0, 1.0)

def get_inputs():
    return [torch.randn(16, 16384)]

def get_init_inputs():
    return []
'''
KERNEL = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
__global__ void hardtanh_kernel(float* data, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) data[idx] = fmaxf(-1.0f, fminf(1.0f, data[idx]));
}
torch::Tensor hardtanh_cuda(torch::Tensor input) {
    auto result = input.clone();
    int n = result.numel();
    hardtanh_kernel<<<(n + 255) / 256, 256>>>(result.data_ptr<float>(), n);
    return result;
}
"""
'''
BUILD = '''load_inline(name='hardtanh_cuda', cpp_sources='torch::Tensor hardtanh_cuda(torch::Tensor input);',
                               cuda_sources=[cuda_source], functions=['hardtanh_cuda'], verbose=False)'''
# the public corpus's commonest shape: the build in a module-level try, None on failure, PyTorch then
FALLBACK = KERNEL + f'''
try:
    hardtanh_cuda = {BUILD}
except:
    # Fallback to PyTorch implementation if CUDA compilation fails
    hardtanh_cuda = None

class ModelNew(nn.Module):
    def forward(self, x):
        if hardtanh_cuda is not None and x.is_cuda:
            return hardtanh_cuda.hardtanh_cuda(x)
        else:
            return torch.clamp_(x, -1.0, 1.0)
'''
# a helper module builds in its constructor and keeps PyTorch for a failed build (outside ModelNew)
IN_HELPER = KERNEL + f'''
class HardTanh(nn.Module):
    def __init__(self):
        super().__init__()
        try:
            self.ext = {BUILD}
            self.has_cuda_extension = True
        except Exception as e:
            print(f"Failed to load CUDA extension: {{e}}")
            self.has_cuda_extension = False

    def forward(self, x):
        if hasattr(self, 'has_cuda_extension') and self.has_cuda_extension:
            return self.ext.hardtanh_cuda(x)
        return torch.clamp(x, -1.0, 1.0)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = HardTanh()

    def forward(self, x):
        return self.op(x)
'''
HONEST = KERNEL + f'''
hardtanh_cuda = {BUILD}

class ModelNew(nn.Module):
    def forward(self, x):
        return hardtanh_cuda.hardtanh_cuda(x)
'''


@dataclass(frozen=True)
class Sample:
    id: str
    completion: str


def test_a_corpus_record_with_a_guarded_build_is_removed(tmp_path: Path) -> None:
    corpus = tmp_path / "cl1.jsonl"
    rows = [{"level_id": 1, "task_id": 32, "ref_code": REF, "custom_code": FALLBACK, "score_default": 1.9},
            {"level_id": 1, "task_id": 33, "ref_code": REF, "custom_code": IN_HELPER, "score_default": 1.8},
            {"level_id": 1, "task_id": 34, "ref_code": REF, "custom_code": HONEST, "score_default": 1.7}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    frame = ingest_one(corpus, {"prompt": "ref_code", "completion": "custom_code"})
    samples = [Sample(r["id"], r["completion"]) for r in frame.iter_rows(named=True)]
    kept, report = run_filters(samples, FilterSettings(nvrtc=False, near_dup_threshold=2.0, workers=1))
    assert [s.id for s in kept] == [samples[2].id]
    assert report.removed["fallback_try_except"] == [samples[0].id, samples[1].id]
    details = report.details["fallback_try_except"]
    assert "around a build at module level" in details[samples[0].id], details
    assert "around a build at HardTanh.__init__" in details[samples[1].id], details
