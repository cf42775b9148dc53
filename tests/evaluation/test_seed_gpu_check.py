from __future__ import annotations

import pytest

from kernelwright.evaluation.seed_gpu_check import main


@pytest.mark.gpu
def test_some_seed_solutions_match_on_gpu(tmp_path) -> None:
    out = tmp_path / "seed.json"
    ids = ["elementwise_leaky_relu", "softmax_last_dim", "quantization_int8_quant_per_tensor"]
    assert main(["--only", *ids, "--jobs", "3", "--json", str(out)]) == 0
