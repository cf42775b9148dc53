"""The row families of procedural tasks: reduction, softmax and rownorm (`build_<family>(rng, task_id, seed)`).

Each task applies an optional elementwise prologue (0-2 ops of `ops.py`, no broadcast operands)
to every input element, then a row operation, and for reductions an optional epilogue (0-2 ops)
on the reduced values. The reference is the PyTorch expression; the solution one CUDA kernel of
`rows_kernels.py` (a strategy and its variants, drawn from the task's RNG) and its host function.

- reduction: sum, mean, max, min, argmax, var, l2norm, logsumexp over the last dim ("@rows") or
  dim 0 ("@cols") of (rows, cols); argmax only where ties stay ties (see `_argmax_prologue`);
- softmax: softmax, log_softmax, softmax_temp (a temperature constructor argument) over the last dim;
- rownorm: layernorm, layernorm_affine, rmsnorm (weight), groupnorm and groupnorm_affine on
  (batch, channels, length), eps (and the number of groups) as constructor arguments.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from kernelwright.synthesis import rows_kernels as rk
from kernelwright.synthesis.ops import OPS, SCALAR, OpUse, sample_chain
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
    sized,
    solution_file,
    task_names,
    torch_lines,
)

REDUCTION_TAILS = ("sum", "mean", "max", "min", "argmax", "var", "l2norm", "logsumexp")
SOFTMAX_TAILS = ("softmax", "log_softmax", "softmax_temp")
ROWNORM_TAILS = ("layernorm", "layernorm_affine", "rmsnorm", "groupnorm", "groupnorm_affine")
# element counts of the shapes, largest first; the last is the one a CPU runs the reference at
TARGETS = ((2e6, 8e6), (5e5, 2e6), (1e5, 4e5))
# row lengths each strategy is drawn with (any length is correct; these are the ones it suits)
ROW_LENGTHS = {"serial": (33, 1023), "warp": (33, 2047), "block_smem": (257, 16383), "block_warp": (257, 16383),
               "col_serial": (257, 16383), "col_split": (257, 16383)}
# ops whose float32 results order elements exactly as their inputs do (no saturation, no new ties):
# torch and the kernel round them alike, so argmax picks the same index
_ORDER_KEEPING = ("neg", "add_scalar", "mul_scalar", "leaky_relu")
# ops that keep large values of either sign apart: the only ones after a reduction other than a mean
_LARGE_OK = frozenset({"leaky_relu", "add_scalar", "mul_scalar", "abs", "neg", "square", "sqrt_abs", "log1p_abs"})
# where each op sends the unbounded ends of its input (missing: bounded there), for max and min prologues
_UP = {"+": "+"}
_ENDS: dict[str, dict[str, str]] = {
    **dict.fromkeys(("relu", "gelu", "silu", "softplus", "elu", "mish", "hardswish"), _UP),
    **dict.fromkeys(("leaky_relu", "add_scalar", "mul_scalar"), {"+": "+", "-": "-"}),
    **dict.fromkeys(("abs", "square", "sqrt_abs", "log1p_abs"), {"+": "+", "-": "+"}),
    "neg": {"+": "-", "-": "+"},
}
_EXTREME = {"max": "+", "min": "-", "logsumexp": "+"}  # log-sum-exp follows the max
_ESIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
_TORCH_REDUCE = {"sum": "torch.sum", "mean": "torch.mean", "max": "torch.amax", "min": "torch.amin",
                 "argmax": "torch.argmax", "var": "torch.var", "l2norm": "torch.linalg.vector_norm",
                 "logsumexp": "torch.logsumexp"}
_DOC = {"sum": "Sum", "mean": "Mean", "max": "Maximum", "min": "Minimum", "argmax": "Index of the maximum",
        "var": "Population variance", "l2norm": "L2 norm", "logsumexp": "Log-sum-exp"}


@dataclass(frozen=True)
class Variant:
    strategy: str
    vec: bool
    grid_stride: bool
    dynamic_smem: bool
    shuffle: str
    slices: int

    @property
    def name(self) -> str:
        parts = [self.strategy + (str(self.slices) if self.strategy == "col_split" else "")]
        parts += [self.shuffle] if self.strategy == "warp" else []
        parts += ["dynsmem"] if self.dynamic_smem else []
        parts += ["vec"] if self.vec else []
        parts += ["gridstride"] if self.grid_stride else []
        return "_".join(parts)


def _variant(rng: random.Random, strategies: Sequence[str]) -> Variant:
    strategy = rng.choice(list(strategies))
    rows = strategy in rk.ROW_STRATEGIES
    return Variant(strategy, vec=strategy in ("warp", "block_smem", "block_warp") and rng.random() < 0.4,
                   grid_stride=rows and rng.random() < 0.3,
                   dynamic_smem=strategy == "block_smem" and rng.random() < 0.5,
                   shuffle=rng.choice(("xor", "down")), slices=rng.choice((4, 8, 16)))


def _kernel(names: Names, ct: CType, program: rk.RowProgram, v: Variant, prep: Sequence[str] = (),
            epilogue: Sequence[str] = (), params: Sequence[str] = ()) -> rk.RowKernel:
    return rk.RowKernel(names, ct, program, v.strategy, prep=tuple(prep), epilogue=tuple(epilogue),
                        params=tuple(params), vec=v.vec, grid_stride=v.grid_stride, dynamic_smem=v.dynamic_smem,
                        shuffle=v.shuffle, slices=v.slices)


def _prologue(rng: random.Random, dtype: str, tail: str = "") -> list[OpUse]:
    """0-2 ops before the row operation. Before a reduction (`tail` given) no periodic op (the sum of
    sin over many elements hardly depends on the row), and before a max, min or log-sum-exp only chains
    whose values stay unbounded above (below for min), so the extreme is the data's, not where an op
    saturates (the min of relu is 0 in every row)."""
    length = rng.randint(0, 2)
    for _ in range(100):
        chain = sample_chain(rng, length, dtype, broadcast=False)
        if tail and {u.op for u in chain} & {"sin", "cos"}:
            continue
        if tail not in _EXTREME or _EXTREME[tail] in _ends(chain):
            return chain
    return []


def _ends(chain: Sequence[OpUse]) -> set[str]:
    """The unbounded ends ("+", "-") of the chain's values when its input is unbounded both ways."""
    ends = {"+", "-"}
    for use in chain:
        ends = {_ENDS.get(use.op, {}).get(e, "") for e in ends} - {""}
    return ends


