"""The harness guard (class 7): everything the harness calls, held by reference, checked by identity.

- `HarnessGuard`: holds the modules the harness calls (`GUARDED_MODULES`) and its own
  (`HARNESS_MODULES`: the runner and the modules it uses), the classes it times and reports
  the verdict with, the timer and its CUDA runtime handle, the problem module, every torch.nn class
  and the hooks every nn.Module runs; `check` rejects the candidate (harness_tampering) when any of
  them changed;
- `_ModuleHold` / `_ModelHold`: what is held of one module, and of the reference model while it runs;
- `held_models`: the reference and the candidate's models, the reference held from before the
  candidate's constructor runs; `held_check_models`: the same with the reference's float64 twin,
  held likewise (the correctness draws' truth, tolerance.py).

The verdict, the expected outputs and the comparison live in the judge's process (judge.py), out
of the candidate's reach; the guard keeps the runner's own harness honest (a timer that reads
zero, a poison that does nothing, an output written after the check), so that what the runner
reports is what happened. Its reports are still checked by the judge.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import sys
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelwright.verifier.inputs import clone
from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.spec import Progress
from kernelwright.verifier.timer import Timer
from kernelwright.verifier.tolerance import Judgement, fp64_twin
from kernelwright.verifier.verdict import ShapeResult, Verdict

# ---------------------------------------------------------------- what is held


GUARDED_MODULES = ("builtins", "time", "math", "json", "os", "ctypes", "torch", "torch.cuda", "torch.nn.functional",
                   "torch.linalg", "torch.testing", "torch.profiler", "torch.autograd",
                   "kernelwright.verifier.verdict", "kernelwright.cuda.static_checks",
                   "kernelwright.atomic", "tempfile", "shutil", "pathlib")  # the last four: how the verdict is written
HARNESS_MODULES = ("kernelwright.verifier.runner", "kernelwright.verifier.channel", "kernelwright.verifier.spec",
                   "kernelwright.verifier.isolation", "kernelwright.verifier.inputs", "kernelwright.verifier.guard",
                   "kernelwright.verifier.timer", "kernelwright.verifier.timing", "kernelwright.verifier.profiling",
                   "kernelwright.verifier.tolerance", "kernelwright.verifier.sandbox")


def _harness_modules() -> list[tuple[str, ModuleType]]:
    """The harness's own modules that are loaded, each labelled by its last name (`runner`, ...).

    Where one of them runs as `__main__` (`python -m`; its spec keeps the dotted name) it is held
    under that name: it is not imported a second time under its own.
    """
    main = sys.modules.get("__main__")
    running = getattr(getattr(main, "__spec__", None), "name", None)
    found = [(name, main if name == running else sys.modules.get(name)) for name in HARNESS_MODULES]
    return [(name.rsplit(".", 1)[-1], mod) for name, mod in found if mod is not None]


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


def _code_of(value: Any) -> tuple[Any, ...]:
    """What a held function runs: its code object and defaults (those of a staticmethod's or
    classmethod's function, of a property's accessors), so that swapping `__code__` in place,
    which keeps the function object and fools an identity check, is seen too. () for others."""
    if isinstance(value, staticmethod | classmethod):
        return _code_of(value.__func__)
    if isinstance(value, property):
        return tuple(part for f in (value.fget, value.fset, value.fdel) for part in _code_of(f))
    code = getattr(value, "__code__", None)
    if not isinstance(code, types.CodeType):
        return ()
    return (code, getattr(value, "__defaults__", None), getattr(value, "__kwdefaults__", None))


def _same_code(held: tuple[Any, ...], value: Any) -> bool:
    now = _code_of(value)
    return len(now) == len(held) and all(a is b for a, b in zip(now, held, strict=True))


@dataclass(frozen=True)
class _ModuleHold:
    """A module's functions, classes and submodules, and the names it had."""

    label: str
    mod: ModuleType
    entries: dict[str, Any]
    names: frozenset[str]
    codes: dict[str, tuple[Any, ...]]

    @classmethod
    def of(cls, label: str, mod: ModuleType) -> _ModuleHold:
        held = {k: v for k, v in vars(mod).items() if _guardable(v) or isinstance(v, ModuleType)}
        return cls(label, mod, held, frozenset(vars(mod)), {k: c for k, v in held.items() if (c := _code_of(v))})

    def changed(self) -> list[str]:
        now = vars(self.mod)
        out = [f"{self.label}.{k}" for k, v in self.entries.items()
               if now.get(k) is not v and not _torch_rebinds(k, v, now.get(k))]
        out += [f"{self.label}.{k} (code replaced)" for k, c in self.codes.items()
                if now.get(k) is self.entries[k] and not _same_code(c, self.entries[k])]
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


# ---------------------------------------------------------------- the guard


