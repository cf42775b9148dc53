"""Two processes with `average_tokens_across_devices` take the same step as one process with their batch.

2 ranks x 2 samples (gloo on the CPU, DDP) against 1 process x 4 samples, float32, one SGD step, for
`plain` and `cuset` (samples of different completion lengths, token weights, masks and sample weights).

How the samples are split: the Trainer's sampler is a `RandomSampler`; accelerate's `prepare` swaps it
for a `SeedableRandomSampler` seeded alike on every rank (so every rank draws the same permutation) and
shards the per-device batch sampler with `BatchSamplerShard(split_batches=False)`: of each group of
`num_processes` consecutive batches of 2, rank r takes the r-th. With permutation p, rank 0 trains on
p[0:2], rank 1 on p[2:4], and the single process with batch 4 on p[0:4]: the same four samples. The
test checks that from the rows each process actually trained on, rather than trusting it.

Why the losses agree: each rank divides its weighted NLL sum by `num_items_in_batch`, which the
Trainer all-gathers and sums over the ranks (the global count of unmasked completion tokens), and
multiplies by the number of processes; DDP's all-reduce averages the gradients, which cancels that
factor, so the gradient is that of sum over all 4 samples / global count. The logged `loss` is the
mean over ranks of (rank's loss x 2) = the global loss; the metrics gather every rank's sums.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.training._multi_process_worker import WEIGHTINGS, run_name
from tests.training._one_step import TOL, _rel, assert_same_step, one_step

REPO = Path(__file__).resolve().parents[2]
WORLD = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(model_dir: Path, out: Path) -> None:
    """Start the ranks the way torchrun would (one process each, the env vars accelerate reads)."""
    port = _free_port()
    procs = []
    for rank in range(WORLD):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(WORLD),
               "LOCAL_WORLD_SIZE": str(WORLD), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO),
               "CUDA_VISIBLE_DEVICES": ""}
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.training._multi_process_worker",
                                       str(model_dir), str(out)], cwd=REPO, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=300)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for rank, (p, log) in enumerate(zip(procs, logs, strict=True)):
        assert p.returncode == 0, f"rank {rank} failed:\n{log[-4000:]}"


@pytest.fixture(scope="module")
def two_ranks(tiny_model_dir: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("multi_process")
    _launch(tiny_model_dir, out)
    return out


def _ranks(out: Path, weighting: str, average_tokens: bool = True) -> list[dict]:
    ranks = [torch.load(out / f"{run_name(weighting, average_tokens)}.rank{r}.pt", weights_only=False)
             for r in range(WORLD)]
    assert [r["world_size"] for r in ranks] == [WORLD] * WORLD
    assert [r["dist_rank"] for r in ranks] == list(range(WORLD))
    assert all(r["distributed_type"].endswith("MULTI_CPU") for r in ranks)
    return ranks


def _check_split(ranks: list[dict], big: dict) -> None:
    """Rank 0 trained on the first two samples of the single process's batch, rank 1 on the last two."""
    assert big["world_size"] == 1
    assert [len(r["seen"]) for r in ranks] == [2, 2]
    assert ranks[0]["seen"] + ranks[1]["seen"] == big["seen"]


@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_two_processes_equal_one_batch_of_4(two_ranks: Path, tiny_model_dir: Path, tmp_path: Path,
                                            weighting: str) -> None:
    ranks = _ranks(two_ranks, weighting)
    dist = ranks[0]
    big = one_step(tiny_model_dir, tmp_path, weighting, batch=4)
    _check_split(ranks, big)

    assert_same_step(dist, big, weighting)


def test_per_device_token_counts_differ(two_ranks: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """The control: without `average_tokens_across_devices` each rank divides by its own token count and
    DDP averages the two means, which is not the mean over all tokens when the ranks hold different numbers
    of completion tokens (they do here: the samples' lengths differ), so the comparison above can fail."""
    ranks = _ranks(two_ranks, "cuset", average_tokens=False)
    big = one_step(tiny_model_dir, tmp_path, "cuset", batch=4)
    _check_split(ranks, big)
    assert _rel(ranks[0]["grads"], big["grads"]) > 100 * TOL
