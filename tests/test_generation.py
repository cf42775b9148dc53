"""The sampling arguments of transformers' `generate`, made in one place for evaluation and the server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch
from transformers import BatchEncoding

from kernelwright.generation import HFBackend, generate_kwargs
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
