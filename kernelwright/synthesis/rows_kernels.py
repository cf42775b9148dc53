"""CUDA kernels of the row families (reduction, softmax, rownorm), written from a row program.

A `RowProgram` says what one row computes: reduce passes over the row's elements (each a
`Reducer`: running state, its update by one element and the merge of two states), each leaving
named results every thread of the row can read, then either one value per row (a reduction) or a
write pass over the row (softmax, normalisation). A `RowKernel` adds how threads share the work:

- `serial`: one thread per row, a plain loop;
- `warp`: one warp per row, states merged with `__shfl_xor_sync` (butterfly) or `__shfl_down_sync`
  and a broadcast from lane 0;
- `block_smem`: one block per row, a shared-memory tree (static or dynamic shared memory);
- `block_warp`: one block per row, shuffles in each warp, then one state per warp in shared memory;
- `col_serial` / `col_split`: a reduction over dim 0 (strided), one thread per column looping over
  rows, or a 32 x SLICES block per 32 columns whose row slices meet in shared memory.

`grid_stride` loops over rows (or not), `vec` loads float4 / half2 / bfloat162 vectors where the
row length and the pointer allow it (else the scalar loop), `shuffle` picks the warp merge.
`kernel_source(k)` is the kernel, `launch_lines(k, ...)` the host code that launches it (the block
size, `names.threads`, is also the kernel's THREADS).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kernelwright.synthesis.style import CType, Names

ROW_STRATEGIES = ("serial", "warp", "block_smem", "block_warp")
COL_STRATEGIES = ("col_serial", "col_split")
FULL = "0xffffffffu"


@dataclass(frozen=True)
class Field:
    name: str
    ctype: str  # "float" or "int"
    init: str  # the identity of the merge


@dataclass(frozen=True)
class Reducer:
    fields: tuple[Field, ...]
    update: tuple[str, ...]  # statements folding one element in: {q} its float value, {c} its index
    merge: tuple[str, ...]  # statements folding the state o_<field>... into <field>...


SUM = Reducer((Field("run_sum", "float", "0.0f"),), ("run_sum += {q};",), ("run_sum += o_run_sum;",))
MAX = Reducer((Field("run_max", "float", "-INFINITY"),), ("run_max = fmaxf(run_max, {q});",),
              ("run_max = fmaxf(run_max, o_run_max);",))
MIN = Reducer((Field("run_min", "float", "INFINITY"),), ("run_min = fminf(run_min, {q});",),
              ("run_min = fminf(run_min, o_run_min);",))
# the first index of the largest value, like torch.argmax: each thread sees its indices in order
ARGMAX = Reducer(
    (Field("run_max", "float", "-INFINITY"), Field("run_idx", "int", "0")),
    ("if ({q} > run_max) {", "    run_max = {q};", "    run_idx = {c};", "}"),
    ("if (o_run_max > run_max || (o_run_max == run_max && o_run_idx < run_idx)) {",
     "    run_max = o_run_max;", "    run_idx = o_run_idx;", "}"))
# Welford's update, Chan's merge of two (count, mean, M2) states
WELFORD = Reducer(
    (Field("run_cnt", "float", "0.0f"), Field("run_mean", "float", "0.0f"), Field("run_m2", "float", "0.0f")),
    ("run_cnt += 1.0f;", "const float dq = {q} - run_mean;", "run_mean += dq / run_cnt;",
     "run_m2 += dq * ({q} - run_mean);"),
    ("const float cnt = run_cnt + o_run_cnt;", "if (cnt > 0.0f) {", "    const float dq = o_run_mean - run_mean;",
     "    const float wq = o_run_cnt / cnt;", "    run_mean += dq * wq;",
     "    run_m2 += o_run_m2 + dq * dq * run_cnt * wq;", "}", "run_cnt = cnt;"))
# online max and sum of exp(x - max) (log-sum-exp, online softmax)
ONLINE_LSE = Reducer(
    (Field("run_max", "float", "-INFINITY"), Field("run_den", "float", "0.0f")),
    ("if ({q} > run_max) {", "    run_den = run_den * expf(run_max - {q}) + 1.0f;", "    run_max = {q};",
     "} else {", "    run_den += expf({q} - run_max);", "}"),
    ("const float mx = fmaxf(run_max, o_run_max);", "if (mx != -INFINITY) {",
     "    run_den = run_den * expf(run_max - mx) + o_run_den * expf(o_run_max - mx);", "}", "run_max = mx;"))


@dataclass(frozen=True)
class Pass:
    reducer: Reducer
    value: str  # what is reduced: a float expression of {v}, the element after the prologue
    results: tuple[tuple[str, str, str], ...]  # (C type, name, expression of the fields and {n}, the length)


@dataclass(frozen=True)
class RowProgram:
    passes: tuple[Pass, ...]
    final: str = ""  # one value per row: an expression of the results ("" for a write pass)
    final_int: bool = False  # the value is an index (int64 output)
    write: str = ""  # the write pass: the output element, a float expression of {v}, {c} and the results


@dataclass(frozen=True)
class RowKernel:
    names: Names
    ct: CType
    program: RowProgram
    strategy: str  # one of ROW_STRATEGIES or COL_STRATEGIES
    prep: tuple[str, ...] = ()  # statements on the element's float value (names.value) after its load
    epilogue: tuple[str, ...] = ()  # statements on the row's value (names.value) before it is stored
    params: tuple[str, ...] = ()  # the kernel's parameters after (x, y, rows, cols)
    vec: bool = False
    grid_stride: bool = False
    dynamic_smem: bool = False
    shuffle: str = "xor"  # "xor" or "down"
    slices: int = 8  # col_split's row slices (a power of two)

    @property
    def out_c(self) -> str:
        return "long long" if self.program.final_int else self.ct.c


def _ind(lines: Sequence[str], n: int = 1) -> list[str]:
    return [("    " * n + s) if s else s for s in lines]


def _element(k: RowKernel, p: Pass, c: str, raw: str) -> list[str]:
    v = k.names.value
    out = [f"float {v} = {raw};", *k.prep]
    q = v
    if p.value != "{v}":
        out.append(f"const float q = {p.value.replace('{v}', v)};")
        q = "q"
    return [*out, *(line.replace("{q}", q).replace("{c}", c) for line in p.reducer.update)]


def _loop(k: RowKernel, p: Pass, start: str, bound: str, step: str, load: Callable[[str], str],
          live: bool = False) -> list[str]:
    i = k.names.index
    inc = f"++{i}" if step == "1" else f"{i} += {step}"
    cond = f"live && {i} < {bound}" if live else f"{i} < {bound}"
    return [f"for (int {i} = {start}; {cond}; {inc}) {{", *_ind(_element(k, p, i, load(i))), "}"]


_VEC = {"float": ("float4", 4, ""), "__half": ("__half2", 2, "__half22float2"),
        "__nv_bfloat16": ("__nv_bfloat162", 2, "__bfloat1622float2")}


def _vec_loop(k: RowKernel, p: Pass, start: str, step: str) -> list[str]:
    vtype, width, conv = _VEC[k.ct.c]
    i = k.names.index
    load = f"const float4 f4 = xv[{i}];" if width == 4 else f"const float2 f2 = {conv}(xv[{i}]);"
    parts = ("f4.x", "f4.y", "f4.z", "f4.w") if width == 4 else ("f2.x", "f2.y")
    body = [load]
    for j, part in enumerate(parts):
        body += ["{", *_ind(_element(k, p, f"{width} * {i} + {j}", part)), "}"]
    scalar = _loop(k, p, start, "cols", step, lambda c: k.ct.to_float(f"xr[{c}]"))
    return ["if (vec_ok) {", f"    const {vtype}* xv = reinterpret_cast<const {vtype}*>(xr);",
            f"    for (int {i} = {start}; {i} < cols / {width}; {i} += {step}) {{", *_ind(body, 2), "    }",
            "} else {", *_ind(scalar), "}"]


def _warp_merge(fields: Sequence[Field], merge: Sequence[str], shuffle: str, broadcast: bool) -> list[str]:
    fn = "__shfl_xor_sync" if shuffle == "xor" else "__shfl_down_sync"
    out = ["for (int off = 16; off > 0; off >>= 1) {",
           *(f"    const {f.ctype} o_{f.name} = {fn}({FULL}, {f.name}, off);" for f in fields), *_ind(merge), "}"]
    if shuffle == "down" and broadcast:
        out += [f"{f.name} = __shfl_sync({FULL}, {f.name}, 0);" for f in fields]
    return out


def _tree(fields: Sequence[Field], merge: Sequence[str], first: str, owner: str, me: str, other: str,
          top: str) -> list[str]:
    """A shared-memory tree over `first` / 2, ..., 1: the thread `owner` < span merges its partner's
    slot `other` into its own slot `me`; every thread then reads the root `top`."""
    return ["__syncthreads();",
            f"for (int span = {first} / 2; span > 0; span >>= 1) {{",
            f"    if ({owner} < span) {{",
            *(f"        const {f.ctype} o_{f.name} = sh_{f.name}{other};" for f in fields),
            *_ind(merge, 2),
            *(f"        sh_{f.name}{me} = {f.name};" for f in fields),
            "    }", "    __syncthreads();", "}",
            *(f"{f.name} = sh_{f.name}{top};" for f in fields), "__syncthreads();"]


def _combine(k: RowKernel, p: Pass) -> list[str]:
    """Statements after which every thread of the row holds the merged state of the pass."""
    fields, merge = p.reducer.fields, p.reducer.merge
    if k.strategy in ("serial", "col_serial"):
        return []
    if k.strategy == "warp":
        return _warp_merge(fields, merge, k.shuffle, broadcast=True)
    if k.strategy == "block_smem":
        if k.dynamic_smem:
            decl = [f"{f.ctype}* sh_{f.name} = reinterpret_cast<{f.ctype}*>({k.names.kernel}_smem + {j} * blockDim.x);"
                    for j, f in enumerate(fields)]
            first = "(int)blockDim.x"
        else:
            decl = [f"__shared__ {f.ctype} sh_{f.name}[THREADS];" for f in fields]
            first = "THREADS"
        return [*decl, *(f"sh_{f.name}[th] = {f.name};" for f in fields),
                *_tree(fields, merge, first, "th", "[th]", "[th + span]", "[0]")]
    if k.strategy == "block_warp":
        return [*_warp_merge(fields, merge, "down", broadcast=False),
                *(f"__shared__ {f.ctype} sh_{f.name}[32];" for f in fields),
                "if (lane == 0) {", *(f"    sh_{f.name}[wid] = {f.name};" for f in fields), "}",
                "__syncthreads();",
                "if (wid == 0) {",
                *(f"    {f.name} = lane < THREADS / 32 ? sh_{f.name}[lane] : {f.init};" for f in fields),
                *_ind(_warp_merge(fields, merge, "down", broadcast=False)),
                "    if (lane == 0) {", *(f"        sh_{f.name}[0] = {f.name};" for f in fields), "    }",
                "}",
                "__syncthreads();", *(f"{f.name} = sh_{f.name}[0];" for f in fields), "__syncthreads();"]
    # col_split
    return [*(f"__shared__ {f.ctype} sh_{f.name}[SLICES][32];" for f in fields),
            *(f"sh_{f.name}[ty][tx] = {f.name};" for f in fields),
            *_tree(fields, merge, "SLICES", "ty", "[ty][tx]", "[ty + span][tx]", "[0][tx]")]


def _span(k: RowKernel) -> tuple[str, str]:
    """(first index, step) of a thread's elements along the reduced dimension."""
    return {"serial": ("0", "1"), "warp": ("lane", "32"), "block_smem": ("th", "THREADS"),
            "block_warp": ("th", "THREADS"), "col_serial": ("0", "1"), "col_split": ("ty", "SLICES")}[k.strategy]


