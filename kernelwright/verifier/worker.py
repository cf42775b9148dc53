"""The verification worker: one candidate, one problem, one fresh process (and CUDA context).

    python -m kernelwright.verifier.worker SPEC.json      # started by kernelwright.verifier.verify

SPEC.json names the problem, the candidate, the result file and the protocol options. The worker
writes its progress (`phase`) and finally its verdict to the result file, atomically, so that the
parent can tell where a worker that died (crash, `os._exit`, timeout) was. Protocol:
docs/verification.md; the reason codes are in `kernelwright.verifier.verdict`.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import dataclasses
import fcntl
import hashlib
import importlib.util
import json
import math
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelwright import atomic
from kernelwright.cuda.pch import use_header
from kernelwright.cuda.static_checks import kernel_names
from kernelwright.verifier.verdict import ShapeResult, Verdict

DISTRIBUTIONS = ("default", "signed", "heavy_tailed", "small")


class Rejected(Exception):
    """Raised inside the worker to end verification with a verdict."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


@dataclass
class Spec:
    problem: str
    candidate: str
    result: str
    seeds: tuple[int, ...] = (0, 1)
    timing: bool = True
    compile_baseline: bool = True
    min_trials: int = 10
    max_trials: int = 100
    timing_budget_s: float = 1.0
    build_cache: str | None = None
    timing_lock: str | None = None
    memory_fraction: float = 0.5
    min_custom_share: float = 0.5
    peak_flops: dict[str, float] | None = None
    peak_bytes_per_s: float = 4.3e12
    launch_floor_ms: float = 0.002
    ref_timing_cache: bool = True
    split_build: bool = True  # device code built without torch headers (split_build.py), else as written
    pch_lock: str | None = None  # the parent's precompiled-header build to wait for (pch.py); None: none
    profiler_warm_up: bool = True  # the profiler's first session during the build (profiler_started_alongside)


class Progress:
    """The worker's state file: the current phase (what a timeout or crash reports) and the seconds
    spent in each phase so far (`phase_s`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state: dict[str, Any] = {"phase": "start", "phase_s": {}}
        self._since = time.perf_counter()

    def write(self, **fields: Any) -> None:
        if "phase" in fields:
            now = time.perf_counter()
            spent = self.state["phase_s"]
            spent[self.state["phase"]] = spent.get(self.state["phase"], 0.0) + now - self._since
            self._since = now
        self.state.update(fields)
        atomic.write_text(self.path, json.dumps(self.state, default=str))


# ---------------------------------------------------------------- isolation and build


def _no_network() -> None:
    """No network for the candidate: a new network namespace where allowed, and no sockets."""
    if hasattr(os, "unshare"):
        with contextlib.suppress(OSError):
            os.unshare(os.CLONE_NEWNET)  # type: ignore[attr-defined]

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise PermissionError("network access is disabled during verification")

    socket.socket = refuse  # type: ignore[assignment,misc]
    socket.create_connection = refuse  # type: ignore[assignment]


def _patch_load_inline(cache: str | None, split: bool = False, pch_lock: str | None = None) -> None:
    """Cheaper `load_inline` builds that compute the same thing.

    - a build folder per content hash (a second candidate with the same sources is not rebuilt);
    - only the present GPU's architecture (TORCH_CUDA_ARCH_LIST);
    - the .cu file includes `torch/types.h` instead of `torch/extension.h` (no pybind11, no
      autograd API: half the host parse), retried with the original header if that fails;
    - a precompiled `torch/extension.h` for the C++ bindings file (`use_pch`), built by the parent
      while this worker started (`pch_lock`, see pch.py). A call without it leaves the shared header
      in place: stock `load_inline(use_pch=False)` deletes it, under the other workers' builds.
    """
    import torch
    import torch.utils.cpp_extension as ext

    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    original = ext.load_inline
    ext.remove_extension_h_precompiler_headers = lambda: None  # load_inline looks it up at each call

    def load_inline(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> Any:
        sources = json.dumps([name, cpp_sources, cuda_sources, kw.get("functions"), kw.get("extra_cuda_cflags"),
                              kw.get("extra_cflags"), os.environ["TORCH_CUDA_ARCH_LIST"]], default=str)
        digest = hashlib.sha256(sources.encode()).hexdigest()[:20]
        if cache and not kw.get("build_directory"):
            kw["build_directory"] = str(Path(cache) / digest)
            Path(kw["build_directory"]).mkdir(parents=True, exist_ok=True)
        kw["use_pch"] = use_header(kw, pch_lock)
        if split:  # None: not splittable or the split build failed
            from kernelwright.cuda.split_build import try_split_build
            if (module := try_split_build(original, name, cpp_sources, cuda_sources, kw)) is not None:
                BUILD_PATHS.append("split")
                return module
        slim = _slim_cuda(cuda_sources)
        if slim is not None:
            try:
                module = original(name, cpp_sources, slim, **kw)
                BUILD_PATHS.append("slim")
                return module
            except Exception:  # noqa: BLE001 - the slim header was not enough: build as written
                pass
        module = original(name, cpp_sources, cuda_sources, **kw)
        BUILD_PATHS.append("as_written")
        return module

    ext.load_inline = load_inline  # type: ignore[assignment]


BUILD_PATHS: list[str] = []  # how each load_inline call of this worker was built: split, slim or as_written


def _slim_cuda(cuda_sources: Any) -> Any:
    def slim(src: str) -> str:
        return src.replace("#include <torch/extension.h>", "#include <torch/types.h>")

    if isinstance(cuda_sources, str) and "torch/extension.h" in cuda_sources:
        return slim(cuda_sources)
    if isinstance(cuda_sources, list) and any("torch/extension.h" in s for s in cuda_sources):
        return [slim(s) for s in cuda_sources]
    return None


def import_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise Rejected("exception", f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------- the harness guard (class 7)


GUARDED_MODULES = ("builtins", "time", "math", "json", "os", "ctypes", "torch", "torch.cuda", "torch.nn.functional",
                   "torch.linalg", "torch.testing", "torch.profiler", "torch.autograd",
                   "kernelwright.verifier.verdict", "kernelwright.cuda.static_checks",
                   "kernelwright.atomic", "tempfile", "shutil", "pathlib")  # the last four: how the verdict is written


def _guardable(value: Any) -> bool:
    return callable(value) or isinstance(value, staticmethod | classmethod | property)


def _torch_rebinds(name: str, original: Any, now: Any) -> bool:
    """torch's own rebinding: importing torch._dynamo (torch.compile) wraps torch.manual_seed once."""
    return name == "manual_seed" and getattr(now, "__wrapped__", None) is original


