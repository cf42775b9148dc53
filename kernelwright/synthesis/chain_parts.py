"""What the elementwise and gather families share: the shape, dtype and chain draws, the writers of a
task's two files (`reference_file`, `solution_file`), and the pieces of CUDA code both write (the chain
as statements or one expression, the grid cap, the alignment test, the launch error check).

    from kernelwright.synthesis.chain_parts import chain_lines, lively_chain
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace

from kernelwright.synthesis import ops as O
from kernelwright.synthesis.style import CTYPES, CType, Names, comment

EXPR_LIMIT = 1200  # longer one-expression chains are written as statements
# rough floating-point operations per element of an op (1 unless named; a transcendental counts a few)
OP_FLOPS = {"sigmoid": 4, "tanh": 5, "gelu": 8, "silu": 5, "softplus": 4, "elu": 3, "mish": 10, "hardsigmoid": 4,
            "hardswish": 5, "sin": 4, "cos": 4, "atan": 6, "erf": 6, "log1p_abs": 4, "sqrt_abs": 2, "exp_neg_abs": 3,
            "rsqrt1p_sq": 4, "leaky_relu": 2, "clamp_sym": 2}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
# element-count ranges of the 3 shapes (largest first: the first is get_inputs' default)
TIERS = ((2_000_000, 7_000_000), (500_000, 1_800_000), (150_000, 400_000))
MIN_NUMEL, MAX_NUMEL = 100_000, 8_000_000


# ---- draws shared with the gather family -------------------------------------------------------------


def pick_dtype(rng: random.Random) -> str:
    return rng.choices(("float32", "float16", "bfloat16"), (0.6, 0.2, 0.2))[0]


def odd(rng: random.Random, lo: int, hi: int) -> int:
    """An odd number in [lo, hi)."""
    return rng.randrange(lo | 1, max(hi, (lo | 1) + 1), 2)


def row_len(rng: random.Random, lo: int, hi: int) -> int:
    """A row length: odd, or a third of the time a multiple of 8 (never of 32), so vector paths meet both."""
    if rng.random() < 0.35:
        v = rng.randrange(lo // 8 + 1, hi // 8) * 8
        return v if v % 32 else v + 8
    return odd(rng, lo, hi)


def targets(rng: random.Random) -> list[int]:
    """2 or 3 element counts, largest first."""
    tiers = TIERS if rng.random() < 0.7 else rng.choice(((TIERS[0], TIERS[2]), (TIERS[1], TIERS[2])))
    return [rng.randint(lo, hi) for lo, hi in tiers]


def chain_flops(chain: list[O.OpUse]) -> int:
    return sum(OP_FLOPS.get(u.op, 1) for u in chain)


def varies(chain: list[O.OpUse]) -> bool:
    """Whether the chain's output varies over a spread of inputs (a chain such as erf, then add -1.5,
    then relu is 0 everywhere: a degenerate task)."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 15, generator=g, dtype=torch.float64) * 2.0
    env: dict[str, object] = {"torch": torch, "F": F, "x": x,
                              "self": SimpleNamespace(**{f"s{j}": v for j, v in enumerate(O.scalar_values(chain))})}
    for j, axis in enumerate(O.broadcast_axes(chain)):
        env[f"p{j}"] = torch.randn(x.shape[0 if axis == "row" else 1], generator=g, dtype=torch.float64)
    out = eval(O.torch_chain(chain, "x"), env)  # noqa: S307 (the library's own expressions)
    return bool(torch.isfinite(out).all()) and float(out.max() - out.min()) > 1e-3 * (1.0 + float(out.abs().max()))


def lively_chain(rng: random.Random, length: int, dtype: str, broadcast: bool) -> list[O.OpUse]:
    """`ops.sample_chain`, drawn again (a few times at most) while the chain is degenerate."""
    chain = O.sample_chain(rng, length, dtype, broadcast)
    for _ in range(20):
        if varies(chain):
            break
        chain = O.sample_chain(rng, length, dtype, broadcast)
    return chain


def describe(chain: list[O.OpUse]) -> str:
    """The chain in words: "gelu, then leaky_relu (s0), then add_bias of a per-row vector"."""
    words, s = [], 0
    for u in chain:
        if u.spec.kind == O.SCALAR:
            words.append(f"{u.op} (s{s})")
            s += 1
        elif u.spec.kind == O.BROADCAST:
            words.append(f"{u.op} of a per-{u.axis} vector")
        else:
            words.append(u.op)
    return ", then ".join(words)


# ---- the two files ------------------------------------------------------------------------------------


def reference_file(doc: str, family: str, dtype: str, shapes: list[dict[str, int]], scalars: list[float],
                   forward: tuple[list[str], list[str]], inputs: list[str], flops: str, bytes_moved: str) -> str:
    """A problem file: `forward` = (argument names, body lines); `inputs` = get_inputs' body lines after
    `dtype = ...` (its own return line included); `flops` / `bytes_moved` = expressions of the shape keys."""
    keys = list(shapes[0])
    sig = ", ".join(f"{k}: int = {shapes[0][k]}" for k in keys)
    shape_lines = ",\n".join(f"    {s!r}".replace("'", '"') for s in shapes)
    made = "".join(f"    {line}\n" for line in inputs)
    return (f'"""{doc}"""\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n'
            f'CATEGORY = "{family}"\nDTYPE = "{dtype}"\nSHAPES = [\n{shape_lines},\n]\n\n\n'
            f"{_module_class('Model', len(scalars), forward[0], forward[1])}\n\n"
            f"def get_inputs({sig}):\n    dtype = {CTYPES[dtype].torch}\n{made}\n\n"
            f"def get_init_inputs():\n    return [{', '.join(repr(v) for v in scalars)}]\n\n\n"
            f"def flops({sig}) -> float:\n    return {flops}\n\n\n"
            f"def bytes_moved({sig}) -> float:\n    return {bytes_moved}\n")