def _epilogue(rng: random.Random, dtype: str, tail: str) -> list[OpUse]:
    """0-2 ops after the reduction: after a mean any, else only ops that stay informative on large
    values of either sign (`_LARGE_OK`: relu of a negative sum, tanh of a large one are constants)."""
    length = rng.randint(0, 2)
    for _ in range(100):
        chain = sample_chain(rng, length, dtype, broadcast=False)
        if tail == "mean" or {u.op for u in chain} <= _LARGE_OK:
            return chain
    return []


def _argmax_prologue(rng: random.Random, dtype: str) -> list[OpUse]:
    """None for half types (the reference rounds each op's result to the dtype, the kernel does not,
    which can make or break a tie), else 0-1 ops that keep the elements' order."""
    if dtype != "float32" or rng.random() < 0.5:
        return []
    op = OPS[rng.choice(_ORDER_KEEPING)]
    return [OpUse(op.name, value=round(rng.uniform(*op.param_range), 3))] if op.kind == SCALAR else [OpUse(op.name)]


def _shapes(rng: random.Random, lengths: tuple[int, int], keys: tuple[str, str] = ("rows", "cols"),
            fixed: bool = False) -> list[dict[str, int]]:
    targets = list(TARGETS) if rng.random() < 0.6 else [TARGETS[0], TARGETS[2]]
    return [dict(zip(keys, s, strict=True)) for s in sized(rng, *lengths, targets, fixed_inner=fixed)]


def _scalar_params(n: int) -> tuple[list[str], list[str]]:
    return [f"float s{j}" for j in range(n)], [f"(float)s{j}" for j in range(n)]


def _host(names: Names, ct: CType, tensors: Sequence[str], args: Sequence[Arg], body: Sequence[str]) -> str:
    lines = [*host_checks(ct, tensors), *body, *launch_check(names.kernel), "return y;"]
    return host_signature(names, tensors, args) + " {\n" + "\n".join("    " + s if s else s for s in lines) + "\n}\n"


def _cuda(names: Names, ct: CType, kernel: rk.RowKernel, note: str, host: str, plan: str = "") -> str:
    return f"{includes(ct)}\n\n{comment(names, note, plan)}{rk.kernel_source(kernel)}\n{host}"