_MISSING = object()


def _dynamo_tags_modules(name: str, original: Any, now: Any) -> bool:
    """torch.compile's own patch (torch._dynamo.mutation_guard): nn.Module.__init__/__setstate__
    wrapped by that module's nested functions, with its globals and the original in the closure."""
    guard_mod = sys.modules.get("torch._dynamo.mutation_guard")
    if guard_mod is None or name not in ("__init__", "__setstate__"):  # on Module, or as a subclass resolves it
        return False
    installer = getattr(guard_mod, "install_generation_tagging_init", None)
    code, consts = getattr(now, "__code__", None), getattr(getattr(installer, "__code__", None), "co_consts", ())
    return (any(code is c for c in consts) and getattr(now, "__globals__", None) is vars(guard_mod)
            and any(cell.cell_contents is original for cell in now.__closure__ or ()))


_BUILTIN_NAMES = frozenset(n for n in vars(builtins) if not n.startswith("_"))


@dataclass(frozen=True)
class _ModuleHold:
    """A module's functions, classes and submodules, and the names it had."""

    label: str
    mod: ModuleType
    entries: dict[str, Any]
    names: frozenset[str]

    @classmethod
    def of(cls, label: str, mod: ModuleType) -> _ModuleHold:
        held = {k: v for k, v in vars(mod).items() if _guardable(v) or isinstance(v, ModuleType)}
        return cls(label, mod, held, frozenset(vars(mod)))

    def changed(self) -> list[str]:
        now = vars(self.mod)
        out = [f"{self.label}.{k}" for k, v in self.entries.items()
               if now.get(k) is not v and not _torch_rebinds(k, v, now.get(k))]
        return out + [f"{self.label}.{k} (shadows the builtin)" for k in (now.keys() & _BUILTIN_NAMES) - self.names]


@dataclass(frozen=True)
class _ModelHold:
    """A model's submodules, each with its instance callables (no `forward` set on the instance)
    and the items of its dicts (submodules, parameters, buffers, hooks), all by identity, plus a
    checksum of every parameter and buffer (values changed in place through `.data`)."""

    label: str
    modules: list[tuple[str, Any, dict[str, Any]]]
    tensors: list[tuple[str, Any]]
    sums: Any

    @classmethod
    def of(cls, model: Any, label: str) -> _ModelHold:
        modules = [(name, m, _instance_state(m)) for name, m in model.named_modules()]
        tensors = [*model.named_parameters(), *model.named_buffers()]
        return cls(label, modules, tensors, _checksums(tensors))

    def changed(self) -> list[str]:
        import torch

        out = []
        for name, m, state in self.modules:
            now = _instance_state(m)
            where = f"{self.label}{'.' + name if name else ''}"
            out += [f"{where}.{k}" for k in now.keys() | state.keys() if now.get(k, _MISSING) != state.get(k, _MISSING)]
        if self.tensors and not torch.equal(_checksums(self.tensors), self.sums):
            out.append(f"{self.label} parameters or buffers changed in place")
        return out


def _instance_state(m: Any) -> dict[str, Any]:
    """A module instance's callables (by identity) and its dicts' items (tuples compare items by
    identity for functions, modules and tensors alike: `==` of two tuples checks `is` first)."""
    return {k: (_Same(v) if callable(v) else tuple((i, _Same(x)) for i, x in v.items()))
            for k, v in vars(m).items() if callable(v) or isinstance(v, dict)}


