"""The two files of a procedural task, written from their parts: the reference problem and the solution.

A family module says what differs (the forward's lines, the inputs, the CUDA source and its host
function); this module writes the layout every task shares, so the files read alike whatever
family wrote them:

- `reference_file`: the KernelBench problem with kernelwright's suite metadata (CATEGORY, DTYPE,
  SHAPES, `flops`, `bytes_moved`); constructor arguments are `Arg`s, scalars of an op chain
  among them (`chain_args`), the chain's PyTorch statements from `torch_lines`;
- `solution_file`: one `load_inline` of one CUDA source and a `ModelNew` whose forward calls the
  extension's function with its tensors, then its constructor arguments in order
  (`host_signature` declares that function the same way);
- `host_checks` / `launch_check`: the host function's input checks and its launch check;
- `task_names`, `odd`, `sized`: the names and shape draws the row and matmul families share.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kernelwright.synthesis.ops import SCALAR, OpUse, cuda_statements, plan_ops, scalar_values, torch_steps
from kernelwright.synthesis.style import CTYPES, CType, Names


@dataclass(frozen=True)
class Arg:
    """A constructor argument of `Model` and `ModelNew`, passed on to the host function."""

    name: str
    kind: str  # "float" (a C++ double) or "int" (a C++ int64_t)
    value: float | int  # what get_init_inputs returns for it


def task_names(rng: random.Random, stem: str) -> Names:
    """`style.Names` for one solution, its host function never named like its kernel (an overload
    of one name is not something the bindings can take)."""
    names = Names(rng, stem)
    if names.host == names.kernel:
        names.host += "_host"
    return names


def odd(rng: random.Random, lo: int, hi: int) -> int:
    """An odd integer in [lo, hi] (never a multiple of a block size)."""
    n = rng.randint(lo, hi) | 1
    return n if n <= hi else n - 2


def chain_args(chain: Sequence[OpUse], first: int = 0) -> list[Arg]:
    """The chain's scalar parameters as constructor arguments `s<first>`, `s<first+1>`, ..."""
    return [Arg(f"s{first + j}", "float", v) for j, v in enumerate(scalar_values(list(chain)))]


def scalar_count(chain: Sequence[OpUse]) -> int:
    return sum(1 for u in chain if u.spec.kind == SCALAR)


def torch_lines(chain: Sequence[OpUse], var: str, src: str, first: int = 0,
                row_view: Callable[[str], str] = lambda p: f"{p}.unsqueeze(-1)") -> list[str]:
    """The chain as PyTorch statements, one per op: `var = op(src)`, then `var = op(var)`, ...; scalars
    are `self.s<first>`, ... (a prologue and an epilogue of one task share one numbering), broadcast
    operands `p0`, `p1`, ... (a row vector through `row_view`, as in `ops.torch_chain`)."""
    lines: list[str] = []
    prev = src
    for _, step in torch_steps(chain, first, row_view):
        lines.append(f"{var} = {step.replace('{x}', prev)}")
        prev = var
    return lines


def chain_doc(chain: Sequence[OpUse], x: str) -> str:
    """`tanh(gelu(x))`: the chain's op names applied to `x`, for a docstring."""
    for use in chain:
        x = f"{use.op}({x})"
    return x


def order_note(before: Sequence[OpUse], after: Sequence[OpUse] = ()) -> str:
    """The chain's ops in the order the kernel applies them, for its comment: "; first x through 1/2 elu, then
    2/2 tanh; then the result through 1/1 mul_scalar (s0)" ("" without ops; `ops.plan_ops`: each stage counted
    as its statements are, each item the tag of its statement). The docstring nests them (`tanh(elu(x))`); the
    kernel's comment lists them in the order its statements follow, each statement named before its code."""
    stages = (("first x", before, 0), ("then the result", after, scalar_count(before)))
    return "".join(f"; {what} through {plan_ops(list(chain), first)}" for what, chain, first in stages if chain)


def _no_broadcast(j: int, axis: str) -> str:
    raise ValueError(f"broadcast operand p{j} ({axis}) in a chain that has none")


def cuda_ops(chain: Sequence[OpUse], var: str, first: int = 0,
             load: Callable[[int, str], str] = _no_broadcast) -> list[str]:
    """`ops.cuda_statements` with the chain's scalars named `s<first>`, ... (kernel arguments)."""
    return cuda_statements(list(chain), var, load, lambda j: f"s{first + j}")


def _literal(value: float | int) -> str:
    return repr(value)


