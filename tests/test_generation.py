"""The sampling arguments of transformers' `generate`, made in one place for evaluation and the server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch
from transformers import BatchEncoding, LogitsProcessor, LogitsProcessorList

from kernelwright.generation import (
    FINISH_REASONS,
    LOOP_MAX_PERIOD,
    LOOP_WINDOW,
    HFBackend,
    LoopEnd,
    LoopStop,
    end_loops_with_eos,
    ends_in_loop,
    finish_reason,
    generate_kwargs,
    periodic,
    periodic_all_shifts,
    periodic_each_shift,
)
from kernelwright.serving.backend import Sampling
from kernelwright.serving.generate_queue import GenerateQueue, Job

PAD, EOS = 0, 2


class _RecordingModel:
    """Answers every `generate` with EOS after the prompt, and keeps the arguments of each call."""

    device = torch.device("cpu")

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def generate(self, input_ids: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        self.calls.append(kwargs)
        return torch.cat([input_ids, torch.full((input_ids.shape[0], 1), EOS)], dim=1)


class _Tokenizer:
    pad_token_id, eos_token_id, padding_side = PAD, EOS, "right"

    def apply_chat_template(self, messages: list[dict[str, str]], **_: Any) -> str:
        return messages[-1]["content"]

    def __call__(self, prompts: list[str], **_: Any) -> BatchEncoding:
        ids = torch.tensor([[5] * 3 for _ in prompts])
        return BatchEncoding({"input_ids": ids, "attention_mask": torch.ones_like(ids)})

    def batch_decode(self, rows: torch.Tensor, **_: Any) -> list[str]:
        return [" ".join(map(str, r.tolist())) for r in rows]


def test_greedy_leaves_sampling_off_and_sampling_passes_temperature_and_top_p() -> None:
    assert generate_kwargs(8, 0.0, 0.9, PAD, EOS) == {
        "max_new_tokens": 8, "do_sample": False, "temperature": None, "top_p": None, "top_k": None,
        "pad_token_id": PAD, "eos_token_id": EOS}
    sampled = generate_kwargs(8, 0.7, 0.95, PAD, EOS)
    assert (sampled["do_sample"], sampled["temperature"], sampled["top_p"], sampled["top_k"]) == (True, 0.7, 0.95, None)


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_evaluation_and_the_server_generate_with_the_same_arguments(temperature: float) -> None:
    model = _RecordingModel()
    HFBackend(model, _Tokenizer(), max_new_tokens=5, temperature=temperature).generate(  # type: ignore[arg-type]
        [[{"role": "user", "content": "kernel"}]])
    loop = asyncio.new_event_loop()
    try:
        job = Job([[5, 5, 5]], Sampling(max_new_tokens=5, temperature=temperature, top_p=0.9), False, loop)
        GenerateQueue(model, EOS, PAD, max_batch_sequences=4)._generate([job])
    finally:
        loop.close()
    evaluation, server = model.calls
    expected = {"evaluation": generate_kwargs(5, temperature, None, PAD, EOS),
                "server": generate_kwargs(5, temperature, 0.9, PAD, EOS)}
    assert {k: evaluation[k] for k in expected["evaluation"]} == expected["evaluation"]
    assert {k: server[k] for k in expected["server"]} == expected["server"]


def test_a_loop_is_a_window_that_repeats_one_short_unit() -> None:
    line = list(range(10, 25))  # one generated line, 15 tokens, written again and again
    assert ends_in_loop(list(range(100)) + line * 20)
    assert ends_in_loop([7] * LOOP_WINDOW)  # "((((((" and the like
    assert ends_in_loop(list(range(1000, 1000 + LOOP_MAX_PERIOD)) * 5)  # the longest unit looked for
    assert not ends_in_loop(list(range(1000, 1000 + LOOP_MAX_PERIOD + 1)) * 5)  # one token longer
    assert not ends_in_loop(line * 20 + [99])  # the loop was left
    assert not ends_in_loop([7] * (LOOP_WINDOW - 1))  # too short to tell
    assert not ends_in_loop(list(range(LOOP_WINDOW * 2)))


def test_periodic_agrees_with_one_shift_at_a_time() -> None:
    """Every period compared at once (a GPU's way) gives what comparing the row with each shift in turn gives, on
    rows with planted units of every length around the limit, broken ones and noise, in chunks too."""
    gen = torch.Generator().manual_seed(3)
    rows = []
    for period in range(1, 80):
        unit = torch.randint(0, 5, (period,), generator=gen)
        row = unit.repeat(300 // period + 1)[:300]
        rows += [row, row.clone().index_fill_(0, torch.tensor([150]), 9)]
    rows += [torch.randint(0, 3, (300,), generator=gen) for _ in range(400)]
    tail = torch.stack(rows)

    def one_at_a_time(t: torch.Tensor, max_period: int) -> list[bool]:
        return [any(bool((r[p:] == r[:-p]).all()) for p in range(1, min(max_period, len(r) - 1) + 1)) for r in t]

    for way in (periodic, periodic_all_shifts, periodic_each_shift):  # the GPU's way and the CPU's
        for max_period in (1, 17, LOOP_MAX_PERIOD, 400):
            assert way(tail, max_period).tolist() == one_at_a_time(tail, max_period)
        assert way(tail[:, :1], 64).tolist() == [False] * len(tail)
        assert way(tail[:0], 64).tolist() == []


def test_loop_stop_ends_only_the_rows_that_loop_and_only_past_the_prompt() -> None:
    prompt = [3] * 300  # a prompt that itself repeats is no reason to stop
    looping = prompt + [4, 5, 6] * 100
    honest = prompt + [i % 97 + 4 for i in range(300)]
    stop = LoopStop(prompt_len=len(prompt))
    assert stop(torch.tensor([looping, honest]), None).tolist() == [True, False]
    assert stop(torch.tensor([prompt + [3] * 10]), None).tolist() == [False]


def _zero_head_model() -> Any:
    """A one-layer Llama whose output layer is zero: greedy decoding writes token 0 forever."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                      pad_token_id=PAD + 1, eos_token_id=EOS)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.zero_()
    return model


class _IdsTokenizer(_Tokenizer):
    pad_token_id = PAD + 1

    def batch_decode(self, rows: torch.Tensor, **_: Any) -> list[str]:
        return [" ".join(str(t) for t in r.tolist() if t != self.pad_token_id) for r in rows]


@pytest.mark.parametrize("stop_loops", [True, False])
def test_generate_ends_a_looping_completion_at_the_window_not_the_budget(stop_loops: bool) -> None:
    budget = LOOP_WINDOW + 100
    out = HFBackend(_zero_head_model(), _IdsTokenizer(), max_new_tokens=budget,  # type: ignore[arg-type]
                    stop_loops=stop_loops).generate([[{"role": "user", "content": "kernel"}]])
    tokens = out[0][0].split()
    assert set(tokens) == {"0"}
    assert len(tokens) == (LOOP_WINDOW if stop_loops else budget)


@pytest.mark.parametrize("stop_loops", [True, False])
def test_each_completion_says_why_it_ended(stop_loops: bool) -> None:
    budget = LOOP_WINDOW + 100
    looping = HFBackend(_zero_head_model(), _IdsTokenizer(), max_new_tokens=budget,  # type: ignore[arg-type]
                        stop_loops=stop_loops).complete([[{"role": "user", "content": "kernel"}]])[0][0]
    assert (looping.finish_reason, looping.new_tokens) == (("loop", LOOP_WINDOW) if stop_loops else ("length", budget))
    ended = HFBackend(_RecordingModel(), _Tokenizer()).complete(  # type: ignore[arg-type]
        [[{"role": "user", "content": "kernel"}]], samples=2)[0]
    assert [(c.finish_reason, c.new_tokens) for c in ended] == [("stop", 0), ("stop", 0)]


def test_finish_reasons_of_rows_padded_after_their_end() -> None:
    ends, unit = {EOS, PAD}, [7, 8, 9]
    assert finish_reason([5, 6, EOS, PAD, PAD], ends, 100) == ("stop", 2)
    assert finish_reason([5, 6, 7, 8], ends, 4) == ("length", 4)
    assert finish_reason(unit * (LOOP_WINDOW // 3 + 1) + [PAD], ends, 10_000)[0] == "loop"  # LoopStop, then padding
    assert finish_reason([5, 6, 7], ends, 100) == ("loop", 3)  # no end short of the budget: a criterion ended it
    assert set(FINISH_REASONS) == {"stop", "length", "loop"}


def test_a_static_cache_is_asked_of_generate_only_when_chosen() -> None:
    for static in (False, True):
        model = _RecordingModel()
        HFBackend(model, _Tokenizer(), static_cache=static).generate(  # type: ignore[arg-type]
            [[{"role": "user", "content": "kernel"}]])
        assert model.calls[0].get("cache_implementation") == ("static" if static else None)


@pytest.mark.parametrize("sample", [False, True])
def test_a_loop_ends_with_the_end_of_sequence_token_where_no_criterion_can_be_given(sample: bool) -> None:
    """`end_loops_with_eos` (RL's rollouts): a caller's processor that makes token 0 all but certain makes
    the row loop on it, greedy or sampled; after the window the next token is EOS and the row ends there."""
    model = _zero_head_model()
    end_loops_with_eos(model, EOS)
    prompt = torch.tensor([[5, 6, 7]])

    class ZeroFirst(LogitsProcessor):
        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
            scores[:, 0] += 100.0
            return scores

    with torch.no_grad():
        out = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=LOOP_WINDOW + 50,
                             do_sample=sample, temperature=0.7 if sample else None, top_p=0.9 if sample else None,
                             pad_token_id=PAD + 1, eos_token_id=EOS,
                             logits_processor=LogitsProcessorList([ZeroFirst()]))
    assert out[0, prompt.shape[1]:].tolist() == [0] * LOOP_WINDOW + [EOS]


def test_loop_end_forces_eos_on_looping_rows_only() -> None:
    looping = [3] * 10 + [4, 5] * 150
    honest = [3] * 10 + [i % 97 + 6 for i in range(300)]
    scores = torch.zeros(2, 120)
    forced = LoopEnd(prompt_len=10, eos_token_id=EOS)(torch.tensor([looping, honest]), scores)  # type: ignore[arg-type]
    assert forced[0].argmax().item() == EOS and torch.isinf(forced[0]).sum().item() == 119
    assert torch.equal(forced[1], scores[1])