def _pass_lines(k: RowKernel, p: Pass) -> list[str]:
    start, step = _span(k)
    n = "(float)rows" if k.strategy in COL_STRATEGIES else "(float)cols"
    if k.strategy in COL_STRATEGIES:
        loop = _loop(k, p, start, "rows", step, lambda r: k.ct.to_float(f"x[(long long){r} * cols + col]"),
                     live=k.strategy == "col_split")
    elif k.vec:
        loop = _vec_loop(k, p, start, step)
    else:
        loop = _loop(k, p, start, "cols", step, lambda c: k.ct.to_float(f"xr[{c}]"))
    out = [f"{ct} {name};" for ct, name, _ in p.results]
    body = [*(f"{f.ctype} {f.name} = {f.init};" for f in p.reducer.fields), *loop, *_combine(k, p),
            *(f"{name} = {expr.replace('{n}', n)};" for _, name, expr in p.results)]
    return [*out, "{", *_ind(body), "}"]


def _output(k: RowKernel) -> list[str]:
    prog, v, ct = k.program, k.names.value, k.ct
    where = "col" if k.strategy in COL_STRATEGIES else "row"
    writer = {"serial": "", "col_serial": "", "warp": "lane == 0", "block_smem": "th == 0",
              "block_warp": "th == 0", "col_split": "live && ty == 0"}[k.strategy]
    if prog.final:
        if prog.final_int:
            store = [f"y[{where}] = (long long){prog.final};"]
        else:
            store = [f"float {v} = {prog.final};", *k.epilogue, f"y[{where}] = {ct.from_float(v)};"]
        return [f"if ({writer}) {{", *_ind(store), "}"] if writer else store
    start, step = _span(k)
    i = k.names.index
    inc = f"++{i}" if step == "1" else f"{i} += {step}"
    value = prog.write.replace("{v}", v).replace("{c}", i)
    return [f"{k.out_c}* yr = y + (long long)row * cols;",
            f"for (int {i} = {start}; {i} < cols; {inc}) {{",
            f"    float {v} = {ct.to_float(f'xr[{i}]')};", *_ind(k.prep), f"    yr[{i}] = {ct.from_float(value)};", "}"]