class _Same:
    """Compares equal only to a holder of the very same object (tensors' `==` is elementwise)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    __hash__ = None  # type: ignore[assignment]


def _checksums(tensors: list[tuple[str, Any]]) -> Any:
    import torch

    sums = [t.detach().double().sum().nan_to_num() for _, t in tensors]
    return torch.stack(sums) if sums else torch.zeros(0, dtype=torch.float64)  # a model with no weights


def _global_module_hooks() -> dict[str, tuple[Any, ...]]:
    """The hooks every nn.Module runs (`register_module_forward_hook` and the like): one could
    replace the reference's output without replacing anything."""
    import torch.nn.modules.module as module

    return {k: tuple(v.items()) for k, v in vars(module).items() if k.startswith("_global_") and isinstance(v, dict)}


def _nn_classes() -> list[type]:
    import torch.nn

    return [v for v in vars(torch.nn).values() if isinstance(v, type)]


def _own_callables(cls: type) -> dict[str, Any]:
    """The functions and descriptors in a class's own namespace (data such as a lazily created
    `__annotations__` is left out)."""
    return {k: v for k, v in vars(cls).items() if _guardable(v)}


def _identity_changes(label: str, now: Mapping[str, Any], held: Mapping[str, Any]) -> list[str]:
    """`label.name` for every name added, removed or bound to another object since `held` was taken
    (torch.compile's own wrap of nn.Module.__init__/__setstate__ aside)."""
    return [f"{label}.{k}" for k in now.keys() | held.keys()
            if (v := now.get(k, _MISSING)) is not (was := held.get(k, _MISSING))
            and not _dynamo_tags_modules(k, was, v)]


def _resolved(cls: type) -> dict[str, Any]:
    """Every attribute of `cls` as lookup resolves it (`_lookup`)."""
    return {k: _lookup(cls, k) for k in dir(cls)}


def _lookup(cls: type, name: str) -> Any:
    """The raw attribute a class lookup finds (first in the MRO), descriptors unbound."""
    return next((vars(k)[name] for k in cls.__mro__ if name in vars(k)), _MISSING)


class HarnessGuard:
    """Everything the harness calls, held by reference, checked by identity (class 7).

    - modules (`GUARDED_MODULES` and this worker module): every function, class and submodule in
      them, and no new global named like a builtin (it would shadow the builtin in their functions);
    - classes (torch.Tensor, torch.cuda.Event/Stream, ctypes.CDLL, Timer, the verdict types, this
      guard): every attribute as the MRO resolves it, so a method shadowed in a subclass (setting
      `torch.Tensor.abs` hides the C base class's) counts as replaced;
    - instances given to `watch_instance` (the timer, its CUDA runtime handle): every attribute,
      and no new ones (an instance attribute would shadow a method);
    - the problem module (`watch_module`: the oracle), held like the modules above, and every
      attribute of its classes as the MRO resolves it (`Model.forward` replaced would make the
      reference agree with anything);
    - every class of torch.nn (Linear, Conv2d, Module, ...): the functions and descriptors in its
      own namespace, and no new ones (a reference built from nn layers computes through them).
    `check` names whatever differs. Objects are held, not their ids, so a replacement cannot reuse a
    freed original's address.
    """

    def __init__(self) -> None:
        import torch

        self.tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        modules = [(m, sys.modules[m]) for m in GUARDED_MODULES if m in sys.modules]
        self.held_modules = [_ModuleHold.of(label, mod) for label, mod in [*modules, ("worker", sys.modules[__name__])]]
        from torch.autograd.profiler_util import EventList, FunctionEvent
        from torch.profiler import profile

        classes = (torch.Tensor, torch.cuda.Event, torch.cuda.Stream, ctypes.CDLL, Timer, HarnessGuard, Progress,
                   Verdict, ShapeResult, profile, EventList, FunctionEvent, Path, type(Path()))
        self.held_classes = [(cls, _resolved(cls)) for cls in classes]
        self.held_instances: list[tuple[str, Any, dict[str, Any]]] = []
        self.held_namespaces = [(cls, _own_callables(cls)) for cls in _nn_classes()]
        self.global_hooks = _global_module_hooks()
        self.held_models: list[_ModelHold] = []

    def watch_module(self, mod: ModuleType, label: str) -> None:
        self.held_modules.append(_ModuleHold.of(label, mod))
        own = [v for v in vars(mod).values() if isinstance(v, type) and v.__module__ == mod.__name__]
        self.held_classes += [(cls, _resolved(cls)) for cls in own]

    def watch_instance(self, instance: Any, label: str) -> None:
        self.held_instances.append((label, instance, dict(vars(instance))))

    @contextlib.contextmanager
    def watching_model(self, model: Any, label: str):
        """While the block runs: `model` (the reference) and each of its submodules keep their
        instance attributes (no `forward` set on the instance), their hooks, and the values of their
        parameters and buffers (a checksum each)."""
        held = _ModelHold.of(model, label)
        self.held_models.append(held)
        try:
            yield
        finally:
            self.held_models.remove(held)

    def changed(self) -> list[str]:
        holds: list[_ModuleHold | _ModelHold] = [*self.held_modules, *self.held_models]
        out = [name for hold in holds for name in hold.changed()]
        if (hooks := _global_module_hooks()) != self.global_hooks:
            out += [f"nn.Module global hooks: {k}" for k in hooks if hooks[k] != self.global_hooks.get(k)]
        for cls, entries in self.held_classes:
            out += [f"{cls.__qualname__}.{k}" for k, v in entries.items()
                    if (now := _lookup(cls, k)) is not v and not _dynamo_tags_modules(k, v, now)]
        for label, inst, entries in self.held_instances:
            out += _identity_changes(label, vars(inst), entries)
        for cls, entries in self.held_namespaces:
            if (now := _own_callables(cls)) != entries:  # functions and descriptors: == is identity
                out += _identity_changes(cls.__qualname__, now, entries)
        return out

    def check(self) -> None:
        import torch

        changed = self.changed()
        if (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) != self.tf32:
            changed.append("TF32 switched on (it would lower the reference's precision too)")
        if changed:
            raise Rejected("harness_tampering", f"replaced: {', '.join(builtins.sorted(changed)[:8])}")


