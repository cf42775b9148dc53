"""Gradient accumulation of 4 micro-batches of 1 equals one batch of 4 (loss, metrics and gradients).

Why an earlier attempt saw ~2e-3 relative differences in the gradients: TRL's `SFTConfig` defaults to
`bf16=True`, and accelerate then autocasts the forward to bfloat16 even on a CPU; a batch of 4 and
four batches of 1 run matmuls of other shapes, so bf16 rounding differs by ~1e-3. In float32 (what
`kernelwright train` uses on a CPU: `_sft_args` sets `bf16` only on a bf16-capable GPU) the two agree
to ~1e-7. Sampler order, dropout (0 in Qwen2), right padding and the loss normalisation by
`num_items_in_batch` are all exact.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from datasets import Dataset
from trl import SFTConfig

from kernelwright.models import load_base_model, load_tokenizer
from kernelwright.training.config import TrainConfig
from kernelwright.training.cuset_trainer import CusetCollator, CusetSFTTrainer
from kernelwright.training.sft import _sft_args
from tests.training._one_step import TOL, _examples, _rel, assert_same_step, one_step


@pytest.mark.parametrize("weighting", ["plain", "cuset"])
def test_accumulation_of_4x1_equals_one_batch_of_4(tiny_model_dir: Path, tmp_path: Path, weighting: str) -> None:
    acc = one_step(tiny_model_dir, tmp_path / "acc", weighting, batch=1, accum=4)
    big = one_step(tiny_model_dir, tmp_path / "big", weighting, batch=4, accum=1)
    assert_same_step(acc, big, weighting)


def test_compute_loss_of_micro_batches_sums_to_the_batch_loss(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The same, one level down: `compute_loss` with the window's `num_items_in_batch`, no Trainer loop."""
    tok = load_tokenizer(tiny_model_dir)
    model = load_base_model(tiny_model_dir, dtype=torch.float32, device="cpu")
    args = SFTConfig(output_dir=str(tmp_path), bf16=False, report_to=[], use_cpu=True,
                     dataset_kwargs={"skip_prepare_dataset": True})
    collator = CusetCollator(pad_token_id=tok.pad_token_id, weighting="cuset")
    trainer = CusetSFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(_examples()),
                              processing_class=tok, data_collator=collator)
    examples = _examples()[:4]
    whole = collator(examples)
    n = (whole["labels"][:, 1:] != -100).sum()
    model.train()

    def grads_of(batches: list[dict]) -> tuple[float, dict[str, torch.Tensor]]:
        model.zero_grad()
        total = 0.0
        for b in batches:
            loss = trainer.compute_loss(model, dict(b), num_items_in_batch=n)
            loss.backward()
            total += loss.item()
        return total, {k: p.grad.clone() for k, p in model.named_parameters()}

    loss_big, g_big = grads_of([whole])
    loss_acc, g_acc = grads_of([collator([e]) for e in examples])
    assert loss_acc == pytest.approx(loss_big, rel=TOL)
    assert _rel(g_acc, g_big) < TOL


def test_cpu_training_runs_in_float32() -> None:
    """The cause of the bf16 mismatch stays out of CPU runs: TRL's `bf16=True` default is overridden."""
    if torch.cuda.is_available():
        pytest.skip("checks the CPU arguments")
    args = _sft_args(TrainConfig(max_steps=1), Path("/tmp/unused"))
    assert args.bf16 is False and args.fp16 is False
