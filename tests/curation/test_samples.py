"""`curate_samples`: samples over max_length are dropped before they are scored and weighted."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.curation.config import CurateConfig
from kernelwright.curation.filters import FilterReport
from kernelwright.curation.samples import curate_samples, seed_samples, tokenize_sample
from kernelwright.errors import UsageError
from kernelwright.models import load_base_model, load_tokenizer


def test_too_long_samples_are_dropped_before_weighting(tiny_model_dir: Path) -> None:
    tok = load_tokenizer(tiny_model_dir)
    model = load_base_model(tiny_model_dir, device="cpu").eval()
    samples = seed_samples("train")[:4]
    lengths = [len(t["prompt_ids"]) + len(t["completion_ids"]) for t in (tokenize_sample(tok, s) for s in samples)]
    limit = sorted(lengths)[1]  # the two shortest fit
    report = FilterReport(input_rows=len(samples))
    data, stats = curate_samples(samples, tok, model, CurateConfig(max_length=limit), report=report)
    assert data.height == stats["samples"] == sum(n <= limit for n in lengths)
    assert len(report.removed["too_long"]) == sum(n > limit for n in lengths)
    assert data["sample_weight"].mean() == pytest.approx(1.0, abs=1e-6)  # normalised over what is kept
    # labels line up with input_ids, -100 on the prompt
    row = data.row(0, named=True)
    assert len(row["labels"]) == len(row["input_ids"]) == len(row["token_weights"])
    assert row["labels"][: row["prompt_len"]] == [-100] * row["prompt_len"]
    with pytest.raises(UsageError, match="max_length"):
        curate_samples(samples, tok, model, CurateConfig(max_length=min(lengths) - 1))
