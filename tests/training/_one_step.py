"""One SGD step of `CusetSFTTrainer` on fixed samples: shared by tests/training/test_grad_accum.py,
test_multi_process.py and its worker (tests/training/_multi_process_worker.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import SFTConfig

from kernelwright.models import load_base_model, load_tokenizer
from kernelwright.training.cuset_trainer import CusetCollator, CusetSFTTrainer

TOL = 1e-5
METRICS = ("loss", "nll", "entropy", "mean_token_accuracy", "masked_share", "mean_sample_weight", "num_tokens")


def _examples() -> list[dict]:
    """8 samples of different lengths, prompts and weights (the first 4 of the sampler's order train)."""
    g = torch.Generator().manual_seed(0)
    out = []
    for i, (n, prompt) in enumerate(((30, 5), (17, 3), (25, 10), (9, 2), (21, 4), (14, 6), (28, 3), (11, 5))):
        ids = torch.randint(10, 200, (n,), generator=g).tolist()
        weights = [0.0] * prompt + (0.2 + 2 * torch.rand(n - prompt, generator=g)).tolist()
        mask = [0] * prompt + [int(w > 0.5) for w in weights[prompt:]]
        out.append({"input_ids": ids, "labels": [-100] * prompt + ids[prompt:], "token_weights": weights,
                    "loss_mask": mask, "sample_weight": 0.5 + 0.25 * i})
    return out


class _GradsBeforeStep(TrainerCallback):
    grads: dict[str, torch.Tensor] = {}

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        self.grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _rel(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    num = sum(float((a[k] - b[k]).double().pow(2).sum()) for k in b) ** 0.5
    return num / sum(float(v.double().pow(2).sum()) for v in b.values()) ** 0.5


def assert_same_step(got: dict, want: dict, weighting: str) -> None:
    """`got` took the same optimiser step as `want`: gradients, the one-step parameter update and
    every logged metric within TOL (and, for cuset, the weighting really did something)."""
    assert got["grads"].keys() == want["grads"].keys() and len(want["grads"]) > 0
    assert _rel(got["grads"], want["grads"]) < TOL
    assert _rel(got["delta"], want["delta"]) < TOL  # one SGD step's parameter update
    for name in METRICS:
        assert got["log"][name] == pytest.approx(want["log"][name], rel=TOL, abs=1e-7), name
    if weighting == "cuset":
        assert 0 < want["log"]["masked_share"] < 1 and want["log"]["mean_sample_weight"] != 1


class _RecordingTrainer(CusetSFTTrainer):
    """Remembers the rows of every micro-batch it trains on (to check how the samples were sharded)."""

    seen: list[list[int]]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        mask = inputs["attention_mask"].bool()
        self.seen.extend(row[m].tolist() for row, m in zip(inputs["input_ids"], mask, strict=True))
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def one_step(model_dir: Path, out: Path, weighting: str, batch: int, accum: int = 1,
             average_tokens: bool = True) -> dict:
    """One SGD step (lr 0.1, no clipping, float32) on `accum` micro-batches of `batch` per process."""
    tok = load_tokenizer(model_dir)
    model = load_base_model(model_dir, dtype=torch.float32, device="cpu")
    args = SFTConfig(output_dir=str(out), max_steps=1, per_device_train_batch_size=batch,
                     gradient_accumulation_steps=accum, average_tokens_across_devices=average_tokens, bf16=False,
                     max_grad_norm=0.0, optim="sgd", learning_rate=0.1, lr_scheduler_type="constant", seed=0,
                     report_to=[], use_cpu=True, gradient_checkpointing=False,
                     dataset_kwargs={"skip_prepare_dataset": True}, logging_steps=1, save_strategy="no",
                     disable_tqdm=True, dataloader_num_workers=0)
    grab = _GradsBeforeStep()
    trainer = _RecordingTrainer(model=model, args=args, train_dataset=Dataset.from_list(_examples()),
                                processing_class=tok, callbacks=[grab],
                                data_collator=CusetCollator(pad_token_id=tok.pad_token_id, weighting=weighting))
    trainer.seen = []
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    delta = {n: p.detach() - before[n] for n, p in trainer.model.named_parameters()}
    return {"grads": grab.grads, "delta": delta, "log": trainer.state.log_history[0], "seen": trainer.seen,
            "world_size": trainer.accelerator.num_processes,
            "distributed_type": str(trainer.accelerator.distributed_type)}
