"""The sequential backend's loop stop: a candidate caught in a repetition loop ends there (finish_reason
`length`), streamed or not, while the other rows of its generate call go on to their own end."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import torch

from kernelwright.generation import LOOP_WINDOW
from kernelwright.serving.backend import Sampling
from kernelwright.serving.generate_queue import Job, _cut, _RowsDone, _RowStreamer
from kernelwright.serving.hf import HFServingBackend

PAD, EOS = 1, 2


def _zero_head_model() -> Any:
    """A one-layer Llama whose output layer is zero: greedy decoding writes token 0 forever (a loop)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048,
                      pad_token_id=PAD, eos_token_id=EOS)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.zero_()
    return model


class _Tokenizer:
    """Every prompt is three tokens; a token decodes to its number and a space."""

    pad_token_id, eos_token_id = PAD, EOS

    def __call__(self, text: str, **_: Any) -> dict[str, list[int]]:
        return {"input_ids": [5, 6, 7]}

    def decode(self, tokens: list[int], **_: Any) -> str:
        return "".join(f"{t} " for t in tokens if t not in (PAD, EOS))


@pytest.mark.parametrize("stop_loops", [True, False])
def test_a_looping_candidate_ends_at_the_window_streamed_or_not(stop_loops: bool) -> None:
    budget = LOOP_WINDOW + 60
    backend = HFServingBackend(_zero_head_model(), _Tokenizer(), max_batch_sequences=4, stop_loops=stop_loops)
    sampling = Sampling(max_new_tokens=budget)

    async def ask() -> tuple[list[Any], list[str], Any]:
        done = await backend.generate(["a", "b"], sampling)
        pieces, last = [], None
        async for item in backend.stream("c", sampling):
            if isinstance(item, str):
                pieces.append(item)
            else:
                last = item
        return done, pieces, last

    try:
        done, pieces, streamed = asyncio.run(ask())
    finally:
        backend.close()
    expected = LOOP_WINDOW if stop_loops else budget
    for completion in [*done, streamed]:
        assert completion.completion_tokens == expected and completion.finish_reason == "length"
        assert completion.text == "0 " * expected
    assert "".join(pieces) == streamed.text  # nothing streamed past the stop


def test_only_the_looping_row_stops_and_the_cut_and_stream_follow_it() -> None:
    width, honest_len = 3, LOOP_WINDOW + 10
    honest = [5, 6, 7] + [i % 97 + 3 for i in range(honest_len)]
    looping = [5, 6, 7] + [4, 8, 9] * ((honest_len + 2) // 3)
    looping = looping[:len(honest)]
    cancelled = [threading.Event(), threading.Event()]
    rows = _RowsDone(width, [1000, 1000], cancelled, stop_loops=True)
    assert rows(torch.tensor([looping, honest]), None).tolist() == [True, False]  # type: ignore[arg-type]
    assert rows.loop_at == [honest_len, None]
    off = _RowsDone(width, [1000, 1000], cancelled, stop_loops=False)
    assert off(torch.tensor([looping, honest]), None).tolist() == [False, False]  # type: ignore[arg-type]
    assert _cut(looping[width:] + [PAD] * 5, 1000, EOS, rows.loop_at[0]) == looping[width:]
    assert _cut([3, 4, EOS, 5], 1000, EOS, 3) == [3, 4, EOS]  # the end of sequence came first
    assert _cut([3, 4, 5, 6], 2, EOS, 3) == [3, 4]  # so did the budget

    loop = asyncio.new_event_loop()
    try:
        job = Job([[5, 6, 7]], Sampling(max_new_tokens=1000), True, loop)
        streamer = _RowStreamer([job], [1000], EOS, rows.loop_at[:1])
        streamer.put(torch.tensor([4]))  # the step after the stop: the row is padding now
        assert streamer.made == [0]
    finally:
        loop.close()