def _rows_cols(x: str = "xc") -> list[str]:
    return ['TORCH_CHECK(x.dim() == 2, "x must be a 2-D (rows, cols) tensor");',
            f"const int rows = (int){x}.size(0);", f"const int cols = (int){x}.size(1);"]


def _reduction_program(tail: str, method: str) -> rk.RowProgram:
    one = {"sum": (rk.SUM, "{v}", "run_sum"), "mean": (rk.SUM, "{v}", "run_sum / {n}"),
           "max": (rk.MAX, "{v}", "run_max"), "min": (rk.MIN, "{v}", "run_min"),
           "l2norm": (rk.SUM, "{v} * {v}", "sqrtf(run_sum)")}
    if tail in one:
        red, value, expr = one[tail]
        return rk.RowProgram((rk.Pass(red, value, (("float", "total", expr),)),), final="total")
    if tail == "argmax":
        return rk.RowProgram((rk.Pass(rk.ARGMAX, "{v}", (("int", "best", "run_idx"),)),), final="best", final_int=True)
    if tail == "var" and method == "welford":
        return rk.RowProgram((rk.Pass(rk.WELFORD, "{v}", (("float", "spread", "run_m2 / {n}"),)),), final="spread")
    if tail == "var":
        return rk.RowProgram((rk.Pass(rk.SUM, "{v}", (("float", "mean", "run_sum / {n}"),)),
                              rk.Pass(rk.SUM, "({v} - mean) * ({v} - mean)", (("float", "spread", "run_sum / {n}"),))),
                             final="spread")
    if method == "online":
        return rk.RowProgram((rk.Pass(rk.ONLINE_LSE, "{v}", (("float", "lse", "run_max + logf(run_den)"),)),),
                             final="lse")
    return rk.RowProgram((rk.Pass(rk.MAX, "{v}", (("float", "top", "run_max"),)),
                          rk.Pass(rk.SUM, "expf({v} - top)", (("float", "lse", "top + logf(run_sum)"),))), final="lse")


def build_reduction(rng: random.Random, task_id: str, seed: int) -> SynthTask:
    dtype = rng.choice(DTYPES)
    ct = CTYPES[dtype]
    tail = rng.choice(REDUCTION_TAILS)
    along_rows = rng.random() < 0.7
    pro = _argmax_prologue(rng, dtype) if tail == "argmax" else _prologue(rng, dtype, tail)
    epi = [] if tail == "argmax" else _epilogue(rng, dtype, tail)
    method = {"var": rng.choice(("welford", "two_pass")), "logsumexp": rng.choice(("online", "two_pass"))}.get(tail, "")
    v = _variant(rng, rk.ROW_STRATEGIES if along_rows else rk.COL_STRATEGIES)
    lo, hi = ROW_LENGTHS[v.strategy]
    if dtype == "float16" and tail == "sum":  # a float16 sum stays far below 65504: at most ~1k terms
        lo, hi = (max(lo, 8191), hi) if v.strategy in rk.COL_STRATEGIES else (lo, min(hi, 1023))
    shapes = _shapes(rng, (lo, hi))
    axis = "rows" if along_rows else "cols"
    names = task_names(rng, rng.choice((f"{tail}_{axis}", f"reduce_{tail}", f"{tail}_reduce")))
    args = chain_args(pro) + chain_args(epi, scalar_count(pro))
    params, host_args = _scalar_params(len(args))
    v_name = names.value
    kernel = _kernel(names, ct, _reduction_program(tail, method), v, prep=tuple(cuda_ops(pro, v_name)),
                     epilogue=tuple(cuda_ops(epi, v_name, scalar_count(pro))), params=tuple(params))
    out = "rows" if along_rows else "cols"
    dim = "-1" if along_rows else "0"
    call = f"{_TORCH_REDUCE[tail]}({'h' if pro else 'x'}, dim={dim}{', unbiased=False' if tail == 'var' else ''})"
    forward = torch_lines(pro, "h", "x") + ([f"r = {call}", *torch_lines(epi, "r", "r", scalar_count(pro)), "return r"]
                                            if epi else [f"return {call}"])
    opts = "xc.options().dtype(torch::kLong)" if tail == "argmax" else "xc.options()"
    yptr = "reinterpret_cast<long long*>(y.data_ptr<int64_t>())" if tail == "argmax" else ct.data_ptr("y")
    body = [*_rows_cols(), f"auto y = torch::empty({{{out}}}, {opts});", "if (y.numel() == 0) return y;",
            *rk.launch_lines(kernel, ct.data_ptr("xc"), yptr, host_args)]
    note = f"{_DOC[tail].lower()} over {'each row' if along_rows else 'each column'}: {v.name.replace('_', ' ')}"
    cuda = _cuda(names, ct, kernel, note, _host(names, ct, ["x"], args, body), order_note(pro, epi))
    then = f", then {chain_doc(epi, '.')}" if epi else ""
    doc = (f"{_DOC[tail]} over {'the last dim' if along_rows else 'dim 0'} of {chain_doc(pro, 'x')} "
           f"for x of shape (rows, cols){then}.")
    reference = reference_file(
        doc=doc, family="reduction", dtype=dtype, shapes=shapes, args=args, inputs=["x"], forward=forward,
        make_inputs=[("x", f"torch.randn(rows, cols) * {rng.choice((1.0, 1.5, 2.0))} "
                           f"+ torch.randn({'rows, 1' if along_rows else '1, cols'}) * {rng.choice((0.5, 1.0))}")],
        flops=f"rows * cols * {1 + len(pro)} + {out} * {len(epi)}",
        bytes_moved=f"{_ESIZE[dtype]} * rows * cols + {8 if tail == 'argmax' else _ESIZE[dtype]} * {out}")
    template = f"reduction/{v.name}" + (f"_{method}" if method else "")
    return SynthTask(task_id, "reduction", tuple(u.op for u in pro + epi), f"{tail}@{'rows' if along_rows else 'cols'}",
                     dtype, reference, solution_file(names=names, cuda=cuda, tensors=["x"], args=args), template, seed)


