"""One rank of tests/training/test_multi_process.py, and the single-process reference it is compared with.

Run as `python -m tests.training._multi_process_worker MODEL_DIR OUT_DIR` from the repository root with
the variables torchrun would set (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT): accelerate's `PartialState` (built by `TrainingArguments` with `use_cpu=True`) then sees
WORLD_SIZE > 1 on a CPU, takes `DistributedType.MULTI_CPU` and opens a gloo process group, and the
Trainer wraps the model in DDP, which all-reduces (averages) the gradients during `backward`.
Each run (a weighting, tokens averaged across devices or not) trains one SGD step; rank 0 saves the
gradients, the parameter change and the first log entry; every rank saves the `input_ids` rows it
trained on.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from datasets import Dataset
from trl import SFTConfig

from kernelwright.training.base_model import load_base_model, load_tokenizer
from kernelwright.training.cuset_trainer import CusetCollator, CusetSFTTrainer
from tests.training.test_grad_accum import _examples, _GradsBeforeStep

WEIGHTINGS = ("plain", "cuset")
# (weighting, average_tokens_across_devices) per run; the last one is the control that must differ
RUNS = (("plain", True), ("cuset", True), ("cuset", False))


def run_name(weighting: str, average_tokens: bool) -> str:
    return weighting if average_tokens else f"{weighting}-per-device"


class _RecordingTrainer(CusetSFTTrainer):
    """Remembers the rows of every micro-batch it trains on (to check how the samples were sharded)."""

    seen: list[list[int]]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        mask = inputs["attention_mask"].bool()
        self.seen.extend(row[m].tolist() for row, m in zip(inputs["input_ids"], mask, strict=True))
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def one_step(model_dir: Path, out: Path, weighting: str, batch: int, average_tokens: bool = True) -> dict:
    """One SGD step (lr 0.1, no clipping, float32) on batches of `batch` per process."""
    tok = load_tokenizer(model_dir)
    model = load_base_model(model_dir, dtype=torch.float32, device="cpu")
    args = SFTConfig(output_dir=str(out), max_steps=1, per_device_train_batch_size=batch,
                     gradient_accumulation_steps=1, average_tokens_across_devices=average_tokens, bf16=False,
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


def main(model_dir: Path, out: Path) -> None:
    for weighting, average_tokens in RUNS:
        name = run_name(weighting, average_tokens)
        result = one_step(model_dir, out / name, weighting, batch=2, average_tokens=average_tokens)
        rank = int(os.environ.get("RANK", "0"))  # the launcher's rank: one file per process, whatever torch says
        result["dist_rank"] = torch.distributed.get_rank() if torch.distributed.is_initialized() else -1
        if rank != 0:
            result = {k: result[k] for k in ("seen", "world_size", "distributed_type", "dist_rank")}
        tmp = out / f".{name}.rank{rank}.pt.tmp"
        torch.save(result, tmp)
        os.replace(tmp, out / f"{name}.rank{rank}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