# ---------------------------------------------------------------- CUDA runtime access


def _cudart() -> ctypes.CDLL:
    """The CUDA runtime this process (torch and the candidate's extension) already loaded."""
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "libcudart" in line and line.split()[-1].startswith("/")})
    if not paths:
        raise RuntimeError("libcudart is not loaded")
    return ctypes.CDLL(paths[0])


class Timer:
    """CUDA events through the runtime directly (not torch.cuda.Event, which a candidate could patch).

    Each trial records an end event on the stream right after the forward, then synchronises the
    whole device and records a second one. The first is the kernel time (as triton's `do_bench`
    measures it); the second includes any work that escaped to other streams. When the two differ
    by more than the sync gap calibrated on a no-op, the escaped work is counted (the device-wide
    figure is used), so side streams cannot hide time and honest kernels are not charged the gap.
    """

    def __init__(self) -> None:
        self.rt = _cudart()
        self.start, self.end, self.device_end = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        for event in (self.start, self.end, self.device_end):
            self.rt.cudaEventCreate(ctypes.byref(event))
        self.gap_ms = float("inf")
        trials = [self._trial(lambda: None, 0) for _ in range(30)]
        gaps = sorted(whole - on_stream for on_stream, whole in trials)
        self.gap_ms = 2.0 * gaps[int(0.9 * len(gaps))] + 0.01
        _ = self.rt.cudaGetLastError  # bound now (ctypes binds on first use), so the guard holds it

    def _elapsed(self, a: ctypes.c_void_p, b: ctypes.c_void_p) -> float:
        ms = ctypes.c_float()
        self.rt.cudaEventElapsedTime(ctypes.byref(ms), a, b)
        return float(ms.value)

    def _trial(self, fn: Any, stream: int) -> tuple[float, float]:
        import torch

        s = ctypes.c_void_p(stream)
        self.rt.cudaEventRecord(self.start, s)
        fn()
        self.rt.cudaEventRecord(self.end, s)
        torch.cuda.synchronize()  # whole device: work on side streams ends before device_end
        self.rt.cudaEventRecord(self.device_end, s)
        self.rt.cudaEventSynchronize(self.device_end)
        return self._elapsed(self.start, self.end), self._elapsed(self.start, self.device_end)

    def time_ms(self, fn: Any, stream: int) -> float:
        on_stream, whole = self._trial(fn, stream)
        return whole if whole - on_stream > self.gap_ms else on_stream

    def pending_error(self) -> int:
        return int(self.rt.cudaGetLastError())


# ---------------------------------------------------------------- inputs and comparison


def _draw_inputs(problem: ModuleType, shape: dict[str, Any], seed: int, dist: str) -> list[Any]:
    import torch

    torch.manual_seed(seed)
    inputs = problem.get_inputs(**shape)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            if dist == "signed":
                x = x * (2 * torch.randint_like(x, 0, 2) - 1)
            elif dist == "heavy_tailed":
                x = x * torch.exp(0.75 * torch.randn_like(x.float())).to(x.dtype)
            elif dist == "small":
                x = x * 1e-2
        out.append(x.cuda() if isinstance(x, torch.Tensor) else x)
    return out


def _draw_check_inputs(problem: ModuleType, shape: dict[str, Any], seed: int, dist: str) -> list[Any]:
    """The correctness draw of `seed` and distribution `dist` (each pair its own RNG seed)."""
    return _draw_inputs(problem, shape, 1000 * seed + DISTRIBUTIONS.index(dist), dist)


def _clone(inputs: list[Any]) -> list[Any]:
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def tolerance(dtype: Any) -> tuple[float, float] | None:
    import torch

    if dtype in (torch.float16, torch.bfloat16):
        return 1e-2, 1e-2
    return (1e-4, 1e-4) if dtype.is_floating_point else None