def _softmax_program(tail: str, online: bool, reciprocal: bool) -> rk.RowProgram:
    """Max and sum of exp(v - max) (online in one pass, or a max pass and a sum pass), then the write pass."""
    if tail == "log_softmax":
        name, wrap, write = "log_sum", "logf({})", "{v} - row_max - log_sum"
    elif reciprocal:
        name, wrap, write = "inv_sum", "1.0f / {}", "expf({v} - row_max) * inv_sum"
    else:
        name, wrap, write = "row_sum", "{}", "expf({v} - row_max) / row_sum"
    passes: tuple[rk.Pass, ...]
    if online:
        passes = (rk.Pass(rk.ONLINE_LSE, "{v}", (("float", "row_max", "run_max"),
                                                 ("float", name, wrap.format("run_den")))),)
    else:
        passes = (rk.Pass(rk.MAX, "{v}", (("float", "row_max", "run_max"),)),
                  rk.Pass(rk.SUM, "expf({v} - row_max)", (("float", name, wrap.format("run_sum")),)))
    return rk.RowProgram(passes, write=write)


def build_softmax(rng: random.Random, task_id: str, seed: int) -> SynthTask:
    dtype = rng.choice(DTYPES)
    ct = CTYPES[dtype]
    tail = rng.choice(SOFTMAX_TAILS)
    pro = _prologue(rng, dtype)
    online = rng.random() < 0.5
    v = _variant(rng, ("warp", "block_smem", "block_warp"))
    shapes = _shapes(rng, ROW_LENGTHS[v.strategy])
    names = task_names(rng, rng.choice((tail, f"row_{tail}", f"{tail}_rows")))
    args = chain_args(pro)
    params, host_args = _scalar_params(len(args))
    prep = cuda_ops(pro, names.value)
    if tail == "softmax_temp":
        args.append(Arg("temperature", "float", round(rng.uniform(0.5, 2.5), 3)))
        params.append("float temperature")
        host_args.append("(float)temperature")
        prep.append(f"/* temperature */ {names.value} = {names.value} / temperature;")
    kernel = _kernel(names, ct, _softmax_program(tail, online, rng.random() < 0.5), v, prep=tuple(prep),
                     params=tuple(params))
    body = [*_rows_cols(), "auto y = torch::empty_like(xc);", "if (y.numel() == 0) return y;",
            *rk.launch_lines(kernel, ct.data_ptr("xc"), ct.data_ptr("y"), host_args)]
    how = "online max and sum" if online else "max pass, sum pass"
    cuda = _cuda(names, ct, kernel, f"{tail} over each row ({how}): {v.name.replace('_', ' ')}",
                 _host(names, ct, ["x"], args, body), order_note(pro))
    h = "h" if pro else "x"
    call = {"softmax": f"torch.softmax({h}, dim=-1)", "log_softmax": f"F.log_softmax({h}, dim=-1)",
            "softmax_temp": f"torch.softmax({h} / self.temperature, dim=-1)"}[tail]
    forward = [*torch_lines(pro, "h", "x"), f"return {call}"]
    what = {"softmax": "Softmax", "log_softmax": "Log-softmax", "softmax_temp": "Softmax with a temperature"}[tail]
    reference = reference_file(
        doc=f"{what} over the last dim of {chain_doc(pro, 'x')} for x of shape (rows, cols).", family="softmax",
        dtype=dtype, shapes=shapes, args=args, inputs=["x"], forward=forward,
        make_inputs=[("x", f"torch.randn(rows, cols) * {rng.choice((1.0, 2.0, 4.0))}")],
        flops=f"rows * cols * {5 + len(pro)}", bytes_moved=f"{2 * _ESIZE[dtype]} * rows * cols")
    template = f"softmax/{v.name}_{'online' if online else 'three_pass'}"
    return SynthTask(task_id, "softmax", tuple(u.op for u in pro), tail, dtype, reference,
                     solution_file(names=names, cuda=cuda, tensors=["x"], args=args), template, seed)


