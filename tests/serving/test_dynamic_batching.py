"""The sequential backend's dynamic batching on the pipeline's kind of model (LFM2 micro base): waiting
requests of compatible sampling share one left-padded generate call, each keeps its own answer.

Requests are made to wait together by holding the queue's lock while they are submitted (the worker
cannot take a job meanwhile); what each generate call held is read from a spy on the worker's batches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.serving.backend import Completion, EmptyPrompt, EngineBusy, PromptTooLong, Sampling
from kernelwright.serving.generate_queue import batch_key
from kernelwright.serving.hf import HFServingBackend
from tests.serving.pipeline_model import micro_base

PROMPTS = ["def f(x):\n    return", "import os\nimport sys\n\ndef main(argv):\n    for a in argv:\n        print(",
           "class A:"]
GREEDY = Sampling(max_new_tokens=12)


@pytest.fixture(scope="module")
def micro_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return micro_base(tmp_path_factory)


def _backend(path: Path, max_batch_sequences: int = 32) -> HFServingBackend:
    from kernelwright.models import load_base_model, load_tokenizer

    tokenizer = load_tokenizer(path)
    tokenizer.eos_token_id = None  # nothing ends a sequence but its token budget (or a cancel)
    return HFServingBackend(load_base_model(path).eval(), tokenizer, max_batch_sequences)


@pytest.fixture(scope="module")
def backend(micro_dir: Path) -> Iterator[HFServingBackend]:
    made = _backend(micro_dir)
    yield made
    made.close()


@pytest.fixture
def batches(backend: HFServingBackend, monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The candidates of each request, per generate call the worker makes while the test runs."""
    return _spy(backend, monkeypatch)


def _spy(backend: HFServingBackend, monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    seen: list[list[int]] = []
    run = backend.queue._generate

    def spy(batch: list[Any]) -> list[list[int]]:
        seen.append([len(job.prompts) for job in batch])
        return run(batch)

    monkeypatch.setattr(backend.queue, "_generate", spy)
    return seen


@asynccontextmanager
async def _held(backend: HFServingBackend, jobs: int):  # type: ignore[no-untyped-def]
    """The worker takes nothing while the block submits; it leaves once `jobs` are waiting."""
    with backend.queue._cond:
        yield
        while len(backend.queue._jobs) < jobs:
            await asyncio.sleep(0)


async def _together(backend: HFServingBackend, calls: list[tuple[list[str], Sampling]]) -> list[list[Completion]]:
    async with _held(backend, len(calls)):
        tasks = [asyncio.ensure_future(backend.generate(prompts, s)) for prompts, s in calls]
    return [await t for t in tasks]


def _alone(backend: HFServingBackend, prompt: str, sampling: Sampling) -> Completion:
    return asyncio.run(backend.generate([prompt], sampling))[0]


def test_lfm2_short_convolutions_respect_left_padding(backend: HFServingBackend) -> None:
    """The next-token scores of a prompt are the same alone and left-padded beside a longer one."""
    model, tok = backend.model, backend.tokenizer
    tok.padding_side = "left"

    def logits(texts: list[str]) -> torch.Tensor:
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id,
                                 eos_token_id=None, output_logits=True, return_dict_in_generate=True)
        return torch.stack(out.logits, 1)

    assert "conv" in model.config.layer_types
    alone, padded = logits(PROMPTS[:1]), logits(PROMPTS[:2])[:1]
    assert torch.allclose(alone, padded, atol=1e-4)


def test_waiting_greedy_requests_share_one_call_and_each_keeps_its_own_answer(backend, batches) -> None:
    budgets = [Sampling(max_new_tokens=n) for n in (12, 5, 9)]
    alone = [_alone(backend, p, s) for p, s in zip(PROMPTS, budgets, strict=True)]
    batches.clear()
    together = asyncio.run(_together(backend, [([p], s) for p, s in zip(PROMPTS, budgets, strict=True)]))
    assert batches == [[1, 1, 1]]  # one generate call for the three requests
    assert [t[0] for t in together] == alone
    assert [a.completion_tokens for a in alone] == [12, 5, 9] and {a.finish_reason for a in alone} == {"length"}


def test_only_compatible_sampling_is_batched_and_a_seeded_request_runs_alone(backend, batches) -> None:
    hot, warm = Sampling(8, temperature=0.9), Sampling(8, temperature=0.5)
    seeded = Sampling(8, temperature=0.9, seed=7)
    asyncio.run(_together(backend, [(PROMPTS[:1], hot), (PROMPTS[:1], GREEDY), (PROMPTS[:1], seeded),
                                    (PROMPTS[:1], hot), (PROMPTS[:1], warm), (PROMPTS[:1], Sampling(8, seed=3))]))
    assert batches == [[1, 1], [1, 1], [1], [1]]  # hot+hot, greedy+greedy (a seed changes no greedy token), ...
    assert batch_key(seeded) is None and batch_key(Sampling(8, seed=3)) == batch_key(GREEDY)
    first, again = (_alone(backend, PROMPTS[0], seeded) for _ in range(2))
    assert first == again  # the seed is honoured


