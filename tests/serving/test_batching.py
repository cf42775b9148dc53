"""The continuous-batching backend on a tiny random model: shared batches, per-request sampling, cancel, stop.

Requests are made to land in one batch by holding the engine's loop (`manager.pause()`) while they
are added; what a batch held is read from the engine's own scheduler, not from timings.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from litestar.testing import TestClient

from kernelwright.serving import metrics
from kernelwright.serving.app import create_app
from kernelwright.serving.backend import Completion, EmptyPrompt, PromptTooLong, Sampling, SamplingRefused
from kernelwright.serving.batching import (
    ContinuousBatchingBackend,
    EngineSizes,
    GenerationFailed,
    TextDeltas,
    paged_cache_refuses,
)
from kernelwright.serving.config import ServeConfig

PROMPT = "__global__ void relu(float* x, int n) {"
GREEDY = Sampling(max_new_tokens=12)


def _load(path: Path) -> tuple[Any, Any]:
    from kernelwright.models import load_base_model, load_tokenizer

    tokenizer = load_tokenizer(path)
    tokenizer.eos_token_id = None  # nothing ends a sequence but its token budget (or a cancel)
    return load_base_model(path).eval(), tokenizer


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path) -> Iterator[ContinuousBatchingBackend]:
    backend = ContinuousBatchingBackend(*_load(tiny_model_dir))
    yield backend
    backend.close()


@pytest.fixture
def batch_sizes(engine: ContinuousBatchingBackend, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sequences in each batch the engine's scheduler makes while the test runs."""
    engine._ensure_running()
    scheduler = engine.manager.batch_processor.scheduler
    schedule, sizes = scheduler.schedule_batch, []

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = schedule(*args, **kwargs)
        sizes.append(len(out[0] or []))
        return out

    monkeypatch.setattr(scheduler, "schedule_batch", spy)
    return sizes