def _norm_program(tail: str, welford: bool, ct: CType) -> rk.RowProgram:
    rstd = "rsqrtf(run_sum / {n} + eps)"
    if tail == "rmsnorm":
        return rk.RowProgram((rk.Pass(rk.SUM, "{v} * {v}", (("float", "rstd", rstd),)),),
                             write="{v} * rstd * " + ct.to_float("gamma[{c}]"))
    if welford:
        passes: tuple[rk.Pass, ...] = (rk.Pass(rk.WELFORD, "{v}", (("float", "mean", "run_mean"),
                                                                   ("float", "rstd", "rsqrtf(run_m2 / {n} + eps)"))),)
    else:
        passes = (rk.Pass(rk.SUM, "{v}", (("float", "mean", "run_sum / {n}"),)),
                  rk.Pass(rk.SUM, "({v} - mean) * ({v} - mean)", (("float", "rstd", rstd),)))
    ch = "(row % groups) * cpg + {c} / length" if tail.startswith("groupnorm") else "{c}"
    affine = f" * {ct.to_float(f'gamma[{ch}]')} + {ct.to_float(f'beta[{ch}]')}" if tail.endswith("affine") else ""
    return rk.RowProgram(passes, write="({v} - mean) * rstd" + affine)


def _group_shapes(rng: random.Random, channels: int, lengths: tuple[int, int]) -> list[dict[str, int]]:
    targets = list(TARGETS) if rng.random() < 0.6 else [TARGETS[0], TARGETS[2]]
    out = []
    for lo, hi in targets:
        length = odd(rng, *lengths)
        batch = max(1, int(rng.uniform(lo, hi) / (channels * length))) | 1
        while batch * channels * length > hi and batch > 1:
            batch -= 2
        while batch * channels * length < lo:
            batch += 2
        out.append({"batch": batch, "channels": channels, "length": length})
    return sorted(out, key=lambda s: -s["batch"] * s["length"])


