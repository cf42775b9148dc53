"""Procedural elementwise tasks: a chain of 1-5 ops on a tensor, with a generator-written CUDA solution.

    from kernelwright.synthesis.family_elementwise import build_elementwise
    task = build_elementwise(random.Random(7), "elementwise_00007", 7)

The input is 2-D (rows, cols), where the chain may hold row / column operands (`p<j>`), or 3-D /
4-D, where it holds none and the kernel treats the tensor as flat. Solution templates: a
grid-stride loop, one element per thread, vectorised loads (float4 / float2 for float32, 16- or
8-byte words or half2 pairs for half types) with a scalar tail and a scalar kernel the host code
picks where a pointer is not aligned, and 2-D grids (a column per thread looping over rows, or
32-wide tiles) that load each broadcast value once; the chain as one statement per op or as one
expression. The writers of the two files, the shape and dtype draws and the chain's code are shared
with the gather family (chain_parts.py).
"""

from __future__ import annotations

import random

from kernelwright.synthesis import ops as O
from kernelwright.synthesis.chain_parts import (
    ITEMSIZE,
    aligned,
    block,
    chain_flops,
    chain_lines,
    describe,
    error_check,
    grid_cap,
    includes,
    lively_chain,
    note,
    odd,
    pick_dtype,
    pick_form,
    reference_file,
    row_len,
    solution_file,
    solution_names,
    targets,
)
from kernelwright.synthesis.style import CTYPES
from kernelwright.synthesis.task import SynthTask

# ---- elementwise solutions ----------------------------------------------------------------------------


class _Ew:
    """One elementwise solution being written: its chain, type, names and the kernel argument lists."""

    def __init__(self, rng: random.Random, chain: list[O.OpUse], dtype: str, nd: int) -> None:
        self.chain, self.ct, self.nd = chain, CTYPES[dtype], nd
        self.axes = O.broadcast_axes(chain)
        self.ns = len(O.scalar_values(chain))
        # named after no op: a name of the chain's first two ops, a version-3 model wrote those two and stopped (3
        # of 3 wrong elementwise outputs of one H100 seed); a name of every op (version 4), the quick start's tiny
        # model launched a shortened one, or one with another drawn word (4 of 12 held-out answers launched no
        # kernel they defined). One kernel name, as one host name since version 3 (the word is still drawn).
        self.names = solution_names(rng, "chain")
        self.names.kernel = "chain_kernel"
        self.form = pick_form(rng, chain)

    def params(self, sizes: list[str]) -> str:
        t = self.ct.c
        ps = [f"const {t}* __restrict__ x", f"{t}* __restrict__ y"]
        ps += [f"const {t}* __restrict__ p{j}" for j in range(len(self.axes))]
        ps += [f"float s{j}" for j in range(self.ns)] + [f"long long {s}" for s in sizes]
        return ", ".join(ps)

    def args(self, sizes: list[str]) -> str:
        a = [self.ct.data_ptr(t) for t in ("xc", "y", *(f"p{j}c" for j in range(len(self.axes))))]
        return ", ".join(a + [f"(float)s{j}" for j in range(self.ns)] + sizes)

    def sizes(self) -> list[str]:
        return ["n", "cols"] if self.axes else ["n"]

    def lane(self, pos: str, src: str, dst: str, convert: bool = True) -> list[str]:
        """One element at flat index `pos`: the float `src` through the chain, stored to `dst` (in the
        element type when `convert`)."""
        v, at = self.names.value, f"({pos})" if " " in pos else pos
        lines = []
        if "row" in self.axes:
            lines.append(f"const long long row = {at} / cols;")
        if "col" in self.axes:
            lines.append(f"const long long col = {at} % cols;")
        lines.append(f"float {v} = {src};")
        lines += chain_lines(self.chain, self.form, v, lambda j, axis: self.ct.to_float(f"p{j}[{axis}]"))
        return [*lines, f"{dst} = {self.ct.from_float(v) if convert else v};"]


def _grid_stride(e: _Ew, name: str) -> str:
    i, st = e.names.index, e.names.stride
    body = e.lane(i, e.ct.to_float(f"x[{i}]"), f"y[{i}]")
    return (f"__global__ void {name}({e.params(e.sizes())}) {{\n"
            f"    const long long {st} = (long long)gridDim.x * blockDim.x;\n"
            f"    for (long long {i} = (long long)blockIdx.x * blockDim.x + threadIdx.x; {i} < n; {i} += {st}) {{\n"
            f"{block(body, 2)}    }}\n}}\n")


