"""The harness guard (class 7), on the CPU: what it holds, what it catches, what it allows."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from kernelwright.verifier import (
    build_failure,
    channel,
    cpu_profile,
    error_shape,
    gpu_wait,
    inputs,
    isolation,
    profiling,
    runner,
    runner_uid,
    sandbox,
    seccomp,
    seeding,
    spec,
    timer,
    timing,
    tolerance,
)
from kernelwright.verifier import guard as guard_module
from kernelwright.verifier.guard import GUARDED_MODULES, HARNESS_MODULES, HarnessGuard
from kernelwright.verifier.isolation import Rejected, import_file


@pytest.fixture
def guard() -> HarnessGuard:
    return HarnessGuard()


def _replaced(guard: HarnessGuard) -> str:
    with pytest.raises(Rejected) as exc:
        guard.check()
    assert exc.value.reason == "harness_tampering"
    return exc.value.detail


@pytest.fixture
def restore() -> Iterator[list[tuple[Any, str, Any]]]:
    """Patches to undo after the test: (object, name, original or None to delete)."""
    undo: list[tuple[Any, str, Any]] = []
    yield undo
    for obj, name, original in reversed(undo):
        if original is None:
            delattr(obj, name)
        else:
            setattr(obj, name, original)


def test_untouched_harness_passes(guard: HarnessGuard) -> None:
    guard.check()
    assert guard.changed() == []


def test_module_function_replaced_through_an_alias(guard: HarnessGuard, restore: list) -> None:
    alias = torch
    restore.append((torch, "allclose", torch.allclose))
    vars(alias)["allclose"] = lambda *a, **k: True
    assert "torch.allclose" in _replaced(guard)


def test_tensor_method_shadowed_in_the_subclass(guard: HarnessGuard, restore: list) -> None:
    """torch.Tensor.abs lives on the C base class: setting it on torch.Tensor adds a name that hides it."""
    assert "abs" not in vars(torch.Tensor)
    restore.append((torch.Tensor, "abs", None))
    torch.Tensor.abs = lambda self: self  # type: ignore[method-assign]
    assert "Tensor.abs" in _replaced(guard)


def test_harness_function_and_timer_method(guard: HarnessGuard, restore: list) -> None:
    restore.append((timing, "median_ms", timing.median_ms))
    restore.append((timer.Timer, "time_ms", timer.Timer.time_ms))
    timing.median_ms = lambda *a: 0.0  # type: ignore[assignment]
    timer.Timer.time_ms = lambda self, fn, stream: 0.001  # type: ignore[method-assign]
    detail = _replaced(guard)
    assert "timing.median_ms" in detail and "Timer.time_ms" in detail


# one function of each of the harness's own modules: what a candidate would replace there
HARNESS_FUNCTIONS = [(runner, "serve"), (channel, "save_output"), (spec, "Progress"), (isolation, "import_file"),
                     (inputs, "poison"), (guard_module, "_nn_classes"), (timer, "_cudart"), (timing, "median_ms"),
                     (profiling, "profiled_kernels"), (tolerance, "judge"), (error_shape, "error_kind"),
                     (sandbox, "confine"), (seccomp, "deny_reaching_out"), (runner_uid, "limit_tasks"),
                     (build_failure, "build_failure"), (gpu_wait, "set_wait"), (seeding, "seed_all"),
                     (cpu_profile, "stop_and_dump")]
HARNESS_IDS = [mod.__name__.rsplit(".", 1)[-1] for mod, _ in HARNESS_FUNCTIONS]


def test_every_harness_module_is_held(guard: HarnessGuard) -> None:
    """The runner and each module it uses, held as the modules the harness calls are."""
    held = {hold.label: hold.mod for hold in guard.held_modules}
    assert all(held[name.rsplit(".", 1)[-1]] is sys.modules[name] for name in HARNESS_MODULES)
    assert sorted(mod.__name__ for mod, _ in HARNESS_FUNCTIONS) == sorted(HARNESS_MODULES)


@pytest.mark.parametrize(("mod", "name"), HARNESS_FUNCTIONS, ids=HARNESS_IDS)
def test_a_harness_module_function_replaced(guard: HarnessGuard, restore: list, mod: ModuleType, name: str) -> None:
    restore.append((mod, name, getattr(mod, name)))
    setattr(mod, name, lambda *a, **k: (None, "", 0.0))
    assert f"{mod.__name__.rsplit('.', 1)[-1]}.{name}" in _replaced(guard)


@pytest.mark.parametrize("mod", [inputs, runner], ids=["inputs", "runner"])
def test_a_poison_that_does_nothing_is_caught(guard: HarnessGuard, restore: list, mod: ModuleType) -> None:
    """`poison` replaced where it is defined (inputs) or in the runner, which calls it."""
    restore.append((mod, "poison", mod.poison))
    mod.poison = lambda like: None  # type: ignore[attr-defined]
    assert f"{mod.__name__.rsplit('.', 1)[-1]}.poison" in _replaced(guard)


def test_the_runner_loads_nothing_of_the_judge_and_all_it_loads_is_held() -> None:
    """Importing the runner loads no kernelwright.verifier module that the guard does not hold, and
    none of the judge's (the comparison's caller, the verdict's writer, the reference's timing)."""
    code = ("import json, sys\n"
            "import kernelwright.verifier.runner\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kernelwright.verifier.'))))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    loaded = set(json.loads(run.stdout))
    assert loaded <= {*HARNESS_MODULES, *GUARDED_MODULES}
    assert not {m for m in loaded if m.rsplit(".", 1)[-1].startswith("judge") or m.endswith(".verify")}


def test_instance_attributes_and_shadowing_methods(guard: HarnessGuard) -> None:
    class Clock:
        def __init__(self) -> None:
            self.gap_ms = 0.01

        def time_ms(self) -> float:
            return 1.0

    clock = Clock()
    guard.watch_instance(clock, "timer")
    guard.check()
    clock.time_ms = lambda: 0.0  # type: ignore[method-assign]
    assert "timer.time_ms" in _replaced(guard)
    del clock.time_ms
    guard.check()
    clock.gap_ms = float("inf")
    assert "timer.gap_ms" in _replaced(guard)


def test_profiler_event_durations_are_held(guard: HarnessGuard, restore: list) -> None:
    from torch.autograd.profiler_util import FunctionEvent

    restore.append((FunctionEvent, "device_time", vars(FunctionEvent).get("device_time")))
    FunctionEvent.device_time = property(lambda self: 0.0)  # type: ignore[method-assign,assignment]
    assert "FunctionEvent.device_time" in _replaced(guard)


def test_torch_compile_and_profiler_are_not_tampering(guard: HarnessGuard) -> None:
    """Importing torch._dynamo wraps torch.manual_seed (torch's own rebinding): allowed."""
    from torch.profiler import ProfilerActivity, profile

    compiled = torch.compile(lambda x: x * 2 + 1, backend="eager")
    assert torch.equal(compiled(torch.ones(3)), torch.full((3,), 3.0))
    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(4).sum()
    guard.check()


def test_tf32_switched_on(guard: HarnessGuard, restore: list) -> None:
    restore.append((torch.backends.cuda.matmul, "allow_tf32", torch.backends.cuda.matmul.allow_tf32))
    torch.backends.cuda.matmul.allow_tf32 = not torch.backends.cuda.matmul.allow_tf32
    assert "TF32" in _replaced(guard)


def test_verdict_writing_path_is_held(guard: HarnessGuard, restore: list) -> None:
    """A forward that swaps how the result file is written (to forge the verdict) is caught."""
    from kernelwright import atomic

    restore.append((atomic, "write_text", atomic.write_text))
    atomic.write_text = lambda dest, text: None
    assert "kernelwright.atomic.write_text" in _replaced(guard)


def test_path_method_is_held(guard: HarnessGuard, restore: list) -> None:
    from pathlib import PosixPath

    restore.append((PosixPath, "write_text", None))
    PosixPath.write_text = lambda self, *a, **k: 0  # shadows pathlib.Path.write_text
    assert "PosixPath.write_text" in _replaced(guard)


def test_reference_problem_is_held(tmp_path: Path) -> None:
    """The oracle: replacing the problem's Model.forward (so that the reference agrees with
    anything) or shadowing a builtin in its globals is caught."""
    src = tmp_path / "prob.py"
    src.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                   "        return abs(x) + 1\n")
    problem = import_file(src, "kw_test_problem")
    guard = HarnessGuard()
    guard.watch_module(problem, "problem")
    guard.check()
    forward = problem.Model.forward
    problem.Model.forward = lambda self, x: x
    assert "Model.forward" in _replaced(guard)
    problem.Model.forward = forward
    guard.check()
    problem.abs = lambda x: x  # a module global that shadows the builtin the reference calls
    assert "problem.abs (shadows the builtin)" in _replaced(guard)