def build_rownorm(rng: random.Random, task_id: str, seed: int) -> SynthTask:
    dtype = rng.choice(DTYPES)
    ct = CTYPES[dtype]
    tail = rng.choice(ROWNORM_TAILS)
    group = tail.startswith("groupnorm")
    pro = _prologue(rng, dtype)
    welford = tail != "rmsnorm" and rng.random() < 0.5
    v = _variant(rng, ("warp", "block_smem", "block_warp"))
    if group:
        groups, cpg = rng.choice((2, 4, 8, 16)), rng.randint(2, 8)
        lo, hi = ROW_LENGTHS[v.strategy]
        shapes = _group_shapes(rng, groups * cpg, (max(33, lo // cpg), max(65, hi // cpg)))
        keys = "batch, channels, length"
    else:
        shapes = _shapes(rng, ROW_LENGTHS[v.strategy])
        keys = "rows, cols"
    names = task_names(rng, rng.choice((tail, f"{tail}_fwd", f"row_{tail}")))
    args = chain_args(pro)
    params, host_args = _scalar_params(len(args))
    tensors = ["x"] + (["weight"] if tail == "rmsnorm" else ["weight", "bias"] if tail.endswith("affine") else [])
    for t, p in zip(tensors[1:], ("gamma", "beta"), strict=False):
        params.append(f"const {ct.c}* __restrict__ {p}")
        host_args.append(ct.data_ptr(f"{t}c"))
    if group:
        args.append(Arg("num_groups", "int", groups))
        params += ["int groups", "int cpg", "int length"] if tail.endswith("affine") else []
        host_args += ["groups", "cpg", "length"] if tail.endswith("affine") else []
    args.append(Arg("eps", "float", rng.choice((1e-5, 1e-6, 1e-5))))
    params.append("float eps")
    host_args.append("(float)eps")
    kernel = _kernel(names, ct, _norm_program(tail, welford, ct), v, prep=tuple(cuda_ops(pro, names.value)),
                     params=tuple(params))
    if group:
        size = ["TORCH_CHECK(x.dim() == 3, \"x must be a 3-D (batch, channels, length) tensor\");",
                "TORCH_CHECK(num_groups > 0 && xc.size(1) % num_groups == 0, "
                "\"channels must be a multiple of num_groups\");",
                "const int groups = (int)num_groups;", "const int cpg = (int)(xc.size(1) / num_groups);",
                "const int length = (int)xc.size(2);", "const int rows = (int)xc.size(0) * groups;",
                "const int cols = cpg * length;"]
        width = "xc.size(1)"
    else:
        size, width = _rows_cols(), "cols"
    size += [f'TORCH_CHECK({t}c.numel() == {width}, "{t} must have one value per {"channel" if group else "column"}");'
             for t in tensors[1:]]
    body = [*size, "auto y = torch::empty_like(xc);", "if (y.numel() == 0) return y;",
            *rk.launch_lines(kernel, ct.data_ptr("xc"), ct.data_ptr("y"), host_args)]
    how = "one Welford pass" if welford else "mean and variance passes" if tail != "rmsnorm" else "sum of squares"
    note = f"{tail} ({how}): {v.name.replace('_', ' ')}"
    cuda = _cuda(names, ct, kernel, note, _host(names, ct, tensors, args, body), order_note(pro))
    h = "h" if pro else "x"
    wb = "".join(f", {t}" for t in tensors[1:])
    call = (f"F.group_norm({h}, self.num_groups{wb}, eps=self.eps)" if group else
            f"F.{'rms_norm' if tail == 'rmsnorm' else 'layer_norm'}({h}, ({h}.shape[-1],){wb}, eps=self.eps)")
    forward = [*torch_lines(pro, "h", "x"), f"return {call}"]
    width_name = "channels" if group else "cols"
    make = [("x", f"torch.randn({keys}) * {rng.choice((1.0, 2.0))} + {rng.choice((0.0, 0.5, 1.0))}")]
    make += [("weight", f"torch.randn({width_name}) * 0.5 + 1.0")] if len(tensors) > 1 else []
    make += [("bias", f"torch.randn({width_name}) * 0.1")] if len(tensors) > 2 else []
    n = "batch * channels * length" if group else "rows * cols"
    what = {"layernorm": "Layer norm (no affine)", "layernorm_affine": "Layer norm with weight and bias",
            "rmsnorm": "RMS norm with a weight", "groupnorm": "Group norm (no affine)",
            "groupnorm_affine": "Group norm with weight and bias"}[tail]
    over = f"num_groups groups of x of shape ({keys})" if group else f"the last dim of x of shape ({keys})"
    reference = reference_file(
        doc=f"{what} over {over}" + (f", applied to {chain_doc(pro, 'x')}." if pro else "."), family="rownorm",
        dtype=dtype, shapes=shapes,
        args=args, inputs=tensors, forward=forward, make_inputs=make, flops=f"{n} * {7 + len(pro)}",
        bytes_moved=f"{_ESIZE[dtype]} * (2 * {n} + {len(tensors) - 1} * {width_name})")
    template = f"rownorm/{v.name}_{'welford' if welford else 'sumsq' if tail == 'rmsnorm' else 'two_pass'}"
    return SynthTask(task_id, "rownorm", tuple(u.op for u in pro), tail, dtype, reference,
                     solution_file(names=names, cuda=cuda, tensors=tensors, args=args), template, seed)