def reference_file(*, doc: str, family: str, dtype: str, shapes: Sequence[dict[str, int]], args: Sequence[Arg],
                   inputs: Sequence[str], forward: Sequence[str], make_inputs: Sequence[tuple[str, str]],
                   flops: str, bytes_moved: str) -> str:
    """The problem file. `inputs`: forward's tensor arguments; `forward`: its body lines (the last one
    returns); `make_inputs`: (name, expression of the shape keys) of each input, in `inputs` order,
    built in float32 and moved to the problem's dtype; `flops` / `bytes_moved`: expressions of the
    shape keys."""
    keys = list(shapes[0])
    params = ", ".join(f"{k}: int = {shapes[0][k]}" for k in keys)
    ctor = ", ".join(["self", *(f"{a.name}: {a.kind}" for a in args)])
    fwd = ", ".join(["self", *(f"{n}: torch.Tensor" for n in inputs)])
    cast = "" if dtype == "float32" else f".to({CTYPES[dtype].torch})"
    lines = [
        f'"""{doc}"""',
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        "",
        f'CATEGORY = "{family}"',
        f'DTYPE = "{dtype}"',
        "SHAPES = [" + ", ".join("{" + ", ".join(f'"{k}": {s[k]}' for k in keys) + "}" for s in shapes) + "]",
        "",
        "",
        "class Model(nn.Module):",
        f"    def __init__({ctor}):",
        "        super().__init__()",
        *(f"        self.{a.name} = {a.name}" for a in args),
        "",
        f"    def forward({fwd}) -> torch.Tensor:",
        *(f"        {line}" for line in forward),
        "",
        "",
        f"def get_inputs({params}):",
        *(f"    {name} = {expr}" for name, expr in make_inputs),
        "    return [" + ", ".join(f"{name}{cast}" for name, _ in make_inputs) + "]",
        "",
        "",
        "def get_init_inputs():",
        "    return [" + ", ".join(_literal(a.value) for a in args) + "]",
        "",
        "",
        f"def flops({params}) -> float:",
        f"    return float({flops})",
        "",
        "",
        f"def bytes_moved({params}) -> float:",
        f"    return float({bytes_moved})",
    ]
    return "\n".join(lines) + "\n"


def host_signature(names: Names, tensors: Sequence[str], args: Sequence[Arg]) -> str:
    """`torch::Tensor <host>(torch::Tensor x, ..., double s0, int64_t groups)`: tensors, then arguments."""
    params = [f"torch::Tensor {t}" for t in tensors]
    params += [f"{'double' if a.kind == 'float' else 'int64_t'} {a.name}" for a in args]
    return f"torch::Tensor {names.host}({', '.join(params)})"


def host_checks(ct: CType, tensors: Sequence[str], suffix: str = "c") -> list[str]:
    """Checks that each tensor is a CUDA tensor of the problem's dtype, and its contiguous copy `<t><suffix>`."""
    out = []
    for t in tensors:
        out.append(f'TORCH_CHECK({t}.is_cuda() && {t}.scalar_type() == {ct.at}, '
                   f'"{t} must be a {ct.dtype} CUDA tensor");')
    out += [f"auto {t}{suffix} = {t}.contiguous();" for t in tensors]
    return out


def launch_check(kernel: str) -> list[str]:
    return ["cudaError_t err = cudaGetLastError();",
            f'TORCH_CHECK(err == cudaSuccess, "{kernel} launch failed: ", cudaGetErrorString(err));']


def includes(ct: CType) -> str:
    lines = ["#include <torch/extension.h>", "#include <cuda_runtime.h>"]
    if ct.header:
        lines.append(ct.header)
    return "\n".join(lines)


def solution_file(*, names: Names, cuda: str, tensors: Sequence[str], args: Sequence[Arg]) -> str:
    """The solution: `cuda` (the whole CUDA source, host function `names.host` included) built with
    one load_inline, and a ModelNew with `args` whose forward passes `tensors` and `args` to it."""
    ctor = ", ".join(["self", *(f"{a.name}: {a.kind}" for a in args)])
    fwd = ", ".join(["self", *(f"{t}: torch.Tensor" for t in tensors)])
    call = ", ".join([*tensors, *(f"self.{a.name}" for a in args)])
    lines = [
        "import torch",
        "import torch.nn as nn",
        "from torch.utils.cpp_extension import load_inline",
        "",
        'cuda_source = r"""',
        cuda.strip("\n"),
        '"""',
        "",
        f'cpp_source = "{host_signature(names, tensors, args)};"',
        "",
        "_ext = load_inline(",
        f'    name="{names.ext}",',
        "    cpp_sources=cpp_source,",
        "    cuda_sources=cuda_source,",
        f'    functions=["{names.host}"],',
        '    extra_cuda_cflags=["-O3"],',
        "    verbose=False,",
        ")",
        "",
        "",
        "class ModelNew(nn.Module):",
        f"    def __init__({ctor}):",
        "        super().__init__()",
        *(f"        self.{a.name} = {a.name}" for a in args),
        "",
        f"    def forward({fwd}) -> torch.Tensor:",
        f"        return _ext.{names.host}({call})",
    ]
    return "\n".join(lines) + "\n"


def sized(rng: random.Random, lo_inner: int, hi_inner: int, targets: Sequence[tuple[float, float]],
          fixed_inner: bool = False) -> list[tuple[int, int]]:
    """(outer, inner) pairs, one per (low, high) element-count range, largest first: `inner` odd in
    [lo_inner, hi_inner] (one value for all when `fixed_inner`), `outer` odd, so that outer * inner
    lies in its range (the last range: the shape a CPU runs the reference at)."""
    shared = odd(rng, lo_inner, hi_inner)
    out = []
    for lo, hi in targets:
        inner = shared if fixed_inner else odd(rng, lo_inner, hi_inner)
        outer = max(1, int(rng.uniform(lo, hi) / inner)) | 1
        while outer * inner > hi and outer > 1:
            outer -= 2
        while outer * inner < lo:
            outer += 2
        out.append((outer, inner))
    return sorted(out, key=lambda s: -s[0] * s[1])