def _wait(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the engine did not get there"
        time.sleep(0.005)


def _greedy_reference(engine: ContinuousBatchingBackend, tokens: int) -> str:
    ids = engine.tokenizer(PROMPT, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        out = engine.model.generate(ids, max_new_tokens=tokens, do_sample=False, eos_token_id=None,
                                    pad_token_id=engine.tokenizer.pad_token_id)
    return str(engine.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))


async def _together(engine: ContinuousBatchingBackend, samplings: list[Sampling]) -> list[Completion]:
    """One generate call per sampling, all added to the engine while its loop is held."""
    with engine.manager.pause():
        tasks = [asyncio.ensure_future(engine.generate([PROMPT], s)) for s in samplings]
        while engine.manager.input_queue.qsize() < len(samplings):
            await asyncio.sleep(0)
    return [(await t)[0] for t in tasks]


def test_concurrent_requests_share_one_batch(engine, batch_sizes) -> None:
    answers = asyncio.run(_together(engine, [GREEDY, GREEDY]))
    assert max(batch_sizes) == 2  # both sequences were in one forward pass
    assert answers[0] == answers[1] and answers[0].completion_tokens == 12 and answers[0].finish_reason == "length"
    assert answers[0].text == _greedy_reference(engine, 12)  # greedy in a shared batch is transformers' greedy
    assert not engine.live and metrics.ENGINE_SEQUENCES._value.get() == 0


def test_each_request_keeps_its_own_temperature_in_a_shared_batch(engine, batch_sizes) -> None:
    greedy, hot, greedy_again = asyncio.run(_together(engine, [GREEDY, Sampling(12, temperature=2.0), GREEDY]))
    assert max(batch_sizes) == 3
    assert greedy.text == greedy_again.text == _greedy_reference(engine, 12)
    assert hot.text != greedy.text  # sampled at 2.0 from a random model: not the greedy tokens


def test_a_seed_is_refused_unless_greedy(engine) -> None:
    with pytest.raises(SamplingRefused) as refused:
        asyncio.run(engine.generate([PROMPT], Sampling(8, temperature=0.7, seed=3)))
    assert refused.value.field == "seed" and "--batching sequential" in str(refused.value)
    seeded = [asyncio.run(engine.generate([PROMPT], Sampling(8, seed=3)))[0].text for _ in range(2)]
    assert seeded[0] == seeded[1] == _greedy_reference(engine, 8)


def test_a_cancelled_caller_takes_its_sequences_out_of_the_engine(engine) -> None:
    engine._ensure_running()

    async def scenario() -> None:
        job = asyncio.ensure_future(engine.generate([PROMPT, PROMPT], Sampling(max_new_tokens=3000)))
        while len(engine.manager.batch_processor.scheduler.active_requests) < 2:
            await asyncio.sleep(0.005)
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job

    asyncio.run(scenario())
    assert not engine.live and not engine.manager.output_router.result_handlers
    scheduler = engine.manager.batch_processor.scheduler
    _wait(lambda: not scheduler.active_requests and not scheduler.waiting_requests)
    assert engine.manager.is_running()


def test_a_stream_yields_deltas_then_the_whole_completion_and_stops_when_closed(engine) -> None:
    async def scenario() -> tuple[list[str | Completion], str]:
        pieces = [p async for p in engine.stream(PROMPT, Sampling(max_new_tokens=24))]
        plain = (await engine.generate([PROMPT], Sampling(max_new_tokens=24)))[0].text
        stream = engine.stream(PROMPT, Sampling(max_new_tokens=3000, temperature=1.0))
        await anext(stream)
        await stream.aclose()  # a client that went away
        return pieces, plain

    pieces, plain = asyncio.run(scenario())
    done = pieces[-1]
    assert isinstance(done, Completion) and done.text == plain and done.completion_tokens == 24
    assert "".join(p for p in pieces[:-1] if isinstance(p, str)) == plain
    assert not engine.live and not engine.manager.output_router.result_handlers


def test_text_deltas_hold_back_partial_words_and_characters() -> None:
    class Tok:
        def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
            return "".join({1: "ab", 2: " c", 3: "\ufffd", 4: "d\n", 5: "e"}[i] for i in ids)

    deltas = TextDeltas(Tok())
    assert [deltas.update([1, 2, 3, 4, 5][:k]) for k in range(1, 6)] == ["", "ab ", "", "c\ufffdd\n", ""]
    assert deltas.rest() == "e"


def test_a_completion_too_long_for_the_cache_is_refused_before_it_reaches_the_engine(tiny_model_dir) -> None:
    small = ContinuousBatchingBackend(*_load(tiny_model_dir), EngineSizes(num_blocks=2, page_size=32,
                                                                          prefix_sharing=False))
    try:
        assert small.capacity_tokens == 64 and not small.manager.batch_processor.cache.use_prefix_sharing
        with pytest.raises(PromptTooLong, match="cb_num_blocks"):
            asyncio.run(small.generate([PROMPT], Sampling(max_new_tokens=60)))
        assert asyncio.run(small.generate([PROMPT], Sampling(max_new_tokens=8)))[0].completion_tokens == 8
    finally:
        small.close()


def test_the_app_answers_400_naming_seed_and_shutdown_stops_the_engine(engine) -> None:
    cfg = ServeConfig(compile_host=False, default_max_new_tokens=6)
    chat = {"model": cfg.model, "messages": [{"role": "user", "content": "relu"}], "temperature": 0.5, "seed": 1}
    with TestClient(app=create_app(cfg, engine)) as client:
        kernel = client.post("/v1/kernels/generate", json={"instruction": "relu", "temperature": 0.5, "seed": 1})
        streamed = client.post("/v1/chat/completions", json={**chat, "stream": True})
        greedy = client.post("/v1/chat/completions", json={**chat, "temperature": 0})
        assert engine.manager.is_running()
    assert kernel.status_code == 400 and kernel.json()["error"]["param"] == "seed"
    assert streamed.status_code == 400 and streamed.json()["error"]["param"] == "seed"
    assert greedy.status_code == 200 and greedy.json()["choices"][0]["message"]["content"]
    assert not engine.manager.is_running()  # the lifespan's end stopped the engine's thread


def test_concurrent_http_requests_are_batched_together(engine, batch_sizes) -> None:
    body = {"instruction": "relu", "compile_check": False, "max_new_tokens": 6}
    with TestClient(app=create_app(ServeConfig(compile_host=False), engine)) as client:
        answers: list[int] = []
        with engine.manager.pause():
            posts = [threading.Thread(target=lambda: answers.append(client.post("/v1/kernels/generate",
                                                                                 json=body).status_code))
                     for _ in range(2)]
            for post in posts:
                post.start()
            _wait(lambda: engine.manager.input_queue.qsize() == 2)
        for post in posts:
            post.join(10)
        depth = client.get("/metrics").text
    assert answers == [200, 200] and max(batch_sizes) == 2
    assert "kernelwright_engine_sequences 0.0" in depth


def test_a_client_that_goes_away_takes_its_sequences_out_of_the_engine(engine) -> None:
    from tests.serving.test_lifecycle import _scope

    engine._ensure_running()
    body = json.dumps({"instruction": "relu", "n": 2, "max_new_tokens": 3000, "compile_check": False}).encode()
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        while len(engine.live) < 2:  # both candidates are in the engine: the client leaves
            await asyncio.sleep(0.005)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    app = create_app(ServeConfig(compile_host=False), engine)
    asyncio.run(asyncio.wait_for(app(_scope("/v1/kernels/generate"), receive, send), 10))
    assert not engine.live and not any(m["type"] == "http.response.body" for m in sent)
    scheduler = engine.manager.batch_processor.scheduler
    _wait(lambda: not scheduler.active_requests and not scheduler.waiting_requests)


def test_an_engine_that_died_fails_its_sequences_and_the_next_request_starts_it_again(engine, monkeypatch) -> None:
    engine._ensure_running()
    processor = engine.manager.batch_processor
    step = processor._generation_step

    def crash(model: Any) -> None:
        monkeypatch.setattr(processor, "_generation_step", step)  # once
        raise RuntimeError("device lost")

    monkeypatch.setattr(processor, "_generation_step", crash)
    with pytest.raises(GenerationFailed, match="device lost"):
        asyncio.run(engine.generate([PROMPT], GREEDY))
    _wait(lambda: not engine.manager.is_running())
    again = asyncio.run(engine.generate([PROMPT], GREEDY))[0]
    assert engine.manager.is_running() and again.text == _greedy_reference(engine, 12)


def test_streamed_choices_come_together_and_each_ends_with_its_compile_result(engine) -> None:
    body = {"model": ServeConfig().model, "messages": [{"role": "user", "content": "relu"}], "temperature": 0.7,
            "n": 2, "max_tokens": 40, "stream": True, "compile_check": False}
    with TestClient(app=create_app(ServeConfig(compile_host=False), engine)) as client:
        r = client.post("/v1/chat/completions", json=body)
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    texts = {i: "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"][0]["index"] == i)
             for i in (0, 1)}
    finals = sorted(e["choices"][0]["index"] for e in events if e["choices"][0]["finish_reason"] == "length")
    assert r.text.rstrip().endswith("data: [DONE]") and finals == [0, 1]
    assert texts[0] and texts[1]


