"""This process's place in a launch: one process, or one rank of `accelerate launch` / `torchrun`."""

from __future__ import annotations

import os

import torch


def world_size() -> int:
    """Processes in the launch (1 without one)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    """Whether this is rank 0, the process that talks to MLflow and writes shared files."""
    return int(os.environ.get("RANK", "0")) == 0


def device() -> str:
    """This process's device: under `accelerate launch`/`torchrun` each rank loads onto its own GPU."""
    return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if torch.cuda.is_available() else "cpu"
