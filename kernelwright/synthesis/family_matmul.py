"""The matmul_epilogue family of procedural tasks: `x @ w` (or `F.linear`), a bias, then an op chain.

    from kernelwright.synthesis.family_matmul import build_matmul_epilogue
    task = build_matmul_epilogue(random.Random(7), "matmul_epilogue_00007", 7)

Tails: "matmul" / "matmul_bias" (w of shape (K, N), `h @ w`) and "linear" / "linear_bias" (w of
shape (N, K), `F.linear`), M, N and K odd. An optional prologue (0-2 ops, no broadcast operands)
acts on x's elements, an epilogue (0-3 ops) on the product, its broadcast operands `p<j>` one
value per output row (M,) or column (N,). The solution accumulates in float (half types are
converted at the load and once at the store) and fuses prologue, bias and epilogue into one
kernel, written as one of:

- `tiled<TILE>`: TILE x TILE threads, x and w tiles in shared memory (TILE 16 or 32), one output each;
- `regblock_<RM>x<RN>_bk<BK>`: 16 x 16 threads, each RM x RN outputs held in registers, tiles of
  (16 RM) x BK and BK x (16 RN) staged in shared memory;
- `naive`: one thread per output looping over K; drawn only with a small K (129-255).

No cuBLAS and no torch matmul: the product is the kernel's own.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from kernelwright.synthesis.ops import OpUse, broadcast_axes, sample_chain
from kernelwright.synthesis.style import CTYPES, CType, Names, comment
from kernelwright.synthesis.task import DTYPES, SynthTask
from kernelwright.synthesis.task_files import (
    Arg,
    chain_args,
    chain_doc,
    cuda_ops,
    host_checks,
    host_signature,
    includes,
    launch_check,
    odd,
    order_note,
    reference_file,
    scalar_count,
    solution_file,
    task_names,
    torch_lines,
)

TAILS = ("matmul", "matmul_bias", "linear", "linear_bias")
# (low, high) of M, N and K of each shape, largest first; the last is the one a CPU runs the reference at
TILED_TIERS = ((1025, 1537), (641, 1023), (321, 511))
NAIVE_M = ((2049, 4095), (1025, 2047), (801, 1023))
NAIVE_N = ((1025, 1537), (513, 1023), (257, 511))
NAIVE_K = (129, 255)
_ESIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class Gemm:
    """One task's kernel: what it computes and the names it is written with."""

    names: Names
    ct: CType
    linear: bool  # w is (N, K) (F.linear), else (K, N)
    bias: bool
    prologue: tuple[OpUse, ...]
    epilogue: tuple[OpUse, ...]

    @property
    def axes(self) -> list[str]:
        return broadcast_axes(list(self.epilogue))

    @property
    def tensors(self) -> list[str]:
        return ["x", "w"] + (["bias"] if self.bias else []) + [f"p{j}" for j in range(len(self.axes))]

    @property
    def n_scalars(self) -> int:
        return scalar_count(self.prologue) + scalar_count(self.epilogue)

    def params(self) -> str:
        t = self.ct.c
        ps = [f"const {t}* __restrict__ x", f"const {t}* __restrict__ w"]
        ps += [f"const {t}* __restrict__ bias"] if self.bias else []
        ps += [f"const {t}* __restrict__ p{j}" for j in range(len(self.axes))]
        ps += [f"{t}* __restrict__ y", "int M", "int N", "int K"]
        return ", ".join(ps + [f"float s{j}" for j in range(self.n_scalars)])

    def call_args(self) -> str:
        ptrs = [self.ct.data_ptr(f"{t}c") for t in self.tensors] + [self.ct.data_ptr("y")]
        return ", ".join(ptrs + ["M", "N", "K"] + [f"(float)s{j}" for j in range(self.n_scalars)])

    def load_x(self, var: str, index: str) -> list[str]:
        """`var` = prologue(x[index]) as float."""
        return [f"{var} = {self.ct.to_float(f'x[{index}]')};", *cuda_ops(self.prologue, var)]

    @property
    def w_shape(self) -> str:
        return "(N, K)" if self.linear else "(K, N)"

    @property
    def layout(self) -> str:
        """The product and the weight layout it reads, one phrase for the kernel's plan and the host's sizes."""
        return f"{'F.linear(x, w)' if self.linear else 'x @ w'}: w is {self.w_shape}"

    def w_at(self, k: str, n: str) -> str:
        index = f"(long long){n} * K + {k}" if self.linear else f"(long long){k} * N + {n}"
        return self.ct.to_float(f"w[{index}]")

    def store(self, acc: str) -> list[str]:
        """Bias, epilogue and the store of output (row, col) from the float accumulator `acc`."""
        v = self.names.value
        lines = [f"float {v} = {acc};"]
        lines += [f"{v} += {self.ct.to_float('bias[col]')};"] if self.bias else []
        lines += cuda_ops(self.epilogue, v, scalar_count(self.prologue),
                          lambda j, axis: self.ct.to_float(f"p{j}[{axis}]"))
        return [*lines, f"y[(long long)row * N + col] = {self.ct.from_float(v)};"]