def _per_thread(e: _Ew, name: str) -> str:
    i = e.names.index
    return (f"__global__ void {name}({e.params(e.sizes())}) {{\n"
            f"    const long long {i} = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if ({i} >= n) return;\n{block(e.lane(i, e.ct.to_float(f'x[{i}]'), f'y[{i}]'), 1)}}}\n")


def _vector(e: _Ew, name: str, vt: str, width: int) -> str:
    """Words of `width` elements (`vt`), then the last n % width elements one by one."""
    i, st, t = e.names.index, e.names.stride, e.ct.c
    lane = e.lane(f"{i} * {width} + k", e.ct.to_float("in[k]"), "out[k]")
    tail = e.lane("elem", e.ct.to_float("x[elem]"), "y[elem]")
    return (f"__global__ void {name}({e.params(e.sizes())}) {{\n"
            f"    const long long nvec = n / {width};\n"
            f"    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    const long long {st} = (long long)gridDim.x * blockDim.x;\n"
            f"    for (long long {i} = start; {i} < nvec; {i} += {st}) {{\n"
            f"        const {vt} raw = reinterpret_cast<const {vt}*>(x)[{i}];\n"
            f"        const {t}* in = reinterpret_cast<const {t}*>(&raw);\n"
            f"        {vt} res;\n        {t}* out = reinterpret_cast<{t}*>(&res);\n"
            f"#pragma unroll\n        for (int k = 0; k < {width}; ++k) {{\n{block(lane, 3)}        }}\n"
            f"        reinterpret_cast<{vt}*>(y)[{i}] = res;\n    }}\n"
            f"    for (long long elem = nvec * {width} + start; elem < n; elem += {st}) {{\n"
            f"{block(tail, 2)}    }}\n}}\n")


def _half2(e: _Ew, name: str) -> str:
    """Pairs through the native two-element type and its float2 conversions, then an odd last element."""
    i, st = e.names.index, e.names.stride
    pair, to2, from2 = (("__half2", "__half22float2", "__floats2half2_rn") if e.ct.c == "__half" else
                        ("__nv_bfloat162", "__bfloat1622float2", "__floats2bfloat162_rn"))
    last = e.lane("n - 1", e.ct.to_float("x[n - 1]"), "y[n - 1]")
    lanes = [line for k, xy in ((0, "x"), (1, "y")) for line in
             ["{", *(f"    {ln}" for ln in e.lane(f"{i} * 2 + {k}", f"f.{xy}", f"r{k}", convert=False)), "}"]]
    return (f"__global__ void {name}({e.params(e.sizes())}) {{\n"
            f"    const long long npair = n / 2;\n"
            f"    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    const long long {st} = (long long)gridDim.x * blockDim.x;\n"
            f"    for (long long {i} = start; {i} < npair; {i} += {st}) {{\n"
            f"        const float2 f = {to2}(reinterpret_cast<const {pair}*>(x)[{i}]);\n        float r0, r1;\n"
            f"{block(lanes, 2)}        reinterpret_cast<{pair}*>(y)[{i}] = {from2}(r0, r1);\n    }}\n"
            f"    if (start == 0 && (n & 1)) {{\n{block(last, 2)}    }}\n}}\n")


def _grid2d(e: _Ew, name: str, tile: bool) -> str:
    """A thread per column looping over rows (or 32-wide tiles of rows): each broadcast value loaded once."""
    ct, v = e.ct, e.names.value
    cols_ops = [f"const float c{j} = {ct.to_float(f'p{j}[col]')};" for j, a in enumerate(e.axes) if a == "col"]
    rows_ops = [f"const float r{j} = {ct.to_float(f'p{j}[row]')};" for j, a in enumerate(e.axes) if a == "row"]
    body = rows_ops + ["const long long off = row * cols + col;", f"float {v} = {ct.to_float('x[off]')};"]
    body += chain_lines(e.chain, e.form, v, lambda j, axis: f"{axis[0]}{j}") + [f"y[off] = {ct.from_float(v)};"]
    if tile:
        first, step = "(long long)blockIdx.y * blockDim.y + threadIdx.y", "(long long)gridDim.y * blockDim.y"
    else:
        first, step = "blockIdx.y", "gridDim.y"
    return (f"__global__ void {name}({e.params(['rows', 'cols'])}) {{\n"
            f"    const long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (col >= cols) return;\n{block(cols_ops, 1)}"
            f"    for (long long row = {first}; row < rows; row += {step}) {{\n{block(body, 2)}    }}\n}}\n")


