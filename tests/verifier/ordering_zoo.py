"""The zoo of honest float32 summation orders, and lower-precision variants, on the CPU.

A GPU kernel sums in whatever order its threads meet the terms: one thread per row in sequence,
blocks of a row summed then combined, a tree in shared memory, split-K partial sums, atomics that
land in any order, Kahan's compensated sum. All are honest float32; their errors against the
float64 truth differ by more than an order of magnitude on long rows. Each order is emulated here
in numpy float32 (`np.cumsum` adds in sequence, unlike `np.sum`'s pairwise sum), inside four ops
(a row sum, a dot product as in matmul and convolution, a row softmax that sums serially, a layer
norm), on rows of 1 to 10^6 terms drawn as the judge draws them (verifier/inputs.py: default,
signed, heavy_tailed, small, over `torch.randn` and `torch.rand` inputs), and measured as the judge
measures: against the float64 twin, next to torch's float32 output (the reference).

The variants round the inputs (and so the products) to bfloat16, float16 or TF32 (10 mantissa bits,
round to nearest even), or accumulate in float16: lower-precision arithmetic the rule must reject.

    python -m tests.verifier.ordering_zoo      # writes tests/fixtures/tolerance/ordering_zoo.json

The fixture holds, per member, the errors in units of float32 eps (`Figures`); the tests read it
(tests/verifier/test_ordering_zoo.py) and hold the rule of kernelwright/verifier/tolerance.py to
every figure, and recompute a few members to check that the figures are what this code measures.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernelwright.atomic import write_text
from kernelwright.verifier.tolerance import budget, element_scale

FIXTURE = Path(__file__).parent.parent / "fixtures" / "tolerance" / "ordering_zoo.json"
F32 = np.float32
EPS = float(torch.finfo(torch.float32).eps)
LENGTHS = (1, 10, 100, 1000, 10**4, 10**5, 10**6)
OPS = ("sum", "dot", "softmax", "layer_norm")
BASES = ("randn", "rand")
DISTS = ("default", "signed", "heavy_tailed", "small")
VARIANTS = ("bf16", "fp16", "tf32", "fp16_accumulate")
ELEMENTS = 2**18  # terms per member (rows x row length), at least one row


# ---------------------------------------------------------------- the orders (rows of a 2-D float32 array)


def _pad(x: np.ndarray, multiple: int) -> np.ndarray:
    extra = (-x.shape[1]) % multiple
    return np.pad(x, ((0, 0), (0, extra))) if extra else x


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def serial(x: np.ndarray) -> np.ndarray:
    """One thread per row, one term after another."""
    return np.cumsum(x, axis=1, dtype=F32)[:, -1]


def blocked(x: np.ndarray, block: int = 256) -> np.ndarray:
    """Blocks of 256 terms summed in sequence, then the block sums in sequence."""
    block = min(block, x.shape[1])
    x = _pad(x, block)
    return serial(np.cumsum(x.reshape(x.shape[0], -1, block), axis=2, dtype=F32)[:, :, -1])


def tree(x: np.ndarray) -> np.ndarray:
    """Pairwise: neighbours added level by level (a shared-memory or warp-shuffle tree)."""
    x = _pad(x, _pow2(x.shape[1]))
    while x.shape[1] > 1:
        x = x[:, 0::2] + x[:, 1::2]
    return x[:, 0]


def strided_tree(x: np.ndarray, threads: int = 256) -> np.ndarray:
    """Thread t sums terms t, t + 256, ... in sequence; a tree adds the 256 partial sums."""
    threads = min(threads, _pow2(x.shape[1]))
    x = _pad(x, threads)
    return tree(np.cumsum(x.reshape(x.shape[0], -1, threads), axis=1, dtype=F32)[:, -1, :])


def split_k(x: np.ndarray, splits: int = 16) -> np.ndarray:
    """16 contiguous chunks summed in sequence each, then the 16 partial sums in sequence."""
    chunk = -(-x.shape[1] // splits)
    x = _pad(x, chunk)
    return serial(np.cumsum(x.reshape(x.shape[0], -1, chunk), axis=2, dtype=F32)[:, :, -1])


def atomics(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """atomicAdd of every term into one float: a sequence in an order nobody chose."""
    return serial(np.take_along_axis(x, np.argsort(rng.random(x.shape), axis=1), axis=1))


def block_atomics(x: np.ndarray, rng: np.random.Generator, block: int = 256) -> np.ndarray:
    """Each block's tree sum, atomically added to the row's float in any order."""
    block = min(block, _pow2(x.shape[1]))
    x = _pad(x, block)
    return atomics(tree(x.reshape(-1, block)).reshape(x.shape[0], -1), rng)


def _kahan_columns(x: np.ndarray) -> np.ndarray:
    total, comp = np.zeros(x.shape[0], F32), np.zeros(x.shape[0], F32)
    for j in range(x.shape[1]):
        y = x[:, j] - comp
        t = total + y
        comp = (t - total) - y
        total = t
    return total


def kahan(x: np.ndarray, chunk: int = 1024) -> np.ndarray:
    """Kahan's compensated sum per thread over 1024 terms, then over the threads' sums."""
    if x.shape[1] <= chunk:
        return _kahan_columns(x)
    x = _pad(x, chunk)
    return _kahan_columns(_kahan_columns(x.reshape(-1, chunk)).reshape(x.shape[0], -1))


Order = Callable[[np.ndarray], np.ndarray]


def orders(rng: np.random.Generator) -> dict[str, Order]:
    return {"serial": serial, "blocked": blocked, "tree": tree, "strided_tree": strided_tree, "split_k": split_k,
            "atomics": lambda x: atomics(x, rng), "block_atomics": lambda x: block_atomics(x, rng), "kahan": kahan}


ORDERS = tuple(orders(np.random.default_rng(0)))


# ---------------------------------------------------------------- inputs, as verifier/inputs.py transforms them


def draw(base: str, dist: str, shape: tuple[int, int], gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(*shape, generator=gen) if base == "randn" else torch.rand(*shape, generator=gen)
    if dist == "signed":
        x = x * (2 * torch.randint(0, 2, shape, generator=gen) - 1)
    elif dist == "heavy_tailed":
        x = x * torch.exp(0.75 * torch.randn(*shape, generator=gen))
    elif dist == "small":
        x = x * 1e-2
    return x


def round_mantissa(x: torch.Tensor, bits: int) -> torch.Tensor:
    """float32 rounded to nearest even at `bits` explicit mantissa bits (TF32: 10), as float32."""
    drop = 23 - bits
    u = x.contiguous().view(torch.int32)
    half = (1 << (drop - 1)) - 1
    u = (u + half + ((u >> drop) & 1)) & ~((1 << drop) - 1)
    return u.view(torch.float32)


def lowered(x: torch.Tensor, variant: str) -> torch.Tensor:
    """The inputs as the variant's arithmetic sees them."""
    if variant == "bf16":
        return x.bfloat16().float()
    if variant in ("fp16", "fp16_accumulate"):
        return x.half().float()
    if variant == "tf32":
        return round_mantissa(x, 10)
    raise ValueError(variant)