def _ind(lines: Sequence[str], n: int = 1) -> list[str]:
    return [("    " * n + s) if s else s for s in lines]


def _body(lines: Sequence[str]) -> str:
    """A kernel body, one level in; `#pragma unroll` lines take the indentation of the loop they precede."""
    out = _ind(lines)
    for j in range(len(out) - 2, -1, -1):
        if out[j].strip().startswith("#pragma"):
            nxt = out[j + 1]
            out[j] = nxt[: len(nxt) - len(nxt.lstrip())] + out[j].strip()
    return "\n".join(out)


def _tiled(g: Gemm, tile: int) -> str:
    """The shared-memory tiled kernel over TILE x TILE tiles."""
    if g.linear:  # w rows are K-contiguous: threads along K load them coalesced, stored transposed
        w_tile = ["const int nw = blockIdx.x * TILE + ty;", "const int kw = k0 + tx;",
                  f"ws[tx][ty] = (nw < N && kw < K) ? {g.w_at('kw', 'nw')} : 0.0f;"]
    else:
        w_tile = ["const int kw = k0 + ty;", f"ws[ty][tx] = (kw < K && col < N) ? {g.w_at('kw', 'col')} : 0.0f;"]
    body = [
        f"constexpr int TILE = {tile};", "__shared__ float xs[TILE][TILE];", "__shared__ float ws[TILE][TILE + 1];",
        "const int tx = threadIdx.x;", "const int ty = threadIdx.y;",
        "const int row = blockIdx.y * TILE + ty;", "const int col = blockIdx.x * TILE + tx;",
        "float dot = 0.0f;",
        "for (int k0 = 0; k0 < K; k0 += TILE) {",
        "    {", "        const int kx = k0 + tx;", "        float a = 0.0f;",
        "        if (row < M && kx < K) {", *_ind(g.load_x("a", "(long long)row * K + kx"), 3), "        }",
        "        xs[ty][tx] = a;", "    }",
        "    {", *_ind(w_tile, 2), "    }",
        "    __syncthreads();",
        "#pragma unroll",
        "    for (int kk = 0; kk < TILE; ++kk) {", "        dot += xs[ty][kk] * ws[kk][tx];", "    }",
        "    __syncthreads();",
        "}",
        "if (row < M && col < N) {", *_ind(g.store("dot")), "}"]
    return f"__global__ void {g.names.kernel}({g.params()}) {{\n" + _body(body) + "\n}\n"


