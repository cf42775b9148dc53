"""Sequential batching with a static KV cache (`kv_cache`): the same answers as the dynamic cache, from calls
padded to few shapes (rows to max_batch_sequences, the cache to a multiple of STATIC_CACHE_STEP tokens).

On a CPU transformers compiles nothing, so these tests check the padding and the answers; the GPU test
checks the same where the decoding step is compiled.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.serving.backend import Completion, Sampling
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.generate_queue import STATIC_CACHE_STEP, Job, padded_rows, static_budget
from kernelwright.serving.hf import HFServingBackend
from kernelwright.serving.loading import static_cache_for
from tests.serving.pipeline_model import micro_base

PROMPTS = ["def f(x):\n    return", "import os\nimport sys\n\ndef main(argv):\n    for a in argv:\n        print(",
           "class A:"]
BUDGETS = (12, 5, 9)


def test_rows_pad_to_the_batch_bound_and_the_cache_to_a_multiple_of_the_step() -> None:
    assert [padded_rows(n, 16) for n in (1, 3, 16)] == [16, 16, 16]
    assert [padded_rows(n, 0) for n in (1, 2, 3, 4, 5, 8, 9)] == [1, 2, 4, 4, 8, 8, 16]  # one request at a time
    assert padded_rows(8, 4) == 8 and padded_rows(3, 4) == 4  # a request's own candidates beyond the bound
    assert static_budget(100, 12) == STATIC_CACHE_STEP - 100
    assert static_budget(1000, 24) == STATIC_CACHE_STEP - 1000
    assert static_budget(1000, 25) == 2 * STATIC_CACHE_STEP - 1000
    assert static_budget(0, STATIC_CACHE_STEP) == STATIC_CACHE_STEP


def test_auto_is_static_on_a_cuda_device_only() -> None:
    class OnDevice:
        def __init__(self, kind: str) -> None:
            self.device = torch.device(kind)

    assert static_cache_for(OnDevice("cuda"), ServeConfig()) is True
    assert static_cache_for(OnDevice("cpu"), ServeConfig()) is False
    assert static_cache_for(OnDevice("cpu"), ServeConfig(kv_cache="static")) is True
    assert static_cache_for(OnDevice("cuda"), ServeConfig(kv_cache="dynamic")) is False
    with pytest.raises(ValueError, match="kv_cache must be auto, static or dynamic"):
        ServeConfig(kv_cache="paged")


@pytest.fixture(scope="module")
def micro_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return micro_base(tmp_path_factory)


def _backend(path: Path, static: bool, device: str = "cpu", max_batch_sequences: int = 16) -> HFServingBackend:
    from kernelwright.models import load_base_model, load_tokenizer

    tokenizer = load_tokenizer(path)
    tokenizer.eos_token_id = None  # nothing ends a sequence but its token budget
    model = load_base_model(path, dtype=torch.float32, device=device).eval()
    return HFServingBackend(model, tokenizer, max_batch_sequences, static_cache=static)


@pytest.fixture(scope="module")
def pair(micro_dir: Path) -> Iterator[tuple[HFServingBackend, HFServingBackend]]:
    dynamic, static = _backend(micro_dir, False), _backend(micro_dir, True)
    yield dynamic, static
    dynamic.close()
    static.close()


def _calls(backend: HFServingBackend, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What each generate call of the backend's model was given: rows, new-token budget, cache."""
    seen: list[dict[str, Any]] = []
    run = backend.model.generate

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append({"rows": kwargs["input_ids"].shape[0], "width": kwargs["input_ids"].shape[1],
                     "max_new_tokens": kwargs["max_new_tokens"], "cache": kwargs.get("cache_implementation")})
        return run(*args, **kwargs)

    monkeypatch.setattr(backend.model, "generate", spy)
    return seen


async def _together(backend: HFServingBackend, budgets: tuple[int, ...]) -> list[Completion]:
    with backend.queue._cond:  # the worker takes nothing until all three wait
        tasks = [asyncio.ensure_future(backend.generate([p], Sampling(max_new_tokens=n)))
                 for p, n in zip(PROMPTS, budgets, strict=True)]
        while len(backend.queue._jobs) < len(budgets):
            await asyncio.sleep(0)
    return [(await t)[0] for t in tasks]