def _host(e: _Ew, launch: list[str], dims: bool) -> tuple[str, str]:
    ct = e.ct
    sig = ", ".join(["torch::Tensor x", *(f"torch::Tensor p{j}" for j in range(len(e.axes))),
                     *(f"double s{j}" for j in range(e.ns))])
    lines = [f'TORCH_CHECK(x.is_cuda() && x.scalar_type() == {ct.at}, "x must be a {ct.dtype} CUDA tensor");',
             "auto xc = x.contiguous();"]
    if dims:
        lines += ['TORCH_CHECK(xc.dim() == 2, "x must be 2-D (rows, cols)");',
                  "const long long rows = xc.size(0);", "const long long cols = xc.size(1);"]
    for j, axis in enumerate(e.axes):
        lines += [f"TORCH_CHECK(p{j}.is_cuda() && p{j}.scalar_type() == {ct.at} && p{j}.numel() == {axis}s, "
                  f'"p{j} must be a {ct.dtype} CUDA tensor of one value per {axis}");',
                  f"auto p{j}c = p{j}.contiguous();"]
    lines += ["auto y = torch::empty_like(xc);", "const long long n = xc.numel();", "if (n == 0) return y;",
              f"const int threads = {e.names.threads};", *launch, *error_check(e.names.kernel), "return y;"]
    return f"torch::Tensor {e.names.host}({sig}) {{\n{block(lines, 1)}}}\n", sig


def elementwise_solution(rng: random.Random, chain: list[O.OpUse], dtype: str, nd: int) -> tuple[str, str]:
    """(solution file, template name) of one chain on an `nd`-D tensor of `dtype`."""
    e = _Ew(rng, chain, dtype, nd)
    k = e.names.kernel
    choices = ["grid_stride", "per_thread", "vector", "vector"] + (["grid2d", "grid2d"] if nd == 2 else [])
    strategy = rng.choice(choices + (["grid2d"] * 2 if e.axes else []))
    pre = grid_cap(rng, "n")
    if strategy == "grid_stride":
        kernels, variant = [_grid_stride(e, k)], "grid_stride"
        launch = [*pre, f"{k}<<<blocks, threads>>>({e.args(e.sizes())});"]
    elif strategy == "per_thread":
        kernels, variant = [_per_thread(e, k)], "thread_per_element"
        launch = ["const long long blocks = (n + threads - 1) / threads;",
                  f"{k}<<<(unsigned int)blocks, threads>>>({e.args(e.sizes())});"]
    elif strategy == "vector":
        if e.ct.c == "float":
            vt, width = rng.choice((("float4", 4), ("float2", 2)))
        else:
            vt, width = rng.choice((("uint4", 8), ("uint2", 4), ("pair", 2)))
        nbytes = width * ITEMSIZE[dtype]
        fast = _half2(e, f"{k}_vec") if vt == "pair" else _vector(e, f"{k}_vec", vt, width)
        variant = "vector_half2" if vt == "pair" else f"vector_{nbytes}byte"
        kernels = [fast, _grid_stride(e, f"{k}_scalar")]
        vpre = grid_cap(rng, f"std::max<long long>(n / {width}, 1)")
        launch = [*note(e.names, f"{nbytes}-byte words where both pointers allow them, else one element at a time"),
                  f"if ({aligned(['xc.data_ptr()', 'y.data_ptr()'], nbytes)}) {{", *(f"    {ln}" for ln in vpre),
                  f"    {k}_vec<<<blocks, threads>>>({e.args(e.sizes())});", "} else {",
                  *(f"    {ln}" for ln in pre), f"    {k}_scalar<<<blocks, threads>>>({e.args(e.sizes())});", "}"]
    else:
        tile = rng.random() < 0.5
        kernels, variant = [_grid2d(e, k, tile)], "grid2d_tile" if tile else "grid2d_rows"
        ycap = rng.choice((256, 1024, 4096, 65535))
        if tile:
            launch = ["const dim3 block(32, threads / 32);",
                      f"const dim3 grid((unsigned int)((cols + 31) / 32), "
                      f"(unsigned int)std::min<long long>((rows + block.y - 1) / block.y, {ycap}LL));"]
        else:
            launch = ["const dim3 block(threads);",
                      f"const dim3 grid((unsigned int)((cols + threads - 1) / threads), "
                      f"(unsigned int)std::min<long long>(rows, {ycap}LL));"]
        launch.append(f"{k}<<<grid, block>>>({e.args(['rows', 'cols'])});")
    host, sig = _host(e, launch, bool(e.axes) or strategy == "grid2d")
    lead = note(e.names, "", f"y = {O.plan_ops(chain)}, computed in float")  # the chain's plan: always
    cuda = includes(e.ct) + "\n" + block(lead, 0) + "\n".join(kernels) + "\n" + host
    tensors = ["x", *(f"p{j}" for j in range(len(e.axes)))]
    return solution_file(rng, e.names, cuda, sig, e.ns, tensors), f"elementwise/{variant}_{e.form}"