def _regblock(g: Gemm, rm: int, rn: int, bk: int) -> str:
    """The register-blocked kernel: 16 x 16 threads, RM x RN outputs each (rows ty + 16 r, columns tx + 16 c)."""
    if g.linear:
        w_tile = ["const int cc = l / BK;", "const int kk = l % BK;"]
    else:
        w_tile = ["const int kk = l / BN;", "const int cc = l % BN;"]
    w_tile += ["const int gk = k0 + kk;", "const int gc = col0 + cc;",
               f"ws[kk][cc] = (gk < K && gc < N) ? {g.w_at('gk', 'gc')} : 0.0f;"]
    body = [
        f"constexpr int RM = {rm};", f"constexpr int RN = {rn};", f"constexpr int BK = {bk};",
        "constexpr int BM = 16 * RM;", "constexpr int BN = 16 * RN;",
        "__shared__ float xs[BM][BK + 1];", "__shared__ float ws[BK][BN + 1];",
        "const int tx = threadIdx.x;", "const int ty = threadIdx.y;", "const int lin = ty * 16 + tx;",
        "const int row0 = blockIdx.y * BM;", "const int col0 = blockIdx.x * BN;",
        "float dot[RM][RN];",
        "#pragma unroll",
        "for (int r = 0; r < RM; ++r) {",
        "#pragma unroll",
        "    for (int c = 0; c < RN; ++c) {", "        dot[r][c] = 0.0f;", "    }", "}",
        "for (int k0 = 0; k0 < K; k0 += BK) {",
        "    for (int l = lin; l < BM * BK; l += 256) {",
        "        const int rr = l / BK;", "        const int kk = l % BK;",
        "        const int gr = row0 + rr;", "        const int gk = k0 + kk;", "        float a = 0.0f;",
        "        if (gr < M && gk < K) {", *_ind(g.load_x("a", "(long long)gr * K + gk"), 3), "        }",
        "        xs[rr][kk] = a;", "    }",
        "    for (int l = lin; l < BK * BN; l += 256) {", *_ind(w_tile, 2), "    }",
        "    __syncthreads();",
        "#pragma unroll",
        "    for (int kk = 0; kk < BK; ++kk) {",
        "        float av[RM];", "        float bv[RN];",
        "#pragma unroll",
        "        for (int r = 0; r < RM; ++r) {", "            av[r] = xs[ty + 16 * r][kk];", "        }",
        "#pragma unroll",
        "        for (int c = 0; c < RN; ++c) {", "            bv[c] = ws[kk][tx + 16 * c];", "        }",
        "#pragma unroll",
        "        for (int r = 0; r < RM; ++r) {",
        "#pragma unroll",
        "            for (int c = 0; c < RN; ++c) {", "                dot[r][c] += av[r] * bv[c];", "            }",
        "        }",
        "    }",
        "    __syncthreads();",
        "}",
        "#pragma unroll",
        "for (int r = 0; r < RM; ++r) {",
        "#pragma unroll",
        "    for (int c = 0; c < RN; ++c) {",
        "        const int row = row0 + ty + 16 * r;", "        const int col = col0 + tx + 16 * c;",
        "        if (row < M && col < N) {", *_ind(g.store("dot[r][c]"), 3), "        }",
        "    }",
        "}"]
    return f"__global__ void {g.names.kernel}({g.params()}) {{\n" + _body(body) + "\n}\n"


def _naive(g: Gemm) -> str:
    i = g.names.index
    body = ["const int col = blockIdx.x * blockDim.x + threadIdx.x;",
            "const int row = blockIdx.y * blockDim.y + threadIdx.y;",
            "if (row >= M || col >= N) return;",
            "float dot = 0.0f;",
            f"for (int {i} = 0; {i} < K; ++{i}) {{",
            "    float a;", *_ind(g.load_x("a", f"(long long)row * K + {i}")),
            f"    dot += a * {g.w_at(i, 'col')};",
            "}", *g.store("dot")]
    return f"__global__ void {g.names.kernel}({g.params()}) {{\n" + _body(body) + "\n}\n"


def _host(g: Gemm, args: Sequence[Arg], launch: list[str]) -> str:
    n_dim = "0" if g.linear else "1"
    k_dim = "1" if g.linear else "0"
    lines = [*host_checks(g.ct, g.tensors),
             'TORCH_CHECK(xc.dim() == 2 && wc.dim() == 2, "x and w must be 2-D");',
             "const int M = (int)xc.size(0);", "const int K = (int)xc.size(1);",
             # the layout restated just before the lines it decides (a small model took the other's there)
             f"// {g.layout}, y = x @ w^T" if g.linear else f"// {g.layout}, y = x @ w",
             f"const int N = (int)wc.size({n_dim});",
             f'TORCH_CHECK(wc.size({k_dim}) == K, "w must be {g.w_shape} for x of shape (M, K)");']
    lines += ['TORCH_CHECK(biasc.numel() == N, "bias must hold N values");'] if g.bias else []
    for j, axis in enumerate(g.axes):
        size = "M" if axis == "row" else "N"
        lines.append(f'TORCH_CHECK(p{j}c.numel() == {size}, "p{j} must hold one value per output {axis}");')
    lines += ["auto y = torch::empty({M, N}, xc.options());", "if (y.numel() == 0) return y;", *launch,
              *launch_check(g.names.kernel), "return y;"]
    return host_signature(g.names, g.tensors, args) + " {\n" + "\n".join(_ind(lines)) + "\n}\n"


def _shapes(rng: random.Random, naive: bool) -> list[dict[str, int]]:
    tiers = [0, 1, 2] if rng.random() < 0.6 else [0, 2]
    if naive:
        shapes = [{"m": odd(rng, *NAIVE_M[t]), "n": odd(rng, *NAIVE_N[t]), "k": odd(rng, *NAIVE_K)} for t in tiers]
    else:
        shapes = [{d: odd(rng, *TILED_TIERS[t]) for d in ("m", "n", "k")} for t in tiers]
    return sorted(shapes, key=lambda s: -s["m"] * s["n"] * s["k"])