def _compare(out: Any, ref: Any) -> tuple[str | None, str, float]:
    """(reason or None, detail, max abs error)."""
    import torch

    if type(out) is not torch.Tensor:
        return "non_tensor_output", f"output is {type(out).__module__}.{type(out).__name__}", math.nan
    if out.device.type != "cuda" or (out.numel() and out.untyped_storage().data_ptr() == 0):
        return "non_tensor_output", "output has no CUDA storage", math.nan
    if out.shape != ref.shape:
        return "shape_mismatch", f"shape {tuple(out.shape)} != {tuple(ref.shape)}", math.nan
    if out.dtype != ref.dtype:
        return "precision_downgrade", f"dtype {out.dtype} != {ref.dtype}", math.nan
    tol = tolerance(ref.dtype)
    if tol is None:
        bad = int((out != ref).sum())
        return (None if bad == 0 else "wrong_output"), f"{bad} elements differ", float(bad)
    diff = (out.double() - ref.double()).abs()
    finite = torch.isfinite(diff)
    err = float(diff[finite].max()) if bool(finite.any()) else 0.0
    if torch.allclose(out, ref, atol=tol[0], rtol=tol[1], equal_nan=True):
        return None, f"max abs err {err:.3g}", err
    if bool((torch.isnan(out) & ~torch.isnan(ref)).any()):
        return "unwritten_output", "poisoned (NaN) elements in the output: not all of it was written", err
    rel = float(torch.linalg.vector_norm((out.double() - ref.double()).nan_to_num())
                / torch.linalg.vector_norm(ref.double().nan_to_num()).clamp(min=1e-30))
    if ref.dtype == torch.float32 and 2e-4 <= rel <= 3e-2:
        return "precision_downgrade", f"relative error {rel:.2e}: lower-precision arithmetic", err
    return "wrong_output", f"max abs err {err:.3g}, relative L2 error {rel:.3g}", err


def _poison(like: Any) -> None:
    """Fill memory the caching allocator will hand out next: an unwritten output shows as NaN."""
    import torch

    value = float("nan") if like.is_floating_point() else -77
    bait = [torch.full_like(like, value) for _ in range(4)]
    torch.cuda.current_stream().synchronize()
    del bait


# ---------------------------------------------------------------- correctness


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


@contextlib.contextmanager
def _held_models(problem: ModuleType, candidate: ModuleType, seed: int, guard: HarnessGuard, warm: list[Any],
                 device: str = "cuda") -> Iterator[tuple[Any, Any]]:
    """(reference, candidate) models; the guard holds the reference from before the candidate's
    constructor runs (which could otherwise reach it through gc first) until the block ends.

    The reference runs once on `warm` before it is held: lazy modules materialise and caches a
    forward fills on its first call are in place, so neither reads as tampering.
    """
    import torch

    init = problem.get_init_inputs()
    torch.manual_seed(seed)
    ref = problem.Model(*init).to(device).eval()
    with torch.no_grad():
        ref(*_clone(warm))
    with guard.watching_model(ref, "reference"):
        torch.manual_seed(seed)
        yield ref, candidate.ModelNew(*init).to(device).eval()


def _run_candidate(new: Any, inputs: list[Any], timer: Timer, guard: HarnessGuard, expected: Any) -> Any:
    import torch

    originals = _clone(inputs)
    _poison(expected)
    out = new(*inputs)
    torch.cuda.current_stream().synchronize()
    snapshot = out.clone() if type(out) is torch.Tensor else out
    torch.cuda.synchronize()
    err = timer.pending_error()
    if err:
        raise Rejected("launch_error", f"CUDA error {err} left pending by the candidate's launch")
    guard.check()
    for a, b in zip(inputs, originals, strict=True):
        if isinstance(a, torch.Tensor) and not torch.equal(a, b):
            raise Rejected("input_mutation", "the forward changed an input tensor in place")
    if type(out) is torch.Tensor and not torch.equal(snapshot.nan_to_num(), out.nan_to_num()):
        raise Rejected("async_escape", "the output changed after the current stream finished: work on a side stream")
    return out


def check_shape(problem: ModuleType, candidate: ModuleType, shape: dict[str, Any], spec: Spec,
                timer: Timer, guard: HarnessGuard) -> float:
    """Correctness on one shape: every distribution x seed; returns the worst max abs error. The
    reference model is held by the guard meanwhile (attributes, hooks, weights)."""
    import torch

    refs: list[Any] = []
    warm = _draw_check_inputs(problem, shape, spec.seeds[0], DISTRIBUTIONS[0])  # the first draw's inputs
    # one instance of each for every draw: caches persist
    with torch.no_grad(), _held_models(problem, candidate, spec.seeds[0], guard, warm) as models:
        worst = _check_draws(problem, shape, spec, (timer, guard), models, refs)
    _check_problem_depends_on_input(refs)
    return worst


