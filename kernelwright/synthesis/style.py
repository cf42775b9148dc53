"""What every solution template shares: C types of the dtypes, and the variety of names and comments.

A model must learn kernels, not one string: templates draw their kernel, variable and extension
names, comment style and block sizes from here with the task's RNG, so two tasks of one template
read differently while the code stays what the template means.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class CType:
    dtype: str  # float32 | float16 | bfloat16
    c: str  # the element type in CUDA C
    header: str  # the include that declares it ("" for float)
    at: str  # torch's C++ scalar type
    torch: str  # the Python dtype expression

    def to_float(self, expr: str) -> str:
        return {"float": expr, "__half": f"__half2float({expr})", "__nv_bfloat16": f"__bfloat162float({expr})"}[self.c]

    def from_float(self, expr: str) -> str:
        return {"float": expr, "__half": f"__float2half({expr})", "__nv_bfloat16": f"__float2bfloat16({expr})"}[self.c]

    def data_ptr(self, tensor: str) -> str:
        """The typed device pointer of a torch::Tensor `tensor` in host code."""
        if self.c == "float":
            return f"{tensor}.data_ptr<float>()"
        return f"reinterpret_cast<{self.c}*>({tensor}.data_ptr<at::{self.at_type}>())"

    @property
    def at_type(self) -> str:
        return {"float": "float", "__half": "Half", "__nv_bfloat16": "BFloat16"}[self.c]


CTYPES = {
    "float32": CType("float32", "float", "", "torch::kFloat32", "torch.float32"),
    "float16": CType("float16", "__half", "#include <cuda_fp16.h>", "torch::kFloat16", "torch.float16"),
    "bfloat16": CType("bfloat16", "__nv_bfloat16", "#include <cuda_bf16.h>", "torch::kBFloat16", "torch.bfloat16"),
}

_KERNEL_STEMS = ("fused", "kernel", "op", "apply", "compute", "run", "main", "body")
_INDEX_NAMES = (("i", "stride"), ("idx", "step"), ("tid", "nthreads"), ("pos", "jump"), ("e", "grid_stride"))
_VALUE_NAMES = ("v", "val", "acc", "t", "h", "z")
_LAUNCH_NAMES = ("launch", "run", "forward", "call", "apply", "compute")  # drawn, unused since generator version 3
_HOST_SUFFIXES = ("", "_cuda", "_forward")  # the same


class Names:
    """Names for one solution, drawn once from the task's RNG."""

    def __init__(self, rng: random.Random, stem: str) -> None:
        word = rng.choice(_KERNEL_STEMS)
        self.kernel = f"{stem}_{word}" if rng.random() < 0.7 else f"{word}_{stem}"
        self.kernel = self.kernel + ("_kernel" if "kernel" not in self.kernel and rng.random() < 0.6 else "")
        self.index, self.stride = rng.choice(_INDEX_NAMES)
        self.value = rng.choice(_VALUE_NAMES)
        rng.choice(_LAUNCH_NAMES), rng.choice(_HOST_SUFFIXES)  # drawn as version 2 did: each seed's tasks stay its own
        # One name for the host function: it is written four times (definition, declaration, `functions=`,
        # the call), and a model that drew one of 18 variants for each wrote two of them (a load error).
        self.host = f"{stem}_forward"
        self.ext = f"kw_synth_{stem}_{rng.getrandbits(24):06x}"
        self.threads = rng.choice((128, 256, 256, 512))
        self.comments = rng.random() < 0.6


def comment(names: Names, text: str, plan: str = "") -> str:
    """A `// text` line where this solution writes comments, else nothing; `plan` (the ops of a chain in
    the order they run, "; first x through ...") is written either way: it is what a model copies its op
    statements from."""
    line = f"{text}{plan}" if names.comments else plan.removeprefix("; ")
    return f"// {line}\n" if line else ""