def test_a_static_call_pads_rows_and_cache_and_answers_as_the_dynamic_cache(pair, monkeypatch) -> None:
    dynamic, static = pair
    expected = asyncio.run(_together(dynamic, BUDGETS))
    calls = _calls(static, monkeypatch)
    got = asyncio.run(_together(static, BUDGETS))
    assert got == expected
    assert [c.completion_tokens for c in got] == list(BUDGETS)
    (call,) = calls
    assert call["rows"] == 16 and call["cache"] == "static"  # three requests and 13 filler rows
    assert (call["width"] + call["max_new_tokens"]) % STATIC_CACHE_STEP == 0


def test_one_request_at_a_time_pads_its_candidates_to_a_power_of_two(micro_dir: Path, monkeypatch) -> None:
    dynamic, static = _backend(micro_dir, False, max_batch_sequences=0), _backend(micro_dir, True,
                                                                                max_batch_sequences=0)
    try:
        sampling = Sampling(max_new_tokens=7)
        expected = asyncio.run(dynamic.generate(PROMPTS, sampling))
        calls = _calls(static, monkeypatch)
        assert asyncio.run(static.generate(PROMPTS, sampling)) == expected
    finally:
        dynamic.close()
        static.close()
    assert [c["rows"] for c in calls] == [4]


def test_a_stream_beside_filler_rows_yields_its_tokens_then_the_dynamic_answer(pair) -> None:
    dynamic, static = pair

    async def streamed(backend: HFServingBackend) -> list[str | Completion]:
        return [p async for p in backend.stream(PROMPTS[1], Sampling(max_new_tokens=10))]

    expected = asyncio.run(streamed(dynamic))[-1]
    assert isinstance(expected, Completion)
    pieces = asyncio.run(streamed(static))
    assert pieces[-1] == expected
    assert "".join(p for p in pieces[:-1] if isinstance(p, str)) == expected.text


@pytest.mark.gpu
def test_on_a_cuda_device_the_compiled_static_cache_answers_each_row_its_own(micro_dir: Path) -> None:
    """Where transformers compiles the decoding step: two calls of one shape give the same tokens, each row its
    own budget, and the compiled path stays on (no fall-back). The compiled step may round otherwise than the
    eager one (its kernels sum in other orders), so agreement with the dynamic cache is asked of each row's
    first token only, which the uncompiled prefill makes."""
    dynamic, static = _backend(micro_dir, False, "cuda"), _backend(micro_dir, True, "cuda")
    prompts = [dynamic.tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]

    async def rows(backend: HFServingBackend) -> list[list[int]]:
        loop = asyncio.get_running_loop()
        jobs = [Job([ids], Sampling(max_new_tokens=n), False, loop) for ids, n in zip(prompts, BUDGETS, strict=True)]
        with backend.queue._cond:  # one call for the three
            for job in jobs:
                backend.queue.submit(job)
        return [(await job.result())[0] for job in jobs]

    try:
        expected = asyncio.run(rows(dynamic))
        first, again = (asyncio.run(rows(static)) for _ in range(2))
        assert static.queue.static_cache is True
    finally:
        dynamic.close()
        static.close()
    assert first == again and [len(r) for r in first] == list(BUDGETS)
    assert [r[0] for r in first] == [r[0] for r in expected]