class HarnessGuard:
    """Everything the harness calls, held by reference, checked by identity (class 7).

    - modules (`GUARDED_MODULES` and the harness's own, `HARNESS_MODULES`): every function, class
      and submodule in them, and no new global named like a builtin (it would shadow the builtin in
      their functions);
    - classes (torch.Tensor, torch.cuda.Event/Stream, ctypes.CDLL, Timer, the verdict types, the
      worker's Progress, this guard): every attribute as the MRO resolves it, so a method shadowed
      in a subclass (setting `torch.Tensor.abs` hides the C base class's) counts as replaced;
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
        harness = _harness_modules()
        self.held_modules = [_ModuleHold.of(label, mod) for label, mod in [*modules, *harness]]
        from torch.autograd.profiler_util import EventList, FunctionEvent
        from torch.profiler import profile

        # Progress writes the verdict
        classes = (torch.Tensor, torch.cuda.Event, torch.cuda.Stream, ctypes.CDLL, Timer, HarnessGuard, Progress,
                   Verdict, ShapeResult, Judgement, profile, EventList, FunctionEvent, Path, type(Path()),
                   _ModuleHold, _ModelHold, _Same)  # the holds themselves: `changed` returning [] would hide all
        self.held_classes = [(cls, _resolved(cls)) for cls in classes]
        self.held_codes: list[tuple[str, Any, tuple[Any, ...]]] = []
        self._hold_codes(self.held_classes)
        self.held_instances: list[tuple[str, Any, dict[str, Any]]] = []
        self.held_namespaces = [(cls, _own_callables(cls)) for cls in _nn_classes()]
        self._hold_codes(self.held_namespaces)
        self.global_hooks = _global_module_hooks()
        self.held_models: list[_ModelHold] = []

    def _hold_codes(self, classes: list[tuple[type, dict[str, Any]]]) -> None:
        """The code of every function held in `classes` (a `__code__` swapped in place)."""
        self.held_codes += [(f"{cls.__qualname__}.{k}", v, c) for cls, entries in classes
                            for k, v in entries.items() if (c := _code_of(v))]

    def watch_module(self, mod: ModuleType, label: str) -> None:
        self.held_modules.append(_ModuleHold.of(label, mod))
        own = [(cls, _resolved(cls)) for cls in vars(mod).values()
               if isinstance(cls, type) and cls.__module__ == mod.__name__]
        self.held_classes += own
        self._hold_codes(own)

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
        out += [f"{label} (code replaced)" for label, v, c in self.held_codes if not _same_code(c, v)]
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


# ---------------------------------------------------------------- the models, the reference held


@contextlib.contextmanager
def held_models(problem: ModuleType, candidate: ModuleType, seed: int, guard: HarnessGuard, warm: list[Any],
                device: str = "cuda") -> Iterator[tuple[Any, Any]]:
    """(reference, candidate) models; the guard holds the reference from before the candidate's
    constructor runs (which could otherwise reach it through gc first) until the block ends.

    The reference runs once on `warm` before it is held: lazy modules materialise and caches a
    forward fills on its first call are in place, so neither reads as tampering.
    """
    with _held(problem, candidate, seed, guard, warm, device, fp64=False) as (ref, _, new):
        yield ref, new


@contextlib.contextmanager
def held_check_models(problem: ModuleType, candidate: ModuleType, seed: int, guard: HarnessGuard,
                      warm: list[Any], device: str = "cuda") -> Iterator[tuple[Any, Any | None, Any]]:
    """(reference, its float64 twin or None, candidate): as `held_models`, and the twin
    (tolerance.fp64_twin: the reference's state in float64, run once on `warm`) is built after the
    reference's warm-up and held the same way, from before the candidate's constructor runs."""
    with _held(problem, candidate, seed, guard, warm, device, fp64=True) as models:
        yield models


@contextlib.contextmanager
def _held(problem: ModuleType, candidate: ModuleType, seed: int, guard: HarnessGuard, warm: list[Any],
          device: str, fp64: bool) -> Iterator[tuple[Any, Any | None, Any]]:
    import torch

    init = problem.get_init_inputs()
    torch.manual_seed(seed)
    ref = problem.Model(*init).to(device).eval()
    with torch.no_grad():
        ref(*clone(warm))
    twin = fp64_twin(problem, init, ref, seed, warm, device) if fp64 else None
    with guard.watching_model(ref, "reference"), _watching(guard, twin, "reference64"):
        torch.manual_seed(seed)
        yield ref, twin, candidate.ModelNew(*init).to(device).eval()


def _watching(guard: HarnessGuard, model: Any | None, label: str) -> contextlib.AbstractContextManager[None]:
    return guard.watching_model(model, label) if model is not None else contextlib.nullcontext()
