from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from litestar.testing import TestClient

from kernelwright.prompting import completion_text
from kernelwright.seed import load_seed_tasks
from kernelwright.serving import compiling
from kernelwright.serving.app import create_app
from kernelwright.serving.backend import ScriptedBackend
from kernelwright.serving.config import ServeConfig

BROKEN_MARK = "undefined_name_in_kernel"


@pytest.fixture(scope="session")
def seed_solution() -> str:
    task = next(t for t in load_seed_tasks() if t.id == "elementwise_elu")
    return task.solution


@pytest.fixture(scope="session")
def seed_reference() -> str:
    return next(t for t in load_seed_tasks() if t.id == "elementwise_elu").reference


@pytest.fixture(scope="session")
def good_text(seed_solution: str) -> str:
    return "Here is the kernel.\n" + completion_text(seed_solution)


@pytest.fixture(scope="session")
def broken_text(seed_solution: str) -> str:
    assert "y4[i] = v;" in seed_solution
    return completion_text(seed_solution.replace("y4[i] = v;", f"y4[i] = {BROKEN_MARK};"))


def _stage(status: str, log: str = "") -> SimpleNamespace:
    return SimpleNamespace(status=status, log=log, seconds=0.01)


class FakeCompileCheck:
    """A stand-in for kernelwright.cuda.compile_check in tests that only need a verdict."""

    @dataclasses.dataclass
    class CompileCheckSettings:
        host: bool = True

    @staticmethod
    def check_candidate(code: str, settings: Any) -> SimpleNamespace:
        bad = BROKEN_MARK in code
        device = _stage("failed", f"error: identifier \"{BROKEN_MARK}\" is undefined") if bad else _stage("ok")
        return SimpleNamespace(ok=not bad, device=device, host=_stage("ok"), cuda_sources=["src"])


@pytest.fixture
def fake_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiling, "_module", lambda: FakeCompileCheck)


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("compile-cache"))


@pytest.fixture
def client_for(compile_cache: str) -> Callable[..., Any]:
    """client_for(texts, **config) -> a context manager yielding (TestClient, ScriptedBackend).

    The compile check runs its device stage only (NVRTC), into a cache of the test session."""

    @contextmanager
    def make(texts: list[str], **config: Any) -> Iterator[tuple[TestClient, ScriptedBackend]]:
        backend = ScriptedBackend(list(texts))
        config = {"compile_host": False, "compile_cache_dir": compile_cache, **config}
        with TestClient(app=create_app(ServeConfig(**config), backend)) as client:
            yield client, backend

    return make
