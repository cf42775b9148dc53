"""Seeding torch's generators in the judge and the runner (below every verifier module that draws).

- `seed_all`: the CPU and CUDA generators, as torch.manual_seed seeds them, without its calls for
  devices no judge uses.
"""

from __future__ import annotations


def seed_all(seed: int) -> None:
    """torch's CPU and CUDA generators seeded, as torch.manual_seed seeds them, without its calls for
    devices no judge uses: each of those, on a device never started, records a stack trace (about 1
    ms, a few hundred times a candidate in the judge and as many in the runner)."""
    import torch

    torch.random.default_generator.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