def build_matmul_epilogue(rng: random.Random, task_id: str, seed: int) -> SynthTask:
    dtype = rng.choice(DTYPES)
    ct = CTYPES[dtype]
    tail = rng.choice(TAILS)
    pro = sample_chain(rng, rng.choice((0, 0, 1, 2)), dtype, broadcast=False)
    epi = sample_chain(rng, rng.randint(0, 3), dtype, broadcast=True)
    names = task_names(rng, rng.choice(("matmul_epi", "gemm_fused", f"{tail}_epilogue", "mm_epilogue")))
    g = Gemm(names, ct, tail.startswith("linear"), tail.endswith("bias"), tuple(pro), tuple(epi))
    strategy = rng.choice(("tiled", "tiled", "regblock", "regblock", "naive"))
    grid = "dim3 grid((N + {bn} - 1) / {bn}, (M + {bm} - 1) / {bm});"
    if strategy == "tiled":
        tile = rng.choice((16, 32))
        kernel, template = _tiled(g, tile), f"tiled{tile}"
        launch = [f"const dim3 block({tile}, {tile});", grid.format(bn=tile, bm=tile),
                  f"{names.kernel}<<<grid, block>>>({g.call_args()});"]
        note = f"{tile}x{tile} shared-memory tiles, one output per thread, epilogue fused in the store"
    elif strategy == "regblock":
        rm, rn = rng.choice(((2, 2), (4, 1), (1, 4), (2, 2)))
        bk = rng.choice((8, 16))
        kernel, template = _regblock(g, rm, rn, bk), f"regblock_{rm}x{rn}_bk{bk}"
        launch = ["const dim3 block(16, 16);", grid.format(bn=16 * rn, bm=16 * rm),
                  f"{names.kernel}<<<grid, block>>>({g.call_args()});"]
        note = f"each thread {rm}x{rn} outputs in registers, {16 * rm}x{bk} and {bk}x{16 * rn} tiles in shared memory"
    else:
        bx, by = rng.choice(((32, 8), (16, 16), (32, 4)))
        kernel, template = _naive(g), "naive"
        launch = [f"const dim3 block({bx}, {by});", grid.format(bn=bx, bm=by),
                  f"{names.kernel}<<<grid, block>>>({g.call_args()});"]
        note = "one thread per output, a loop over K (K is small)"
    args = chain_args(pro) + chain_args(epi, scalar_count(pro))
    plan = f"; {g.layout}{order_note(pro, epi)}"  # the layout first: the kernel's indexing and the host follow it
    cuda = f"{includes(ct)}\n\n{comment(names, note, plan)}{kernel}\n{_host(g, args, launch)}"
    h = "h" if pro else "x"
    product = {"matmul": f"{h} @ w", "matmul_bias": f"{h} @ w + bias", "linear": f"F.linear({h}, w)",
               "linear_bias": f"F.linear({h}, w, bias)"}[tail]
    forward = torch_lines(pro, "h", "x") + ([f"y = {product}", *torch_lines(epi, "y", "y", scalar_count(pro)),
                                             "return y"] if epi else [f"return {product}"])
    w_shape = "n, k" if g.linear else "k, n"
    make = [("x", "torch.randn(m, k)"), ("w", f"torch.randn({w_shape}) / k ** 0.5")]
    make += [("bias", "torch.randn(n) * 0.5")] if g.bias else []
    make += [(f"p{j}", f"torch.randn({'m' if axis == 'row' else 'n'})") for j, axis in enumerate(g.axes)]
    extra = " + ".join(["n"] * g.bias + ["m" if a == "row" else "n" for a in g.axes]) or "0"
    then = f", then {chain_doc(epi, '.')}" if epi else ""
    doc = (f"{'F.linear' if g.linear else 'Matmul'} of {chain_doc(pro, 'x')} and w, x of shape (m, k), w of shape "
           f"({w_shape}){', plus bias (n,)' if g.bias else ''}{then}.")
    reference = reference_file(
        doc=doc, family="matmul_epilogue", dtype=dtype, shapes=_shapes(rng, strategy == "naive"), args=args,
        inputs=g.tensors, forward=forward, make_inputs=make,
        flops=f"2 * m * n * k + m * k * {len(pro)} + m * n * {len(epi) + g.bias}",
        bytes_moved=f"{_ESIZE[dtype]} * (m * k + k * n + m * n + {extra})")
    return SynthTask(task_id, "matmul_epilogue", tuple(u.op for u in pro + epi), tail, dtype, reference,
                     solution_file(names=names, cuda=cuda, tensors=g.tensors, args=args),
                     f"matmul_epilogue/{template}", seed)
