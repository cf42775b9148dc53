"""One rank of tests/training/test_multi_process.py (the single-process reference is `_one_step.one_step`).

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

from kernelwright.atomic import atomic_path
from tests.training._one_step import one_step

WEIGHTINGS = ("plain", "cuset")
# (weighting, average_tokens_across_devices) per run; the last one is the control that must differ
RUNS = (("plain", True), ("cuset", True), ("cuset", False))


def run_name(weighting: str, average_tokens: bool) -> str:
    return weighting if average_tokens else f"{weighting}-per-device"


def main(model_dir: Path, out: Path) -> None:
    for weighting, average_tokens in RUNS:
        name = run_name(weighting, average_tokens)
        result = one_step(model_dir, out / name, weighting, batch=2, average_tokens=average_tokens)
        rank = int(os.environ.get("RANK", "0"))  # the launcher's rank: one file per process, whatever torch says
        result["dist_rank"] = torch.distributed.get_rank() if torch.distributed.is_initialized() else -1
        if rank != 0:
            result = {k: result[k] for k in ("seen", "world_size", "distributed_type", "dist_rank")}
        with atomic_path(out / f"{name}.rank{rank}.pt") as tmp:
            torch.save(result, tmp)
    if torch.distributed.is_initialized():  # gloo's threads left to the interpreter's exit may abort it (SIGABRT)
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