def test_nn_layers_are_held(guard: HarnessGuard, restore: list) -> None:
    """A reference built from nn layers computes through their methods and nn.Module's call."""
    restore.append((torch.nn.Linear, "forward", torch.nn.Linear.forward))
    torch.nn.Linear.forward = lambda self, x: x
    assert "Linear.forward" in _replaced(guard)


def test_module_call_is_held(guard: HarnessGuard, restore: list) -> None:
    restore.append((torch.nn.Module, "__call__", torch.nn.Module.__call__))
    torch.nn.Module.__call__ = lambda self, *a, **k: None
    assert "Module.__call__" in _replaced(guard)


def test_harness_global_shadowing_a_builtin(guard: HarnessGuard, restore: list) -> None:
    restore.append((timing, "sorted", None))
    timing.sorted = lambda xs: [0.001 for _ in xs]  # would shadow sorted() in median_ms
    assert "timing.sorted (shadows the builtin)" in _replaced(guard)


@pytest.mark.parametrize("mod", [mod for mod, _ in HARNESS_FUNCTIONS], ids=HARNESS_IDS)
def test_a_global_shadowing_a_builtin_in_each_harness_module(guard: HarnessGuard, restore: list,
                                                              mod: ModuleType) -> None:
    restore.append((mod, "sorted", None))
    mod.sorted = lambda xs: list(xs)  # type: ignore[attr-defined]
    assert f"{mod.__name__.rsplit('.', 1)[-1]}.sorted (shadows the builtin)" in _replaced(guard)