def _row_loop(k: RowKernel) -> tuple[list[str], list[str]]:
    """(opening lines, closing lines) of the row a thread / warp / block works on."""
    first = {"serial": "blockIdx.x * blockDim.x + threadIdx.x",
             "warp": "(int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5)"}.get(k.strategy, "blockIdx.x")
    total = {"serial": "gridDim.x * blockDim.x", "warp": "(int)((gridDim.x * blockDim.x) >> 5)"}.get(
        k.strategy, "gridDim.x")
    row_ptr = f"const {k.ct.c}* xr = x + (long long)row * cols;"
    if k.grid_stride:
        return [f"for (int row = {first}; row < rows; row += {total}) {{", f"    {row_ptr}"], ["}"]
    return [f"const int row = {first};", "if (row >= rows) return;", row_ptr], []


def _signature(k: RowKernel) -> str:
    params = [f"const {k.ct.c}* __restrict__ x", f"{k.out_c}* __restrict__ y", "int rows", "int cols", *k.params]
    return f"{k.names.kernel}({', '.join(params)})"


def kernel_source(k: RowKernel) -> str:
    """The `__global__` kernel of `k`. Its block shape is a `constexpr` of the body (THREADS, SLICES),
    not a template parameter: a kernel template that nothing instantiates in device code is only
    parsed, not checked, by a device compile without the host half."""
    head: list[str] = []
    if k.strategy in COL_STRATEGIES:
        if k.strategy == "col_split":
            head = [f"constexpr int SLICES = {k.slices};", "const int tx = threadIdx.x;", "const int ty = threadIdx.y;",
                    "const int col = blockIdx.x * 32 + tx;", "const bool live = col < cols;"]
        else:
            head = ["const int col = blockIdx.x * blockDim.x + threadIdx.x;", "if (col >= cols) return;"]
        body = [line for p in k.program.passes for line in _pass_lines(k, p)] + _output(k)
        return f"__global__ void {_signature(k)} {{\n" + "\n".join(_ind(head + body)) + "\n}\n"
    if k.strategy in ("block_smem", "block_warp"):
        head = [f"constexpr int THREADS = {k.names.threads};", "const int th = threadIdx.x;"]
        if k.strategy == "block_warp":
            head += ["const int lane = th & 31;", "const int wid = th >> 5;"]
        if k.dynamic_smem:
            head.append(f"extern __shared__ float {k.names.kernel}_smem[];")
    elif k.strategy == "warp":
        head = ["const int lane = threadIdx.x & 31;"]
    if k.vec:
        _, width, _ = _VEC[k.ct.c]
        align = 4 * width if width == 4 else 4
        head.append(f"const bool vec_ok = (cols % {width} == 0) && "
                    f"((reinterpret_cast<unsigned long long>(x) & {align - 1}ull) == 0ull);")
    opening, closing = _row_loop(k)
    inner = [line for p in k.program.passes for line in _pass_lines(k, p)] + _output(k)
    lines = head + opening + (_ind(inner) if closing else inner) + closing
    return f"__global__ void {_signature(k)} {{\n" + "\n".join(_ind(lines)) + "\n}\n"


