"""The `hf` backend with `batching: sequential`: transformers' own `generate` on the loaded model.

Generation runs in one dedicated worker thread: requests are served one batch at a time (a
request's n candidates are one batch), in arrival order, and the event loop stays free for health
checks, queue answers and streaming. Streaming uses `TextIteratorStreamer`; a client that goes
away (streaming or not) stops its generation at the next token.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

from kernelwright.serving.backend import Completion, Prompt, PromptTooLong, Sampling


class _StopWhen(StoppingCriteria):
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:
        return self.event.is_set()


def _generation_kwargs(tok: Any, sampling: Sampling) -> dict[str, Any]:
    sample = sampling.temperature > 0
    return {
        "max_new_tokens": sampling.max_new_tokens,
        "do_sample": sample,
        "temperature": sampling.temperature if sample else None,
        "top_p": sampling.top_p if sample else None,
        "top_k": None,
        "pad_token_id": tok.pad_token_id,
        "eos_token_id": tok.eos_token_id,
    }


def _seed(sampling: Sampling) -> None:
    if sampling.seed is not None:
        torch.manual_seed(sampling.seed)


def _new_length(row: list[int], eos: int | None, pad: int | None) -> int:
    """Tokens generated in one output row: up to and including the first end-of-sequence token."""
    for i, t in enumerate(row):
        if t == eos:
            return i + 1
        if t == pad:
            return i
    return len(row)


@dataclass
class HFServingBackend:
    model: Any
    tokenizer: Any
    _pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, "kernelwright-generate"))

    def check_sampling(self, sampling: Sampling) -> None:
        """Every setting is honoured: seed reseeds torch before the request's generate."""

    def close(self) -> None:
        """Nothing to stop: the worker thread idles until the process ends."""

    async def health(self) -> str | None:
        """The model is in this process: able to generate while the process runs."""
        return None

    def _text(self, prompt: Prompt) -> str:
        if isinstance(prompt, str):
            return prompt
        return str(self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False))

    def _encode(self, prompts: Sequence[Prompt], sampling: Sampling) -> Any:
        """Left-padded input ids (on the worker thread: the tokenizer is shared)."""
        tok = self.tokenizer
        tok.padding_side = "left"
        texts = [self._text(p) for p in prompts]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.model.device)
        context = getattr(self.model.config, "max_position_embeddings", None)
        length = int(enc["input_ids"].shape[1])
        if context and length + sampling.max_new_tokens > context:
            raise PromptTooLong(f"the prompt ({length} tokens) and max_new_tokens ({sampling.max_new_tokens}) "
                                f"exceed the model's context of {context} tokens")
        return enc

    @torch.inference_mode()
    def _generate_sync(self, prompts: Sequence[Prompt], sampling: Sampling, stop: threading.Event) -> list[Completion]:
        tok = self.tokenizer
        if stop.is_set():  # cancelled while it waited for the worker
            return []
        enc = self._encode(prompts, sampling)
        _seed(sampling)
        out = self.model.generate(**enc, **_generation_kwargs(tok, sampling),
                                  stopping_criteria=StoppingCriteriaList([_StopWhen(stop)]))
        start = enc["input_ids"].shape[1]
        prompt_lengths = enc["attention_mask"].sum(dim=1).tolist()
        completions = []
        for row, n_prompt in zip(out[:, start:].tolist(), prompt_lengths, strict=True):
            n = _new_length(row, tok.eos_token_id, tok.pad_token_id)
            text = tok.decode(row[:n], skip_special_tokens=True)
            finish = "length" if n >= sampling.max_new_tokens and row[n - 1] != tok.eos_token_id else "stop"
            completions.append(Completion(text, int(n_prompt), n, finish))
        return completions

    async def generate(self, prompts: Sequence[Prompt], sampling: Sampling) -> list[Completion]:
        """The completions; a cancelled caller (its client went away) stops the generation at the next token."""
        loop, stop = asyncio.get_running_loop(), threading.Event()
        try:
            return await loop.run_in_executor(self._pool, self._generate_sync, list(prompts), sampling, stop)
        finally:
            stop.set()

    @torch.inference_mode()
    def _stream_sync(self, prompt: Prompt, sampling: Sampling, streamer: Any, stop: threading.Event,
                     counts: list[int]) -> None:
        tok = self.tokenizer
        try:
            enc = self._encode([prompt], sampling)
            counts.append(int(enc["attention_mask"].sum()))
            _seed(sampling)
            out = self.model.generate(**enc, **_generation_kwargs(tok, sampling), streamer=streamer,
                                      stopping_criteria=StoppingCriteriaList([_StopWhen(stop)]))
            counts.append(_new_length(out[0, enc["input_ids"].shape[1]:].tolist(), tok.eos_token_id,
                                      tok.pad_token_id))
        finally:
            streamer.end()

    async def stream(self, prompt: Prompt, sampling: Sampling) -> AsyncIterator[str | Completion]:
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
        stop, counts, pieces = threading.Event(), list[int](), list[str]()
        loop = asyncio.get_running_loop()
        job = loop.run_in_executor(self._pool, self._stream_sync, prompt, sampling, streamer, stop, counts)
        try:
            while (piece := await asyncio.to_thread(next, streamer, None)) is not None:
                if piece:
                    pieces.append(piece)
                    yield piece
            await job
        finally:
            stop.set()
        n_prompt, n = counts[0], counts[1]
        finish = "length" if n >= sampling.max_new_tokens else "stop"
        yield Completion("".join(pieces), n_prompt, n, finish)
