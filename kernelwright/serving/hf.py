"""The `hf` backend without continuous batching (`batching: sequential`, or `auto` on a model the engine
cannot hold): transformers' own `generate` on the loaded model, with dynamic batching.

Prompts are tokenized on the event loop (a prompt too long for the context answers 400 before it
waits); generation runs on one worker thread (generate_queue.py), where the requests waiting when
the model is free and whose sampling is compatible share one left-padded `generate` call, up to
`max_batch_sequences` candidates (0: one request at a time). A seeded request with temperature > 0
runs alone, so `seed` is honoured. The event loop stays free for health checks, queue answers and
streaming. On a CUDA device the calls use a static KV cache (`kv_cache`; generate_queue.py pads them
to few shapes, so transformers compiles the decoding step a few times, not once a batch). A client
that goes away (streaming or not) takes its rows out at the next token; the other requests of its
batch go on.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import Any

from kernelwright.serving.backend import Completion, EmptyPrompt, Prompt, PromptTooLong, Sampling
from kernelwright.serving.batching import TextDeltas
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.generate_queue import GenerateQueue, Job

WARM_UP_PROMPT = "__global__ void kernel("  # any short prompt: the warm-up's shape does not depend on its text


class HFServingBackend:
    def __init__(self, model: Any, tokenizer: Any, max_batch_sequences: int = ServeConfig.max_batch_sequences,
                 stop_loops: bool = ServeConfig.stop_loops, static_cache: bool = False) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.eos: int | None = tokenizer.eos_token_id
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos
        self.queue = GenerateQueue(model, self.eos, 0 if pad is None else int(pad), max_batch_sequences, stop_loops,
                                   static_cache)
        weakref.finalize(self, self.queue.close)  # a backend let go of (the old version after a reload)

    def warm_up(self, budget: int) -> float | None:
        """The static cache's decoding step compiled for requests of `budget` new tokens (GenerateQueue.warm_up):
        the seconds it took, None where nothing was compiled (the dynamic cache)."""
        ids = [int(i) for i in self.tokenizer(WARM_UP_PROMPT, add_special_tokens=False)["input_ids"]]
        return self.queue.warm_up(ids or [self.queue.pad], budget)

    def check_sampling(self, sampling: Sampling) -> None:
        """Every setting is honoured: a seeded request with temperature > 0 is generated alone, after reseeding."""

    def close(self) -> None:
        """Requests still waiting answer 503, those generating stop at the next token; a later request starts again."""
        self.queue.close()

    async def health(self) -> str | None:
        """The model is in this process: able to generate while the process runs."""
        return None

    def _text(self, prompt: Prompt) -> str:
        if isinstance(prompt, str):
            return prompt
        return str(self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False))

    def _encode(self, prompt: Prompt, sampling: Sampling) -> list[int]:
        """The prompt's token ids; PromptTooLong when it and the token budget do not fit the context."""
        ids = [int(i) for i in self.tokenizer(self._text(prompt), add_special_tokens=False)["input_ids"]]
        if not ids:
            raise EmptyPrompt("the prompt has no tokens: there is nothing to continue from")
        context = getattr(self.model.config, "max_position_embeddings", None)
        if context and len(ids) + sampling.max_new_tokens > context:
            raise PromptTooLong(f"the prompt ({len(ids)} tokens) and max_new_tokens ({sampling.max_new_tokens}) "
                                f"exceed the model's context of {context} tokens")
        return ids

    def _submit(self, prompts: Sequence[Prompt], sampling: Sampling, streaming: bool) -> Job:
        encoded = [self._encode(p, sampling) for p in prompts]
        job = Job(encoded, sampling, streaming, asyncio.get_running_loop())
        self.queue.submit(job)
        return job

    def _completion(self, n_prompt: int, tokens: list[int], sampling: Sampling) -> Completion:
        text = str(self.tokenizer.decode(tokens, skip_special_tokens=True))
        ended = bool(tokens) and tokens[-1] == self.eos
        # the queue ends a row at its end-of-sequence token, its budget or (stop_loops) a repetition loop, and cuts
        # it there (generate_queue._cut): a row that did not end with the token was cut, at the budget or the loop
        finish = "stop" if ended else "length"
        return Completion(text, n_prompt, len(tokens), finish)

    async def generate(self, prompts: Sequence[Prompt], sampling: Sampling) -> list[Completion]:
        """The completions; a cancelled caller (its client went away) takes its rows out at the next token."""
        job = self._submit(prompts, sampling, streaming=False)
        try:
            rows = await job.result()
        finally:
            job.cancelled.set()  # a no-op once its rows are done
        return [self._completion(len(ids), row, sampling) for ids, row in zip(job.prompts, rows, strict=True)]

    async def stream(self, prompt: Prompt, sampling: Sampling) -> AsyncIterator[str | Completion]:
        """Text deltas as the tokens come, then the whole completion."""
        job = self._submit([prompt], sampling, streaming=True)
        deltas, tokens = TextDeltas(self.tokenizer), list[int]()
        try:
            while True:
                event = await job.events.get()
                while isinstance(event, int) and not job.events.empty():  # decode once for what has come
                    tokens.append(event)
                    event = job.events.get_nowait()
                if isinstance(event, BaseException):
                    raise event
                if isinstance(event, list):
                    rows = event
                    break
                tokens.append(event)
                if piece := deltas.update(tokens):
                    yield piece
        finally:
            job.cancelled.set()
        done = self._completion(len(job.prompts[0]), rows[0], sampling)
        if piece := deltas.update(rows[0]) + deltas.rest():
            yield piece
        yield done
