"""Procedural gather tasks: index ops (index_select, gather, embedding, take_along_dim) and a short chain.

    from kernelwright.synthesis.family_gather import build_gather
    task = build_gather(random.Random(7), "gather_00007", 7)

Kinds (the task's `tail`): `index_select` (rows of a 2-D table by a 1-D int64 index),
`gather_dim1` (`torch.gather(x, 1, idx)`: out[r][j] = x[r][idx[r][j]]), `embedding`
(`F.embedding(idx, weight)`, the weight an input, a 2-D index) and `take_along_dim` along dim 0
(out[i][j] = x[idx[i][j]][j]); then 0-2 elementwise ops on the gathered values. Indices are drawn
in range by `get_inputs` (the judge perturbs floating inputs only). Solution templates: one
thread per output element (grid-stride or guarded), one block per output row with a column loop
(the row's index read by every thread or once into shared memory), one warp per output row (the
index read by lane 0 and shuffled), and, for the row copies (index_select, embedding), vectorised
rows where the row length and both pointers allow 8- or 16-byte words, else a scalar kernel.
"""

from __future__ import annotations

import random

from kernelwright.synthesis import ops as O
from kernelwright.synthesis.chain_parts import (
    ITEMSIZE,
    MAX_NUMEL,
    MIN_NUMEL,
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

KINDS = ("index_select", "gather_dim1", "embedding", "take_along_dim")
ROW_COPY = ("index_select", "embedding")  # an output row is one whole row of the table
_STEMS = {"index_select": "index_select", "gather_dim1": "gather_cols", "embedding": "embedding",
          "take_along_dim": "take_along"}


# ---- references ---------------------------------------------------------------------------------------


def _draw_shape(rng: random.Random, kind: str, t: int) -> tuple[dict[str, int], list[int]]:
    """A shape of about `t` output elements and the element counts of its floating tensors and output."""
    if kind == "index_select":
        cols = row_len(rng, 65, 2100)
        n, rows = (t // cols) | 1, (rng.randint(150_000, 3_000_000) // cols) | 1
        return {"rows": rows, "cols": cols, "n": n}, [rows * cols, n * cols]
    if kind == "embedding":
        dim, batch = row_len(rng, 65, 1100), odd(rng, 1, 17)
        seq, vocab = max(1, t // (batch * dim)) | 1, (rng.randint(150_000, 3_000_000) // dim) | 1
        return {"vocab": vocab, "dim": dim, "batch": batch, "seq": seq}, [vocab * dim, batch * seq * dim]
    if kind == "gather_dim1":
        cols = row_len(rng, 129, 4100)
        k = row_len(rng, max(33, cols * 2 // 3), cols * 3 // 2)
        rows = (t // max(cols, k)) | 1
        return {"rows": rows, "cols": cols, "k": k}, [rows * cols, rows * k]
    cols = row_len(rng, 97, 4100)
    rows = (t // cols) | 1
    k = odd(rng, max(3, rows * 2 // 3), max(5, rows * 3 // 2))
    return {"rows": rows, "cols": cols, "k": k}, [rows * cols, k * cols]


def _shapes(rng: random.Random, kind: str) -> list[dict[str, int]]:
    shapes = []
    for t in targets(rng):
        for _ in range(100):  # redrawn until every tensor is of a size the problems use
            shape, sizes = _draw_shape(rng, kind, t)
            if all(MIN_NUMEL <= s <= MAX_NUMEL for s in sizes):
                break
        shapes.append(shape)
    return shapes


def gather_reference(rng: random.Random, kind: str, chain: list[O.OpUse], dtype: str,
                     shapes: list[dict[str, int]]) -> str:
    scale = rng.choice((1.0, 1.5, 2.0))
    if kind == "index_select":
        args, call, out, nidx = ["x", "idx"], "torch.index_select(x, 0, idx)", "n * cols", "n"
        made = [f"x = torch.randn(rows, cols) * {scale}", "idx = torch.randint(0, rows, (n,))",
                "return [x.to(dtype), idx]"]
        what = f"Selects rows of a 2-D {dtype} table by a 1-D int64 index (torch.index_select along dim 0)"
    elif kind == "gather_dim1":
        args, call, out, nidx = ["x", "idx"], "torch.gather(x, 1, idx)", "rows * k", "rows * k"
        made = [f"x = torch.randn(rows, cols) * {scale}", "idx = torch.randint(0, cols, (rows, k))",
                "return [x.to(dtype), idx]"]
        what = f"Gathers k int64-indexed columns of each row of a 2-D {dtype} tensor (torch.gather along dim 1)"
    elif kind == "embedding":
        args, call, out, nidx = ["idx", "weight"], "F.embedding(idx, weight)", "batch * seq * dim", "batch * seq"
        made = [f"weight = torch.randn(vocab, dim) * {scale}", "idx = torch.randint(0, vocab, (batch, seq))",
                "return [idx, weight.to(dtype)]"]
        what = f"Looks up the rows of a {dtype} embedding weight (an input) for a (batch, seq) int64 index"
    else:
        args, call, out, nidx = ["x", "idx"], "torch.take_along_dim(x, idx, dim=0)", "k * cols", "k * cols"
        made = [f"x = torch.randn(rows, cols) * {scale}", "idx = torch.randint(0, rows, (k, cols))",
                "return [x.to(dtype), idx]"]
        what = f"Takes out[i][j] = x[idx[i][j]][j] from a 2-D {dtype} tensor (torch.take_along_dim along dim 0)"
    body = [f"h = {call}", f"return {O.torch_chain(chain, 'h')}"] if chain else [f"return {call}"]
    doc = what + (f", then applies {describe(chain)}." if chain else ".")
    return reference_file(doc, "gather", dtype, shapes, O.scalar_values(chain), (args, body), made,
                          f"{chain_flops(chain)}.0 * {out}", f"{ITEMSIZE[dtype]}.0 * 2 * {out} + 8.0 * {nidx}")


# ---- solutions ----------------------------------------------------------------------------------------


class _G:
    """One gather solution being written."""

    def __init__(self, rng: random.Random, kind: str, chain: list[O.OpUse], dtype: str) -> None:
        self.kind, self.chain, self.ct = kind, chain, CTYPES[dtype]
        self.ns = len(O.scalar_values(chain))
        self.names = solution_names(rng, _STEMS[kind])
        self.form = pick_form(rng, chain)
        self.sizes = ["nrows", "cols"] if kind in ROW_COPY else ["orows", "ocols", "cols"]

    def params(self) -> str:
        t = self.ct.c
        ps = [f"const {t}* __restrict__ src", "const int64_t* __restrict__ idx", f"{t}* __restrict__ y"]
        return ", ".join(ps + [f"float s{j}" for j in range(self.ns)] + [f"long long {s}" for s in self.sizes])

    def args(self) -> str:
        ptrs = [self.ct.data_ptr("table"), "ic.data_ptr<int64_t>()", self.ct.data_ptr("y")]
        return ", ".join(ptrs + [f"(float)s{j}" for j in range(self.ns)] + self.sizes)

    def element(self, src: str, dst: str) -> list[str]:
        """The element `src` (an expression of the element type) through the chain into `dst`."""
        if not self.chain:
            return [f"{dst} = {src};"]
        v = self.names.value
        return [f"float {v} = {self.ct.to_float(src)};", *chain_lines(self.chain, self.form, v),
                f"{dst} = {self.ct.from_float(v)};"]


def _source(g: _G, r: str, j: str, o: str) -> str:
    """The table element of output (row `r`, column `j`, flat index `o`)."""
    if g.kind in ROW_COPY:
        return f"src[idx[{r}] * cols + {j}]"
    if g.kind == "gather_dim1":
        return f"src[{r} * cols + idx[{o}]]"
    return f"src[idx[{o}] * cols + {j}]"


def _per_element(g: _G, name: str, guarded: bool) -> str:
    o, st = g.names.index if g.names.index != "idx" else "o", g.names.stride
    total = "nrows * cols" if g.kind in ROW_COPY else "orows * ocols"
    if g.kind in ROW_COPY:
        body = [f"const long long r = {o} / cols;", f"const long long j = {o} - r * cols;"]
    elif g.kind == "gather_dim1":
        body = [f"const long long r = {o} / ocols;"]
    else:
        body = [f"const long long j = {o} % ocols;"]
    body += g.element(_source(g, "r", "j", o), f"y[{o}]")
    head = f"__global__ void {name}({g.params()}) {{\n    const long long total = {total};\n"
    if guarded:
        return (head + f"    const long long {o} = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                f"    if ({o} >= total) return;\n{block(body, 1)}}}\n")
    return (head + f"    const long long {st} = (long long)gridDim.x * blockDim.x;\n"
            f"    for (long long {o} = (long long)blockIdx.x * blockDim.x + threadIdx.x; {o} < total; {o} += {st}) {{\n"
            f"{block(body, 2)}    }}\n}}\n")


def _per_row(g: _G, name: str, warp: bool, shared: bool, vec: tuple[str, int] | None = None) -> str:
    """One block (or warp) per output row, its threads (lanes) over the columns; `shared`: the row's
    index read once (block: into shared memory; warp: by lane 0, then shuffled); `vec`: whole rows of
    (word type, elements per word), the caller having checked that the row length and pointers allow it."""
    t = g.ct.c
    rows, ocols = ("nrows", "cols") if g.kind in ROW_COPY else ("orows", "ocols")
    if warp:
        pre = ["const int lane = threadIdx.x & 31;",
               "const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;",
               "const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;"]
        first, step, c0, cstep = "warp", "nwarps", "lane", "32"
    else:
        pre, first, step, c0, cstep = [], "blockIdx.x", "gridDim.x", "threadIdx.x", "blockDim.x"
    setup: list[str] = []
    tail: list[str] = []
    if g.kind in ROW_COPY:
        if shared and warp:
            setup = ["long long pick = 0;", "if (lane == 0) pick = idx[r];",
                     "pick = __shfl_sync(0xffffffffu, pick, 0);"]
        elif shared:
            pre = ["__shared__ long long pick;", *pre]
            setup, tail = ["if (threadIdx.x == 0) pick = idx[r];", "__syncthreads();"], ["__syncthreads();"]
        else:
            setup = ["const long long pick = idx[r];"]
        setup += [f"const {t}* in = src + pick * cols;", f"{t}* out = y + r * cols;"]
    else:
        setup = [f"const int64_t* pos = idx + r * {ocols};", f"{t}* out = y + r * {ocols};"]
        if g.kind == "gather_dim1":
            setup.append(f"const {t}* in = src + r * cols;")
    if vec is not None:
        vt, width = vec
        setup += [f"const {vt}* in_w = reinterpret_cast<const {vt}*>(in);",
                  f"{vt}* out_w = reinterpret_cast<{vt}*>(out);"]
        if g.chain:
            lane = g.element("lanes_in[q]", "lanes_out[q]")
            inner = ["const " + vt + " raw = in_w[c];", f"const {t}* lanes_in = reinterpret_cast<const {t}*>(&raw);",
                     f"{vt} res;", f"{t}* lanes_out = reinterpret_cast<{t}*>(&res);", "#pragma unroll",
                     f"for (int q = 0; q < {width}; ++q) {{", *(f"    {ln}" for ln in lane), "}", "out_w[c] = res;"]
        else:
            inner = ["out_w[c] = in_w[c];"]
        limit = f"cols / {width}"
    else:
        src = "in[c]" if g.kind in ROW_COPY else "in[pos[c]]" if g.kind == "gather_dim1" else "src[pos[c] * cols + c]"
        inner, limit = g.element(src, "out[c]"), ocols
    loop = [f"for (long long c = {c0}; c < {limit}; c += {cstep}) {{", *(f"    {ln}" for ln in inner), "}"]
    body = [*setup, *loop, *tail]
    return (f"__global__ void {name}({g.params()}) {{\n{block(pre, 1)}"
            f"    for (long long r = {first}; r < {rows}; r += {step}) {{\n{block(body, 2)}    }}\n}}\n")


# each kind's index contract, restated in the host function just before the checks and sizes it decides: the
# kinds differ in those few lines alone, and a small model that wrote one kind's kernel took another's there
CONTRACTS = {"index_select": "torch.index_select(x, 0, idx): idx is 1-D (n), out is (n, cols)",
             "embedding": "F.embedding(idx, weight): out is idx's shape + (dim,), one weight row each",
             "gather_dim1": "torch.gather(x, 1, idx): idx is (rows, k), out[r][j] = x[r][idx[r][j]]",
             "take_along_dim": "torch.take_along_dim(x, idx, dim=0): idx is (k, cols), out[i][j] = x[idx[i][j]][j]"}


def _host(g: _G, launch: list[str]) -> tuple[str, str]:
    ct = g.ct
    table_arg = "weight" if g.kind == "embedding" else "x"
    args = ["idx", "weight"] if g.kind == "embedding" else ["x", "idx"]
    sig = ", ".join([*(f"torch::Tensor {a}" for a in args), *(f"double s{j}" for j in range(g.ns))])
    lines = [f'TORCH_CHECK({table_arg}.is_cuda() && {table_arg}.scalar_type() == {ct.at}, '
             f'"{table_arg} must be a {ct.dtype} CUDA tensor");',
             'TORCH_CHECK(idx.is_cuda() && idx.scalar_type() == torch::kLong, "idx must be an int64 CUDA tensor");',
             f'TORCH_CHECK({table_arg}.dim() == 2, "{table_arg} must be 2-D");',
             f"auto table = {table_arg}.contiguous();", "auto ic = idx.contiguous();",
             "const long long cols = table.size(1);", f"// {CONTRACTS[g.kind]}"]
    if g.kind == "index_select":
        lines += ['TORCH_CHECK(ic.dim() == 1, "idx must be 1-D");', "const long long nrows = ic.numel();",
                  "auto y = torch::empty({nrows, cols}, table.options());"]
    elif g.kind == "embedding":
        lines += ["const long long nrows = ic.numel();", "std::vector<int64_t> sizes = ic.sizes().vec();",
                  "sizes.push_back(cols);", "auto y = torch::empty(sizes, table.options());"]
    elif g.kind == "gather_dim1":
        lines += ['TORCH_CHECK(ic.dim() == 2 && ic.size(0) == table.size(0), "idx must be (rows, k)");',
                  "const long long orows = table.size(0);", "const long long ocols = ic.size(1);",
                  "auto y = torch::empty({orows, ocols}, table.options());"]
    else:
        lines += ['TORCH_CHECK(ic.dim() == 2 && ic.size(1) == cols, "idx must be (k, cols)");',
                  "const long long orows = ic.size(0);", "const long long ocols = cols;",
                  "auto y = torch::empty({orows, ocols}, table.options());"]
    lines += ["if (y.numel() == 0) return y;", f"const int threads = {g.names.threads};", *launch,
              *error_check(g.names.kernel), "return y;"]
    return f"torch::Tensor {g.names.host}({sig}) {{\n{block(lines, 1)}}}\n", sig


def gather_solution(rng: random.Random, kind: str, chain: list[O.OpUse], dtype: str) -> tuple[str, str]:
    """(solution file, template name) of one gather kind and chain."""
    g = _G(rng, kind, chain, dtype)
    k = g.names.kernel
    rows = "nrows" if kind in ROW_COPY else "orows"
    strategy = rng.choice(("per_element", "block_row", "warp_row") + (("vector",) * 2 if kind in ROW_COPY else ()))
    shared = rng.random() < 0.5
    per_block = rng.random() < 0.5  # block per row (else warp per row) under the vector template
    by_warp = strategy == "warp_row" or (strategy == "vector" and not per_block)
    row_launch = grid_cap(rng, rows, "(threads / 32)" if by_warp else None)
    if strategy == "per_element":
        guarded = rng.random() < 0.5
        kernels, variant = [_per_element(g, k, guarded)], "thread_per_element" + ("" if guarded else "_grid_stride")
        total = "nrows * cols" if kind in ROW_COPY else "orows * ocols"
        launch = [f"const long long blocks = ({total} + threads - 1) / threads;",
                  f"{k}<<<(unsigned int)blocks, threads>>>({g.args()});"] if guarded else \
            [*grid_cap(rng, f"({total})"), f"{k}<<<blocks, threads>>>({g.args()});"]
    elif strategy in ("block_row", "warp_row"):
        warp = strategy == "warp_row"
        kernels = [_per_row(g, k, warp, shared)]
        variant = ("warp_per_row" + ("_shfl_index" if shared else "")) if warp else \
            ("block_per_row" + ("_shared_index" if shared else ""))
        if kind not in ROW_COPY:  # the index is per element: nothing to share
            variant = variant.replace("_shfl_index", "").replace("_shared_index", "")
        launch = [*row_launch, f"{k}<<<blocks, threads>>>({g.args()});"]
    else:
        if g.ct.c == "float":
            vt, width = rng.choice((("float4", 4), ("float2", 2)))
        else:
            vt, width = rng.choice((("uint4", 8), ("uint2", 4)))
        nbytes = width * ITEMSIZE[dtype]
        kernels = [_per_row(g, f"{k}_vec", not per_block, shared, (vt, width)),
                   _per_row(g, f"{k}_scalar", not per_block, shared)]
        variant = f"vector_rows_{nbytes}byte_" + ("block" if per_block else "warp")
        launch = [*note(g.names, f"{nbytes}-byte words where the row length and both pointers allow them"),
                  *row_launch,
                  f"if (cols % {width} == 0 && {aligned(['table.data_ptr()', 'y.data_ptr()'], nbytes)}) {{",
                  f"    {k}_vec<<<blocks, threads>>>({g.args()});", "} else {",
                  f"    {k}_scalar<<<blocks, threads>>>({g.args()});", "}"]
    host, sig = _host(g, launch)
    lead = note(g.names, "", f"{kind}, then {O.plan_ops(chain)}, computed in float") if chain else note(g.names, kind)
    cuda = includes(g.ct) + "\n" + block(lead, 0) + "\n".join(kernels) + "\n" + host
    tensors = ["idx", "weight"] if kind == "embedding" else ["x", "idx"]
    return solution_file(rng, g.names, cuda, sig, g.ns, tensors), f"gather/{variant}"


def build_gather(rng: random.Random, task_id: str, seed: int) -> SynthTask:
    """One gather task drawn from `rng` (see the module docstring)."""
    dtype = pick_dtype(rng)
    kind = rng.choice(KINDS)
    chain = lively_chain(rng, rng.choice((0, 1, 1, 2)), dtype, broadcast=False)
    shapes = _shapes(rng, kind)
    reference = gather_reference(rng, kind, chain, dtype, shapes)
    solution, template = gather_solution(rng, kind, chain, dtype)
    return SynthTask(id=task_id, family="gather", ops=tuple(u.op for u in chain), tail=kind, dtype=dtype,
                     reference=reference, solution=solution, template=template, seed=seed)
