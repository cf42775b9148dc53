"""A synthesized task: a KernelBench-format problem, its generator-written solution and what it is made of.

The composition signature (the multiset of ops and the tail kind) is what the held-out split
and the signature-level decontamination compare: two tasks with the same signature are the
same composition, whatever their shapes, dtypes, parameters or solution templates.
"""

from __future__ import annotations

from dataclasses import dataclass

FAMILIES = ("elementwise", "reduction", "softmax", "rownorm", "gather", "matmul_epilogue")
DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class SynthTask:
    id: str  # unique within a run and filesystem-safe, e.g. "elementwise_00042"
    family: str  # one of FAMILIES
    ops: tuple[str, ...]  # elementwise op names of ops.py, in the order they are applied
    tail: str  # the reduction / softmax / normalisation / gather / matmul kind; "" for a pure chain
    dtype: str  # one of DTYPES: the problem's input and output dtype
    reference: str  # the problem file: Model, get_inputs, get_init_inputs, CATEGORY, DTYPE, SHAPES, flops, bytes_moved
    solution: str  # ModelNew built with one load_inline call (one CUDA source string)
    template: str  # the solution template and variant that wrote it, e.g. "elementwise/grid_stride_vec4"
    seed: int  # the RNG seed the task was drawn from

    @property
    def signature(self) -> str:
        return signature_of(self.ops, self.tail)


def signature_of(ops: tuple[str, ...] | list[str], tail: str) -> str:
    """The composition signature: the ops' multiset (sorted) and the tail kind."""
    return "+".join(sorted(ops)) + "|" + tail