def test_layer_types_the_paged_cache_cannot_hold_are_named() -> None:
    from transformers import AutoConfig

    lfm2 = AutoConfig.for_model("lfm2", num_hidden_layers=3, layer_types=["conv", "full_attention", "conv"])
    assert paged_cache_refuses(lfm2) == ["conv"]
    assert paged_cache_refuses(AutoConfig.for_model("qwen2", num_hidden_layers=2)) == []  # no layer_types: full
    gemma = AutoConfig.for_model("gemma3_text", num_hidden_layers=2, layer_types=["sliding_attention",
                                                                                  "full_attention"])
    assert paged_cache_refuses(gemma) == []


def test_serve_config_rejects_unknown_batching_and_negative_sizes() -> None:
    assert ServeConfig().batching == "auto"
    with pytest.raises(ValueError, match="auto, continuous or sequential"):
        ServeConfig(batching="dynamic")
    with pytest.raises(ValueError, match="max_batch_sequences"):
        ServeConfig(max_batch_sequences=-1)
    with pytest.raises(ValueError, match="cb_num_blocks"):
        ServeConfig(cb_num_blocks=-1)
    with pytest.raises(ValueError, match="cb_page_size"):
        ServeConfig(cb_page_size=2)


def test_a_prompt_without_tokens_is_refused_before_it_reaches_the_engine(engine) -> None:
    with pytest.raises(EmptyPrompt, match="no tokens"):
        asyncio.run(engine.generate([""], Sampling(max_new_tokens=4)))