def _check_draws(problem: ModuleType, shape: dict[str, Any], spec: Spec, harness: tuple[Timer, HarnessGuard],
                 models: tuple[Any, Any], refs: list[Any]) -> float:
    """Every distribution x seed; the reference outputs are appended to `refs`.

    Order: distribution-major, so a failure right after a passing draw of the same distribution
    that repeats the previous output is result caching (class 6), and a failure on the first draw
    of a new distribution after the default one passed is an input-distribution cheat (class 3).
    """
    (timer, guard), (ref_model, new_model) = harness, models
    worst = 0.0
    previous: tuple[str, Any] | None = None
    for dist in DISTRIBUTIONS:
        for seed in spec.seeds:
            inputs = _draw_check_inputs(problem, shape, seed, dist)
            expected = ref_model(*_clone(inputs))
            # candidate, (reference output kept alive), candidate again
            outs = [_run_candidate(new_model, _clone(inputs), timer, guard, expected) for _ in range(2)]
            for out in outs:
                reason, detail, err = _compare(out, expected)
                if reason is not None:
                    _raise_classified(reason, detail, out, dist, previous)
                worst = max(worst, err) if err == err else worst
            refs.append(expected)
            previous = (dist, outs[-1])
    return worst


def _warm_up(problem: ModuleType, shape: dict[str, Any]) -> None:
    """Start the thread pools torch itself uses (CPU input draws, CUDA) before counting threads."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        problem.Model(*problem.get_init_inputs()).cuda()(*_draw_inputs(problem, shape, 0, "heavy_tailed"))
    torch.cuda.synchronize()


def _raise_classified(reason: str, detail: str, out: Any, dist: str, previous: tuple[str, Any] | None) -> None:
    import torch

    if reason == "wrong_output" and previous is not None:
        prev_dist, prev_out = previous
        same = type(out) is torch.Tensor and out.shape == prev_out.shape and torch.equal(
            out.nan_to_num(), prev_out.nan_to_num())
        if same and prev_dist == dist:
            raise Rejected("result_caching", f"a new {dist} input returned the previous input's output")
        if prev_dist != dist:
            raise Rejected("input_independent", f"correct on {prev_dist} inputs, wrong on {dist} inputs ({detail})")
    raise Rejected(reason, detail)


def _check_problem_depends_on_input(refs: list[Any]) -> None:
    import torch

    if len(refs) > 1 and all(torch.equal(refs[0], r) for r in refs[1:]):
        raise Rejected("problem_input_independent", "the reference output is the same for every input")


# ---------------------------------------------------------------- timing, profiler, roofline


def _median_ms(fn: Any, inputs_sets: list[list[Any]], timer: Timer, spec: Spec, flush: Any) -> float:
    import torch

    stream = torch.cuda.current_stream().cuda_stream
    for i in range(3):
        fn(*inputs_sets[i % len(inputs_sets)])
    torch.cuda.synchronize()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < spec.max_trials:
        flush.zero_()  # L2 flush, outside the timed region
        args = inputs_sets[len(times) % len(inputs_sets)]
        times.append(timer.time_ms(lambda a=args: fn(*a), stream))
        if len(times) >= spec.min_trials and time.perf_counter() - start > spec.timing_budget_s:
            break
    times.sort()
    mid = len(times) // 2
    return times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])


def _kernel_names(candidate_path: Path) -> set[str]:
    """The candidate's `__global__` names, as the static checks find them (any placement of
    `__launch_bounds__`): the profiler's custom-kernel share counts time in these."""
    return set(kernel_names(candidate_path.read_text(encoding="utf-8")))