def _module_class(name: str, n_scalars: int, tensors: list[str], forward: list[str]) -> str:
    """`class name(nn.Module)`: a constructor keeping `n_scalars` scalars (`self.s<j>`), and a forward of
    the tensor arguments `tensors` whose body is the lines `forward`."""
    init_sig = "".join(f", s{j}: float" for j in range(n_scalars))
    init_body = "".join(f"        self.s{j} = s{j}\n" for j in range(n_scalars))
    args = ", ".join(f"{t}: torch.Tensor" for t in tensors)
    body = "".join(f"        {line}\n" for line in forward)
    return (f"class {name}(nn.Module):\n    def __init__(self{init_sig}):\n        super().__init__()\n{init_body}\n"
            f"    def forward(self, {args}) -> torch.Tensor:\n{body}")


def solution_file(rng: random.Random, names: Names, cuda: str, host_sig: str, n_scalars: int,
                  tensors: list[str]) -> str:
    """The ModelNew file: one load_inline of `cuda` binding `names.host` (declared by `host_sig`, its
    parameter list), called with the forward's `tensors` and then the scalars `self.s<j>`."""
    rng.choice(range(3)), rng.choice(range(3))  # drawn as version 2 did (its names of the source and module)
    src, mod = "cuda_source", "_ext"  # one name each, as the other families have: each is written twice
    call = ", ".join([*tensors, *(f"self.s{j}" for j in range(n_scalars))])
    return (f'import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n'
            f'{src} = r"""\n{cuda}"""\n\ncpp_source = "torch::Tensor {names.host}({host_sig});"\n\n'
            f'{mod} = load_inline(\n    name="{names.ext}",\n    cpp_sources=cpp_source,\n    cuda_sources={src},\n'
            f'    functions=["{names.host}"],\n    extra_cuda_cflags=["-O3"],\n    verbose=False,\n)\n\n\n'
            + _module_class("ModelNew", n_scalars, tensors, [f"return {mod}.{names.host}({call})"]))


def solution_names(rng: random.Random, stem: str) -> Names:
    names = Names(rng, stem)
    if names.host == names.kernel or names.host.startswith(names.kernel + "_"):
        names.host = f"{names.host}_host"  # never an overload of (or a variant name of) a kernel
    return names


def includes(ct: CType) -> str:
    return "#include <torch/extension.h>\n#include <cuda_runtime.h>\n" + (f"{ct.header}\n" if ct.header else "")


def block(lines: list[str], depth: int) -> str:
    pad = "    " * depth
    return "".join(f"{pad}{line}\n" if line else "\n" for line in lines)


def note(names: Names, text: str, plan: str = "") -> list[str]:
    """`style.comment`'s line (`plan` written either way) as a list of lines: one or none."""
    line = comment(names, text, plan)
    return [line.rstrip("\n")] if line else []


def chain_lines(chain: list[O.OpUse], form: str, var: str, load: Callable[[int, str], str] | None = None) -> list[str]:
    """The chain applied to the float `var`: statements, or one assignment of one expression."""
    def no_load(j: int, axis: str) -> str:
        raise ValueError("this chain has no broadcast operand")

    loader = load or no_load
    if form == "expr" and chain:
        return [f"{var} = {O.cuda_chain(chain, var, loader, lambda j: f's{j}')};"]
    return O.cuda_statements(chain, var, loader, lambda j: f"s{j}")


def pick_form(rng: random.Random, chain: list[O.OpUse]) -> str:
    expr = O.cuda_chain(chain, "v", lambda j, a: f"p{j}[{a}]", lambda j: f"s{j}")
    return "expr" if rng.random() < 0.4 and len(expr) <= EXPR_LIMIT else "stmt"


def error_check(kernel: str) -> list[str]:
    return ["const cudaError_t err = cudaGetLastError();",
            f'TORCH_CHECK(err == cudaSuccess, "{kernel} launch failed: ", cudaGetErrorString(err));']


def grid_cap(rng: random.Random, count: str, per: str | None = "threads") -> list[str]:
    """Host lines setting `blocks`, the grid size for `count` work items, `per` of them a block (None:
    one a block): capped at 65535, at a fixed 4096, or at a multiple of the device's SM count."""
    kind = rng.choice(("max", "fixed", "sms"))
    need = f"({count} + {per} - 1) / {per}" if per else count
    lines, cap = [], "65535LL" if kind == "max" else "4096LL"
    if kind == "sms":
        lines = ["int device = 0;", "cudaGetDevice(&device);", "int sms = 0;",
                 "cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);"]
        cap = f"(long long)sms * {rng.choice((4, 8, 16, 32))}"
    return [*lines, f"const int blocks = (int)std::max<long long>(1, std::min<long long>({need}, {cap}));"]


def aligned(ptrs: list[str], nbytes: int) -> str:
    return " && ".join(f"reinterpret_cast<std::uintptr_t>({p}) % {nbytes} == 0" for p in ptrs)