def test_a_batch_holds_at_most_max_batch_sequences(micro_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for bound, expected in ((4, [[2, 2], [2]]), (0, [[2], [2], [2]])):
        small = _backend(micro_dir, bound)
        seen = _spy(small, monkeypatch)
        try:
            answers = asyncio.run(_together(small, [(PROMPTS[:1] * 2, Sampling(4))] * 3))
        finally:
            small.close()
        assert seen == expected and all(len(a) == 2 for a in answers)


def test_a_cancelled_request_does_not_stop_the_others_in_its_batch(backend, batches) -> None:
    expected = _alone(backend, PROMPTS[1], Sampling(40))
    rows: list[list[list[int]]] = []
    run = backend.queue._generate

    def keep(batch: list[Any]) -> list[list[int]]:
        rows.append(run(batch))
        return rows[-1]

    async def scenario() -> Completion:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(backend.queue, "_generate", keep)
            async with _held(backend, 3):
                long = asyncio.ensure_future(backend.generate([PROMPTS[0]], Sampling(max_new_tokens=3000)))
                short = asyncio.ensure_future(backend.generate([PROMPTS[1]], Sampling(40)))
                stream = backend.stream(PROMPTS[2], Sampling(3000))
                first = asyncio.ensure_future(anext(stream))
            await first  # the batch of the three is generating
            long.cancel()
            await stream.aclose()  # a streaming client that went away
            with pytest.raises(asyncio.CancelledError):
                await long
            return (await short)[0]

    assert asyncio.run(scenario()) == expected
    assert len(rows) == 1 and len(rows[0][0]) < 3000 and len(rows[0][2]) < 3000  # cancelled rows stopped early
    assert _alone(backend, PROMPTS[2], GREEDY).completion_tokens == 12  # the worker is free again


def test_a_stream_in_a_batch_yields_deltas_then_the_same_answer_as_alone(backend, batches) -> None:
    expected = _alone(backend, PROMPTS[0], Sampling(24))
    batches.clear()

    async def scenario() -> tuple[list[str | Completion], list[Completion]]:
        async with _held(backend, 2):
            stream = backend.stream(PROMPTS[0], Sampling(24))
            first = asyncio.ensure_future(anext(stream))
            other = asyncio.ensure_future(backend.generate([PROMPTS[1]], Sampling(6)))
        pieces = [await first] + [p async for p in stream]
        return pieces, await other

    pieces, other = asyncio.run(scenario())
    assert batches == [[1, 1]]
    assert pieces[-1] == expected and "".join(p for p in pieces[:-1] if isinstance(p, str)) == expected.text
    assert other[0].completion_tokens == 6


def test_close_answers_waiting_and_running_requests_503_and_a_later_request_starts_again(backend) -> None:
    async def scenario() -> None:
        running = asyncio.ensure_future(backend.generate([PROMPTS[0]], Sampling(max_new_tokens=3000)))
        while not backend.queue._running:
            await asyncio.sleep(0.01)
        waiting = asyncio.ensure_future(backend.generate([PROMPTS[1]], GREEDY))
        while not backend.queue._jobs:
            await asyncio.sleep(0)
        await asyncio.to_thread(backend.close)
        for job in (running, waiting):
            with pytest.raises(EngineBusy, match="shutting down"):
                await job

    asyncio.run(scenario())
    assert _alone(backend, PROMPTS[0], GREEDY).completion_tokens == 12


def test_a_failed_generate_fails_its_batch_and_the_worker_goes_on(backend, monkeypatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.undo()
        raise RuntimeError("device lost")

    monkeypatch.setattr(backend.model, "generate", broken)
    with pytest.raises(RuntimeError, match="device lost"):
        asyncio.run(backend.generate([PROMPTS[0]], GREEDY))
    assert _alone(backend, PROMPTS[0], GREEDY).completion_tokens == 12


def test_a_prompt_over_the_context_is_refused_before_it_waits(backend) -> None:
    with pytest.raises(PromptTooLong, match="context"):
        asyncio.run(backend.generate(["x " * 9000], GREEDY))
    assert not backend.queue._jobs


@pytest.mark.gpu
def test_on_a_cuda_device_waiting_greedy_requests_share_one_call_and_answer_as_alone(micro_dir: Path,
                                                                                     monkeypatch) -> None:
    """The same on a GPU (float32, so that padding, not bf16 rounding, is what is compared)."""
    from kernelwright.models import load_base_model, load_tokenizer

    tokenizer = load_tokenizer(micro_dir)
    tokenizer.eos_token_id = None
    gpu = HFServingBackend(load_base_model(micro_dir, dtype=torch.float32, device="cuda").eval(), tokenizer)
    seen = _spy(gpu, monkeypatch)
    try:
        budgets = [Sampling(max_new_tokens=n) for n in (12, 5, 9)]
        alone = [_alone(gpu, p, s) for p, s in zip(PROMPTS, budgets, strict=True)]
        seen.clear()
        together = asyncio.run(_together(gpu, [([p], s) for p, s in zip(PROMPTS, budgets, strict=True)]))
    finally:
        gpu.close()
    assert seen == [[1, 1, 1]] and [t[0] for t in together] == alone


def test_a_prompt_without_tokens_is_refused_before_it_reaches_the_model(backend: HFServingBackend) -> None:
    with pytest.raises(EmptyPrompt, match="no tokens"):
        asyncio.run(backend.generate([""], Sampling(max_new_tokens=4)))
