"""The harness guard (class 7): everything the harness calls, held by reference, checked by identity.

- `HarnessGuard`: holds the modules the harness calls (`GUARDED_MODULES`) and its own
  (`HARNESS_MODULES`: the runner and the modules it uses), the classes it times and reports
  the verdict with, the timer and its CUDA runtime handle, the problem module, every torch.nn class
  and the hooks every nn.Module runs; `check` rejects the candidate (harness_tampering) when any of
  them changed;
- `_ModuleHold`: what is held of one module.

The verdict, the expected outputs and the comparison live in the judge's process (judge.py), out
of the candidate's reach; the guard keeps the runner's own harness honest (a timer that reads
zero, a poison that does nothing, an output written after the check), so that what the runner
reports is what happened. Its reports are still checked by the judge.
"""

from __future__ import annotations

import builtins
import ctypes
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.spec import Progress
from kernelwright.verifier.timer import Timer
from kernelwright.verifier.tolerance import Judgement
from kernelwright.verifier.verdict import ShapeResult, Verdict

# ---------------------------------------------------------------- what is held


GUARDED_MODULES = ("builtins", "time", "math", "json", "os", "ctypes", "torch", "torch.cuda", "torch.nn.functional",
                   "torch.linalg", "torch.testing", "torch.profiler", "torch.autograd", "torch.autograd.profiler",
                   "kernelwright.verifier.verdict", "kernelwright.cuda.static_checks",
                   "kernelwright.atomic", "tempfile", "shutil", "pathlib")  # the last four: how the verdict is written
HARNESS_MODULES = ("kernelwright.verifier.runner", "kernelwright.verifier.channel", "kernelwright.verifier.spec",
                   "kernelwright.verifier.isolation", "kernelwright.verifier.inputs", "kernelwright.verifier.guard",
                   "kernelwright.verifier.timer", "kernelwright.verifier.timing", "kernelwright.verifier.profiling",
                   "kernelwright.verifier.tolerance", "kernelwright.verifier.error_shape",
                   "kernelwright.verifier.sandbox", "kernelwright.verifier.seccomp", "kernelwright.verifier.runner_uid",
                   "kernelwright.verifier.build_failure", "kernelwright.verifier.gpu_wait",
                   "kernelwright.verifier.seeding", "kernelwright.verifier.cpu_profile")


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
        from torch.autograd.profiler import profile
        from torch.autograd.profiler_util import EventList, FunctionEvent

        # Progress writes the verdict
        classes = (torch.Tensor, torch.cuda.Event, torch.cuda.Stream, ctypes.CDLL, Timer, HarnessGuard, Progress,
                   Verdict, ShapeResult, Judgement, profile, EventList, FunctionEvent, Path, type(Path()),
                   _ModuleHold)  # the holds themselves: `changed` returning [] would hide all
        self.held_classes = [(cls, _resolved(cls)) for cls in classes]
        self.held_codes: list[tuple[str, Any, tuple[Any, ...]]] = []
        self._hold_codes(self.held_classes)
        self.held_instances: list[tuple[str, Any, dict[str, Any]]] = []
        self.held_namespaces = [(cls, _own_callables(cls)) for cls in _nn_classes()]
        self._hold_codes(self.held_namespaces)
        self.global_hooks = _global_module_hooks()

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

    def changed(self) -> list[str]:
        out = [name for hold in self.held_modules for name in hold.changed()]
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
