"""Procedural tasks: draw `n` tasks across the families, each from its own seed.

    from kernelwright.synthesis.generator import generate_tasks
    tasks = list(generate_tasks(1000, seed=0))

Each family module has `build(rng, task_id, seed) -> SynthTask`; the task's RNG is seeded from
the run's seed and the task's index, so a task is the same whatever else is drawn with it
(a run of 2,000 tasks starts with the 1,000 of a run of 1,000).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence

from kernelwright.errors import UsageError

# the families' code is loaded with GENERATOR_VERSION, never later: a run's tasks carry the version they were
# written by even where the installed code changes while it runs
from kernelwright.synthesis import family_elementwise, family_gather, family_matmul, family_rows
from kernelwright.synthesis.task import FAMILIES, SynthTask

GENERATOR_VERSION = "9"  # the version's change, newest first:
# 9: a matmul kernel's plan comment opens with its product and weight layout ("x @ w: w is (K, N); then the result
# through 1/1 cos"), the phrase its host restates: a version-8 model wrote the other layout's host checks for 3 of 7
# held-out matmul compositions (both ways), with the layout nowhere above the kernel it was choosing for;
# 8: each item of the plan comment is its op statement's tag ("1/3 gelu, then 2/3 leaky_relu (s0)" above
# `/* 2/3 leaky_relu */`), the count in every item: the quick start's model copied version 7's plan and then
# counted its tags wrong (`/* 3/1 */`), and version 6's models chose a wrong count in their first tag;
# 7: a chain's plan comment numbers its ops and names the argument each reads ("1 gelu, then 2 leaky_relu (s0)"):
# version 6's models chose a wrong count up front (`/* 1/4 */` on a chain of five) and read operands their kernel
# never declared (9 of 16 compile errors, two H100 seeds);
# 6: each op statement of a chain led by its place in it (`/* 2/3 tanh */`): a version-5 model stopped a statement
# short of its chain or wrote one twice in 14 of 23 answers (bench/chain_fidelity.py, one H100 seed);
# 5: an elementwise solution's kernel and host are named after no op, one name each (`chain_kernel`,
# `chain_forward`): version 4's names of the whole chain were copied shortened or with another drawn word
# (launches of kernels never defined);
# 4: the gather and matmul hosts restate the index contract or the weight layout
# ("// torch.gather(x, 1, idx): idx is (rows, k), ...", "// x @ w: w is (K, N), ...") in a comment just before the
# checks and sizes it decides (a version-3 model wrote gather_dim1's kernel with take_along_dim's host checks), and
# an elementwise kernel is named after its whole chain, not its first two ops (a version-3 model wrote the name's
# ops and stopped);
# 3: one name for the host function (`<stem>_forward`), the CUDA source (`cuda_source`) and the module (`_ext`),
# the tasks of a seed otherwise those of version 2;
# 2: each op of a chain named before its code, and every kernel with a chain carries
# the chain's ops in the order they run ("y = gelu, then tanh", "first x through ...; then the result through ...").

# the share of each family in a run (renormalised over the families asked for)
WEIGHTS = {"elementwise": 0.28, "reduction": 0.18, "softmax": 0.12, "rownorm": 0.14, "gather": 0.1,
           "matmul_epilogue": 0.18}
Builder = Callable[[random.Random, str, int], SynthTask]
_BUILDERS: dict[str, Builder] = {
    "elementwise": family_elementwise.build_elementwise, "gather": family_gather.build_gather,
    "reduction": family_rows.build_reduction, "softmax": family_rows.build_softmax,
    "rownorm": family_rows.build_rownorm, "matmul_epilogue": family_matmul.build_matmul_epilogue}


def builder(family: str) -> Builder:
    return _BUILDERS[family]


def check_families(families: Sequence[str]) -> list[str]:
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise UsageError(f"unknown task famil{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)} "
                         f"(known: {', '.join(FAMILIES)})")
    return list(families) or list(FAMILIES)


def task_seed(seed: int, index: int) -> int:
    return random.Random(f"{seed}:{index}").getrandbits(32)


def generate_tasks(n: int, seed: int, families: Sequence[str] = ()) -> Iterator[SynthTask]:
    """`n` tasks; task `i` draws its family and everything else from `task_seed(seed, i)`."""
    chosen = check_families(families)
    weights = [WEIGHTS[f] for f in chosen]
    builders = {f: builder(f) for f in chosen}
    for i in range(n):
        s = task_seed(seed, i)
        rng = random.Random(s)
        family = rng.choices(chosen, weights)[0]
        yield builders[family](rng, f"{family}_{i:05d}", s)