def smem_fields(k: RowKernel) -> int:
    return max(len(p.reducer.fields) for p in k.program.passes)


def launch_lines(k: RowKernel, x: str, y: str, args: Sequence[str]) -> list[str]:
    """Host lines launching the kernel on `rows` x `cols` (host ints already declared): `x` and `y`
    the device pointers, `args` the values of `k.params`."""
    name, threads = k.names.kernel, k.names.threads
    call_args = ", ".join([x, y, "rows", "cols", *args])
    if k.strategy == "col_split":
        return ["const dim3 block(32, " + str(k.slices) + ");", "const dim3 grid((cols + 31) / 32);",
                f"{name}<<<grid, block>>>({call_args});"]
    per_block = {"serial": threads, "warp": threads // 32, "col_serial": threads}.get(k.strategy, 1)
    extent = "cols" if k.strategy == "col_serial" else "rows"
    out = [f"const int threads = {threads};"]
    want = f"((long long){extent} + {per_block - 1}) / {per_block}" if per_block > 1 else f"(long long){extent}"
    if k.grid_stride:
        out += ["int device = 0;", "cudaGetDevice(&device);", "int sms = 0;",
                "cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);",
                f"const int blocks = (int)std::min<long long>({want}, (long long)sms * 8);"]
    else:
        out.append(f"const int blocks = (int)({want});")
    smem = f", {smem_fields(k)} * threads * sizeof(float)" if k.dynamic_smem and k.strategy == "block_smem" else ""
    out.append(f"{name}<<<blocks, threads{smem}>>>({call_args});")
    return out