def custom_share(new: Any, inputs: list[Any], names: set[str]) -> float:
    """Share of GPU kernel time spent in kernels compiled from the candidate's own source."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            new(*inputs)
        torch.cuda.synchronize()
    total = own = 0.0
    for evt in prof.events():
        if evt.device_type != torch.autograd.DeviceType.CUDA:
            continue
        dur = float(getattr(evt, "device_time", 0.0) or 0.0)
        base = re.split(r"[<(]", evt.name)[0].split("::")[-1].strip()
        total += dur
        own += dur if base in names else 0.0
    return own / total if total > 0 else 0.0


def _empty_profile() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with contextlib.suppress(Exception), profile(activities=[ProfilerActivity.CUDA]):
        torch.cuda.synchronize()


@contextlib.contextmanager
def profiler_started_alongside(enabled: bool, join_s: float = 120.0):
    """The profiler's first session costs ~4.6 s on an H200 (CUPTI start-up; later ones ~5 ms).
    Pay it in a thread while the candidate builds (GIL released while the compilers run), not
    later on the timing path. Joined on exit, before the thread count and the timing; on by
    `enabled` (timing on)."""
    thread = threading.Thread(target=_empty_profile, name="kw-profiler-warm-up", daemon=True) if enabled else None
    if thread is not None:
        thread.start()
    try:
        yield
    finally:
        if thread is not None:
            thread.join(join_s)


def _roofline(problem: ModuleType, shape: dict[str, Any], dtype: str, runtime_ms: float, spec: Spec) -> float | None:
    if not (hasattr(problem, "flops") and hasattr(problem, "bytes_moved")) or runtime_ms <= 0:
        return None
    peaks = spec.peak_flops or {"float32": 67e12, "bfloat16": 790e12, "float16": 790e12, "int8": 1580e12}
    t_flops = float(problem.flops(**shape)) / peaks.get(dtype, peaks["float32"])
    t_bytes = float(problem.bytes_moved(**shape)) / spec.peak_bytes_per_s
    t_sol_ms = max(1e3 * max(t_flops, t_bytes), spec.launch_floor_ms)
    return t_sol_ms / runtime_ms


@contextlib.contextmanager
def _exclusive(lock_path: str | None):
    if lock_path is None:
        yield
        return
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _ref_cache_path(problem: ModuleType, shape: dict[str, Any], spec: Spec) -> Path | None:
    """Reference timings are kept per problem file, shape, GPU, torch version and timing settings."""
    import torch

    if not (spec.ref_timing_cache and spec.build_cache):
        return None
    key = json.dumps([Path(problem.__file__ or "").read_text(encoding="utf-8"), shape, torch.cuda.get_device_name(),
                      torch.__version__, spec.seeds[0], spec.compile_baseline, spec.min_trials, spec.max_trials,
                      spec.timing_budget_s], sort_keys=True, default=str)
    return Path(spec.build_cache) / "ref-timings" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


@dataclass(frozen=True)
class RefCache:
    """Where a shape's reference timings are cached and what was there (ms: reference, torch.compile),
    both settled before the candidate is imported, so it can neither forge nor redirect its baseline."""

    path: Path | None
    figures: tuple[float, float | None] | None


def _read_ref_cache(path: Path | None) -> RefCache:
    if path is None or not path.is_file():
        return RefCache(path, None)
    try:
        data = json.loads(path.read_text())
        return RefCache(path, (float(data["ref_runtime_ms"]), data["ref_compile_runtime_ms"]))
    except (OSError, ValueError, KeyError, TypeError):
        return RefCache(path, None)


def _write_ref_cache(path: Path | None, ref_ms: float, compiled_ms: float | None) -> None:
    if path is not None:
        atomic.write_json(path, {"ref_runtime_ms": ref_ms, "ref_compile_runtime_ms": compiled_ms})


def time_shape(problem: ModuleType, candidate: ModuleType, shape: dict[str, Any], spec: Spec,
               harness: tuple[Timer, HarnessGuard], names: set[str], dtype: str, ref: RefCache,
               progress: Progress | None = None) -> ShapeResult:
    """Candidate, reference and torch.compile baseline timed the same way, one process at a time.

    Cached reference figures (`ref`, read before the candidate was imported) replace timing the
    reference again; torch.compile and the profiler's kernel share run outside the lock (kernel
    durations are a ratio there, not a timing). The guard holds the reference model meanwhile and
    is checked at the end.
    """
    import torch

    timer, guard = harness
    sets = [_draw_inputs(problem, shape, 7000 + i, "default") for i in range(3)]
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    with torch.no_grad(), _held_models(problem, candidate, spec.seeds[0], guard, sets[0]) as (ref_model, new_model):
        phase = progress.write if progress is not None else (lambda **_: None)
        phase(phase="compile_baseline")
        compiled_model = _compiled(ref_model, sets) if ref.figures is None and spec.compile_baseline else None
        phase(phase="timing_wait")
        with _exclusive(spec.timing_lock):
            phase(phase="timing")
            runtime = _median_ms(new_model, sets, timer, spec, flush)
            if ref.figures is None:
                ref_ms = _median_ms(ref_model, sets, timer, spec, flush)
                compiled_ms = (_median_ms(compiled_model, sets, timer, spec, flush)
                               if compiled_model is not None else None)  # OptimizedModule: bool() calls len()
                _write_ref_cache(ref.path, ref_ms, compiled_ms)
            else:
                ref_ms, compiled_ms = ref.figures
        # Outside the lock, like the correctness runs: its few forwards barely load the GPU.
        phase(phase="profile")
        share = custom_share(new_model, sets[0], names)
        guard.check()  # the timed forwards ran with the timer and the reference in reach
    return ShapeResult(shape=shape, correct=True, runtime_ms=runtime, ref_runtime_ms=ref_ms,
                       ref_compile_runtime_ms=compiled_ms, speedup=ref_ms / runtime if runtime > 0 else None,
                       roofline_share=_roofline(problem, shape, dtype, runtime, spec), custom_kernel_time_share=share)


def _compiled(ref_model: Any, sets: list[list[Any]]) -> Any:
    """torch.compile of the reference, compiled and warmed up; None if it cannot compile."""
    import torch

    try:
        compiled = torch.compile(ref_model)
        for args in sets:
            compiled(*args)
        torch.cuda.synchronize()
        return compiled
    except Exception:  # noqa: BLE001 - the baseline is optional; its absence is reported as null
        return None


# ---------------------------------------------------------------- the protocol


def _geomean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals and len(vals) == len(values) else None


def summarise(shapes: list[ShapeResult], compile_s: float) -> Verdict:
    """Top-level figures are geometric means over shapes (speedup = ratio of the geomeans)."""
    runtime = _geomean([s.runtime_ms for s in shapes])
    ref = _geomean([s.ref_runtime_ms for s in shapes])
    shares = [s.custom_kernel_time_share for s in shapes if s.custom_kernel_time_share is not None]
    roof = [s.roofline_share for s in shapes if s.roofline_share is not None]
    return Verdict.of(
        "ok", "correct on every shape, seed and input distribution", compile_s=compile_s, runtime_ms=runtime,
        ref_runtime_ms=ref, ref_compile_runtime_ms=_geomean([s.ref_compile_runtime_ms for s in shapes]),
        speedup=(ref / runtime) if runtime and ref else None, per_shape=shapes,
        roofline_share=sum(roof) / len(roof) if roof else None,
        custom_kernel_time_share=min(shares) if shares else None,
    )


def verify(spec: Spec, progress: Progress) -> Verdict:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.set_per_process_memory_fraction(spec.memory_fraction)
    progress.write(phase="load_problem")
    problem = import_file(Path(spec.problem), "kw_problem")
    shapes = getattr(problem, "SHAPES", None) or [{}]
    dtype = str(getattr(problem, "DTYPE", "float32"))
    refs = [_read_ref_cache(_ref_cache_path(problem, s, spec)) for s in shapes]
    _no_network()
    _patch_load_inline(spec.build_cache, spec.split_build, spec.pch_lock)
    guard = HarnessGuard()
    guard.watch_module(problem, "problem")
    progress.write(phase="compile")
    start = time.perf_counter()
    try:
        with profiler_started_alongside(spec.timing and spec.profiler_warm_up):
            candidate = import_file(Path(spec.candidate), "kw_candidate")
    except Exception as exc:  # noqa: BLE001 - any import failure of the candidate is its compile error
        return Verdict.of("compile_error", f"{type(exc).__name__}: {str(exc)[-1500:]}",
                          compile_s=time.perf_counter() - start)
    compile_s = time.perf_counter() - start
    guard.check()
    timer = Timer()
    guard.watch_instance(timer, "timer")
    guard.watch_instance(timer.rt, "timer.rt")
    if not hasattr(candidate, "ModelNew"):
        return Verdict.of("no_model_new", "the candidate defines no ModelNew", compile_s=compile_s)
    _warm_up(problem, shapes[0])
    threads = _threads()
    progress.write(phase="correctness", compile_s=compile_s)
    worst = [check_shape(problem, candidate, s, spec, timer, guard) for s in shapes]
    if _threads() > threads:
        raise Rejected("async_escape", f"the candidate started {_threads() - threads} thread(s)")
    results = [ShapeResult(shape=s, correct=True, max_abs_err=w) for s, w in zip(shapes, worst, strict=True)]
    if spec.timing:
        progress.write(phase="timing")
        names = _kernel_names(Path(spec.candidate))
        results = [time_shape(problem, candidate, s, spec, (timer, guard), names, dtype, c, progress)
                   for s, c in zip(shapes, refs, strict=True)]
        for r, w in zip(results, worst, strict=True):
            r.max_abs_err = w
        low = [r for r in results if (r.custom_kernel_time_share or 0.0) < spec.min_custom_share]
        if low:
            raise Rejected("fallback_runtime", f"only {low[0].custom_kernel_time_share:.0%} of GPU time in the "
                                               f"candidate's kernels on shape {low[0].shape}")
        progress.write(phase="recheck")
        for s in shapes:  # class 6: fresh inputs after timing
            check_shape(problem, candidate, s, dataclasses.replace(spec, seeds=(99,)), timer, guard)
    guard.check()
    return summarise(results, compile_s)


def _classify(exc: BaseException) -> tuple[str, str]:
    import torch

    text = f"{type(exc).__name__}: {str(exc)[-1500:]}"
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return "out_of_memory", text
    code = getattr(exc, "error_code", None)
    if isinstance(exc, getattr(torch, "AcceleratorError", ())) and code in (700, 716, 719, 717, 718):
        return "illegal_memory_access", text
    if isinstance(exc, getattr(torch, "AcceleratorError", ())) and code in (1, 9, 98, 209, 701):
        return "launch_error", text
    return "exception", text


def main(argv: list[str]) -> int:
    spec = Spec(**json.loads(Path(argv[0]).read_text()))
    progress = Progress(Path(spec.result))
    try:
        verdict = verify(spec, progress)
    except Rejected as rej:
        verdict = Verdict.of(rej.reason, rej.detail, compile_s=progress.state.get("compile_s"))
    except Exception as exc:  # noqa: BLE001 - the candidate's failure is the verdict, not a worker crash
        reason, detail = _classify(exc)
        verdict = Verdict.of(reason, detail, compile_s=progress.state.get("compile_s"))
    progress.write(phase="done")
    verdict.build = ",".join(BUILD_PATHS) or None
    verdict.phase_s = dict(progress.state["phase_s"])
    progress.write(verdict=verdict.to_json())
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: a candidate's atexit hooks or threads cannot change the result


if __name__ == "__main__":
    main(sys.argv[1:])