# ---- elementwise references ---------------------------------------------------------------------------


def _shapes(rng: random.Random, nd: int) -> list[dict[str, int]]:
    shapes = []
    for t in targets(rng):
        if nd == 2:
            cols = row_len(rng, 97, 4100)
            shapes.append({"rows": (t // cols) | 1, "cols": cols})
        elif nd == 3:
            batch, dim = odd(rng, 3, 17), row_len(rng, 33, 1100)
            shapes.append({"batch": batch, "seq": max(1, t // (batch * dim)) | 1, "dim": dim})
        else:
            batch, channels = odd(rng, 1, 9), odd(rng, 3, 65)
            height = odd(rng, 7, max(9, int((t / (batch * channels)) ** 0.5)))
            shapes.append({"batch": batch, "channels": channels, "height": height,
                           "width": max(1, t // (batch * channels * height)) | 1})
    return shapes


def elementwise_reference(rng: random.Random, chain: list[O.OpUse], dtype: str, shapes: list[dict[str, int]]) -> str:
    keys = list(shapes[0])
    axes = O.broadcast_axes(chain)
    scale, shift = rng.choice((1.0, 1.5, 2.0, 3.0)), round(rng.uniform(-0.5, 0.5), 2)
    inputs = [f"x = torch.randn({', '.join(keys)}) * {scale} {'-' if shift < 0 else '+'} {abs(shift)}"]
    inputs += [f"p{j} = torch.randn({axis}s)" for j, axis in enumerate(axes)]
    inputs.append(f"return [{', '.join(['x.to(dtype)', *(f'p{j}.to(dtype)' for j in range(len(axes)))])}]")
    n = " * ".join(keys)
    operands = " + ".join(f"{a}s" for a in axes)
    size = ITEMSIZE[dtype]
    kind = f"{len(keys)}-D {dtype} tensor" + (" and its row / column operands" if axes else "")
    doc = f"Elementwise {describe(chain)}, applied to a {kind}."
    return reference_file(doc, "elementwise", dtype, shapes, O.scalar_values(chain),
                          (["x", *(f"p{j}" for j in range(len(axes)))], [f"return {O.torch_chain(chain, 'x')}"]),
                          inputs, f"{chain_flops(chain)}.0 * {n}",
                          f"{size}.0 * (2 * {n}" + (f" + {operands})" if axes else ")"))


def build_elementwise(rng: random.Random, task_id: str, seed: int) -> SynthTask:
    """One elementwise task drawn from `rng` (see the module docstring)."""
    dtype = pick_dtype(rng)
    nd = 2 if rng.random() < 0.75 else rng.choice((3, 4))
    chain = lively_chain(rng, rng.randint(1, 5), dtype, broadcast=nd == 2)
    shapes = _shapes(rng, nd)
    reference = elementwise_reference(rng, chain, dtype, shapes)
    solution, template = elementwise_solution(rng, chain, dtype, nd)
    return SynthTask(id=task_id, family="elementwise", ops=tuple(u.op for u in chain), tail="", dtype=dtype,
                     reference=reference, solution=solution, template=template, seed=seed)