def _refuse_static(backend: HFServingBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend's model as one whose cache cannot be static: such a generate call raises."""
    run = backend.model.generate

    def no_static(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("cache_implementation") == "static":
            raise NotImplementedError("this model's cache cannot be static")
        return run(*args, **kwargs)

    monkeypatch.setattr(backend.model, "generate", no_static)


def test_a_static_call_that_fails_turns_the_queue_to_the_dynamic_cache(micro_dir: Path, monkeypatch) -> None:
    """A transformers or model that cannot hold a static cache costs one warning, not every request."""
    dynamic, static = _backend(micro_dir, False), _backend(micro_dir, True)
    _refuse_static(static, monkeypatch)
    try:
        expected = asyncio.run(_together(dynamic, BUDGETS))
        assert asyncio.run(_together(static, BUDGETS)) == expected
        assert static.queue.static_cache is False
        assert asyncio.run(_together(static, BUDGETS)) == expected
    finally:
        dynamic.close()
        static.close()


def test_the_warm_up_makes_the_default_requests_shape_on_the_worker_thread(micro_dir: Path, monkeypatch) -> None:
    """One call at load: rows padded to the batch bound, the cache a default request's (a short prompt and
    default_max_new_tokens), two tokens a row; a request of that budget after it meets the same shape (one with
    a smaller budget reuses the larger cache: transformers never shrinks it)."""
    static = _backend(micro_dir, True)
    calls = _calls(static, monkeypatch)
    threads: list[str] = []
    run = static.model.generate

    def on_thread(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return run(*args, **kwargs)

    monkeypatch.setattr(static.model, "generate", on_thread)
    budget = ServeConfig().default_max_new_tokens
    try:
        seconds = static.warm_up(budget)
        asyncio.run(static.generate([PROMPTS[0]], Sampling(max_new_tokens=budget)))
    finally:
        static.close()
    assert seconds is not None and seconds > 0
    warm, first = calls
    assert warm["rows"] == first["rows"] == 16 and warm["cache"] == "static"
    assert warm["width"] + warm["max_new_tokens"] == first["width"] + first["max_new_tokens"]
    assert warm["width"] + warm["max_new_tokens"] == warm["width"] + static_budget(warm["width"], budget)
    assert threads == ["kernelwright-generate"] * 2


def test_no_warm_up_with_the_dynamic_cache(micro_dir: Path, monkeypatch) -> None:
    dynamic = _backend(micro_dir, False)
    calls = _calls(dynamic, monkeypatch)
    try:
        assert dynamic.warm_up(64) is None
    finally:
        dynamic.close()
    assert calls == []


def test_loading_warms_the_static_cache_up_unless_told_not_to(micro_dir: Path, monkeypatch) -> None:
    from kernelwright.serving.loading import default_loader

    budgets: list[int] = []
    monkeypatch.setattr(HFServingBackend, "warm_up", lambda self, budget: budgets.append(budget) or 1.0)
    for warm in (True, False):
        cfg = ServeConfig(model=str(micro_dir), kv_cache="static", batching="sequential", warm_up=warm,
                          default_max_new_tokens=300)
        backend, _ = default_loader(cfg)()
        backend.close()
    assert budgets == [300]


@pytest.mark.gpu
def test_on_a_cuda_device_a_request_after_the_warm_up_compiles_nothing(micro_dir: Path) -> None:
    """The warm-up's call is where the decoding step is compiled: a request of the warmed budget after it adds
    no graph (torch._dynamo's count), and the static path stays on."""
    from torch._dynamo.utils import counters

    static = _backend(micro_dir, True, "cuda")
    try:
        seconds = static.warm_up(200)
        graphs = counters["stats"]["unique_graphs"]
        (answer,) = asyncio.run(static.generate([PROMPTS[1]], Sampling(max_new_tokens=200)))
        assert static.queue.static_cache is True
    finally:
        static.close()
    assert seconds is not None and graphs > 0
    assert counters["stats"]["unique_graphs"] == graphs
    assert answer.completion_tokens == 200


def test_a_warm_up_that_cannot_hold_the_static_cache_leaves_the_dynamic_one(micro_dir: Path, monkeypatch) -> None:
    """A model that cannot hold or compile a static cache fails no load: the warm-up turns the queue to the dynamic
    cache (one warning) and says nothing was compiled; requests are answered after it."""
    static = _backend(micro_dir, True)
    _refuse_static(static, monkeypatch)
    try:
        assert static.warm_up(64) is None
        assert static.queue.static_cache is False
        (answer,) = asyncio.run(static.generate([PROMPTS[0]], Sampling(max_new_tokens=5)))
    finally:
        static.close()
    assert answer.completion_tokens == 5