def fp16_serial(x: np.ndarray) -> np.ndarray:
    """A float16 accumulator (the terms float16 too), one term after another."""
    return np.cumsum(x.astype(np.float16), axis=1, dtype=np.float16)[:, -1].astype(F32)


# ---------------------------------------------------------------- the ops: (candidate, reference, float64 truth)


def _np(x: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(x.numpy())


def _sum(order: Order, x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(order(_np(x)))


Outputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def op_sum(order: Order, x: torch.Tensor, y: torch.Tensor, low: str = "") -> Outputs:
    xc = lowered(x, low) if low else x
    return _sum(order, xc), x.sum(-1), x.double().sum(-1)


def op_dot(order: Order, x: torch.Tensor, y: torch.Tensor, low: str = "") -> Outputs:
    xc, yc = (lowered(x, low), lowered(y, low)) if low else (x, y)
    ref = (x.unsqueeze(1) @ y.unsqueeze(2)).view(-1)  # a batched GEMM, torch's order
    return _sum(order, xc * yc), ref, (x.double() * y.double()).sum(-1)


def op_softmax(order: Order, x: torch.Tensor, y: torch.Tensor, low: str = "") -> Outputs:
    """One thread per row: the max, exp(x - max) in float32, their sum in `order`, a division."""
    xc = lowered(x, low) if low else x
    e = torch.exp(xc - xc.max(-1, keepdim=True).values)
    return e / _sum(order, e).unsqueeze(1), torch.softmax(x, -1), torch.softmax(x.double(), -1)


def op_layer_norm(order: Order, x: torch.Tensor, y: torch.Tensor, low: str = "") -> Outputs:
    """Two passes, both sums in `order`: the mean, then the mean square of the deviations."""
    n = x.shape[1]
    xc = lowered(x, low) if low else x
    mean = _sum(order, xc) / n
    d = xc - mean.unsqueeze(1)
    var = _sum(order, d * d) / n
    norm = torch.nn.functional.layer_norm
    return d / torch.sqrt(var + 1e-5).unsqueeze(1), norm(x, (n,)), norm(x.double(), (n,))


OP_FNS = {"sum": op_sum, "dot": op_dot, "softmax": op_softmax, "layer_norm": op_layer_norm}


# ---------------------------------------------------------------- figures


@dataclass(frozen=True)
class Figures:
    """One member's errors against the float64 truth, in float32 eps: normwise relative to rms(truth),
    element-wise relative to each element's scale (`tolerance.element_scale`)."""

    rmse_eps: float  # rmse(out, truth) / (eps * rms(truth))
    ref_rmse_eps: float  # the reference's own
    elem_eps: float  # max_i |out_i - truth_i| / (eps * scale_i)
    ref_elem_eps: float  # the reference's own
    elem_rms_eps: float  # max_i |out_i - truth_i| / (eps * rms(truth)): the measure of judge version 6


def figures(out: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor) -> Figures:
    o, r, t = out.double(), ref.double(), ref64
    rms = float(t.square().mean().sqrt()) or float(torch.finfo(torch.float32).tiny)
    scale = element_scale(t, rms) * EPS

    def rmse(a: torch.Tensor) -> float:
        return float((a - t).square().mean().sqrt()) / (EPS * rms)

    return Figures(rmse(o), rmse(r), float(((o - t).abs() / scale).max()), float(((r - t).abs() / scale).max()),
                   float((o - t).abs().max()) / (EPS * rms))


def member_seed(*key: object) -> int:
    return zlib.crc32("/".join(map(str, key)).encode())


def rows_for(n: int) -> int:
    return max(1, ELEMENTS // n)


def inputs(op: str, n: int, base: str, dist: str) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(member_seed(op, n, base, dist))
    shape = (rows_for(n), n)
    return draw(base, dist, shape, gen), draw(base, dist, shape, gen)


def member(op: str, n: int, base: str, dist: str, order: str) -> Figures:
    x, y = inputs(op, n, base, dist)
    fn = orders(np.random.default_rng(member_seed(op, n, base, dist, order)))[order]
    return figures(*OP_FNS[op](fn, x, y))


def variant(op: str, n: int, base: str, dist: str, low: str) -> Figures:
    """The op with the variant's lower precision, summed in a tree (a float16 accumulator: serially)."""
    x, y = inputs(op, n, base, dist)
    return figures(*OP_FNS[op](fp16_serial if low == "fp16_accumulate" else tree, x, y, low))


def keys(lengths: tuple[int, ...] = LENGTHS) -> Iterator[tuple[str, int, str, str]]:
    for op in OPS:
        for n in lengths:
            for base in BASES:
                for dist in DISTS:
                    yield op, n, base, dist


def key_name(*key: object) -> str:
    return "/".join(map(str, key))


def _rounded(fig: Figures) -> dict[str, float]:
    return {k: float(f"{v:.4g}") for k, v in asdict(fig).items()}


def calibrate() -> dict[str, Any]:
    """Every member's and every variant's figures, with the bounds they were held to."""
    bounds = {str(n): dict(zip(("m", "floor", "k", "slack"), budget(torch.float32, n), strict=True)) for n in LENGTHS}
    honest = {key_name(*key, o): _rounded(member(*key, o)) for key in keys() for o in ORDERS}
    lower = {key_name(*key, v): _rounded(variant(*key, v)) for key in keys() for v in VARIANTS}
    return {"about": "errors in float32 eps of the honest float32 orders and lower-precision variants "
                     "(tests/verifier/ordering_zoo.py); written by python -m tests.verifier.ordering_zoo",
            "elements_per_member": ELEMENTS, "bounds_at_fan_in": bounds,
            "honest": honest, "lower_precision": lower}


def main() -> None:
    torch.set_num_threads(1)  # torch's own float32 sums then do not depend on the machine's cores
    data = calibrate()
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    members = {part: ",\n".join(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}"
                                 for k, v in sorted(data.pop(part).items())) for part in ("honest", "lower_precision")}
    head = json.dumps(data, sort_keys=True)[:-1]
    write_text(FIXTURE, head + "".join(f', "{part}": {{\n{body}\n}}' for part, body in members.items()) + "}\n")
    worst = max(data["honest"].items(), key=lambda kv: kv[1]["elem_eps"])
    print(f"wrote {FIXTURE}: worst honest element error {worst[1]['elem_eps']:.0f} eps ({worst[0]})")  # noqa: T201


if __name__ == "__main__":
    main()