def test_a_lookalike_of_dynamos_module_patch_is_caught(guard: HarnessGuard, restore: list) -> None:
    """torch.compile's own wrap of nn.Module.__init__ is allowed; a wrapper of the candidate's, even
    one that calls the original, is not."""
    init = torch.nn.Module.__init__

    def patched_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)

    restore.append((torch.nn.Module, "__init__", init))
    torch.nn.Module.__init__ = patched_init
    assert "Module.__init__" in _replaced(guard)


def _unpatch_dynamo_module_tagging(restore: list) -> Any:
    """nn.Module as before torch._dynamo wrapped its __init__/__setstate__ (an earlier test may have
    compiled something), so that the next compile wraps them again; undone after the test."""
    from torch._dynamo import mutation_guard

    module = torch.nn.Module
    wrappers = mutation_guard.install_generation_tagging_init.__code__.co_consts
    for name in ("__init__", "__setstate__"):
        now = vars(module)[name]
        if any(now.__code__ is c for c in wrappers):  # dynamo's wrapper: its closure holds the original
            restore.append((module, name, now))
            setattr(module, name, now.__closure__[0].cell_contents)
    flag = "___needs_generation_tag_patch"  # absent, as in a fresh process: dynamo wraps and sets it
    if flag in vars(module):
        restore.append((module, flag, vars(module)[flag]))
        delattr(module, flag)
    return mutation_guard


def test_torch_compile_of_a_module_is_not_tampering(tmp_path: Path, restore: list) -> None:
    """Compiling the reference (dynamo + AOT autograd, as the torch.compile baseline does) wraps
    nn.Module.__init__/__setstate__ in torch._dynamo.mutation_guard: allowed, on nn.Module and as
    the problem's Model resolves it."""
    mutation_guard = _unpatch_dynamo_module_tagging(restore)
    src = tmp_path / "prob_nn.py"
    src.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n")
    problem = import_file(src, "kw_test_problem_nn")
    guard = HarnessGuard()
    guard.watch_module(problem, "problem")
    assert torch.equal(torch.compile(problem.Model(), backend="aot_eager")(torch.ones(3)), torch.full((3,), 2.0))
    assert torch.nn.Module.__init__ is not mutation_guard.unpatched_nn_module_init  # wrapped during the test
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = torch.compile(model, backend="aot_eager")
    with torch.no_grad():
        assert torch.allclose(compiled(torch.ones(2, 4)), model(torch.ones(2, 4)))
    torch.nn.Linear(2, 2)
    guard.check()


def test_global_module_hook_is_caught(guard: HarnessGuard) -> None:
    """A hook on every nn.Module could replace the reference's output without replacing anything."""
    handle = torch.nn.modules.module.register_module_forward_hook(lambda mod, args, out: out * 0)
    try:
        assert "global hooks: _global_forward_hooks" in _replaced(guard)
    finally:
        handle.remove()
    guard.check()


def _reference() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()


def test_compiling_the_reference_changes_nothing_held(guard: HarnessGuard) -> None:
    """A candidate may compile its own modules: torch.compile's own patches are not tampering."""
    ref = _reference()
    compiled = torch.compile(ref, backend="aot_eager")
    with torch.no_grad():
        assert torch.allclose(compiled(torch.ones(2, 4)), ref(torch.ones(2, 4)))
    guard.check()
