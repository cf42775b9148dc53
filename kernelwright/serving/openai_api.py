"""OpenAI-compatible chat completions and completions, with each choice's compile result.

Non-streaming answers are one JSON object; `stream: true` answers Server-Sent Events: one
`data:` chunk per text delta (the choices of a request are generated together, their chunks
interleaved as they come), a last chunk per choice carrying `finish_reason` and the extra
`kernelwright` field, then `data: [DONE]`; with `stream_options.include_usage`, every chunk carries
`usage: null` and one more chunk, with no choices and the request's `usage`, comes before `[DONE]`.
Parameters this server cannot honour answer 400, as does n > 1 at temperature 0 (the choices could
only repeat each other; left out, temperature is 1, as OpenAI's). The status line of a stream
waits for its first piece, so a backend that fails at once (a remote engine down or refusing a
setting) answers its own status, not a 200 holding only an error event.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from kernelwright.prompting import extract_code
from kernelwright.serving import compiling, metrics
from kernelwright.serving.backend import (
    Completion,
    EngineBusy,
    EngineError,
    Prompt,
    PromptTooLong,
    Sampling,
    SamplingRefused,
    ServingBackend,
)
from kernelwright.serving.bodies import bad_field
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.kernels import check_limit, temperature_for
from kernelwright.serving.schemas import (
    ChatChoice,
    ChatCompletion,
    ChatCompletionRequest,
    ChatMessage,
    CompletionRequest,
    KernelwrightExtra,
    TextChoice,
    TextCompletion,
)

OpenAIRequest = ChatCompletionRequest | CompletionRequest
log = logging.getLogger(__name__)
DEFAULT_TEMPERATURE = 1.0  # OpenAI's, for a body that leaves temperature out


def _unsupported(req: OpenAIRequest) -> str | None:
    """The first field that asks for something this server does not do (null, empty and "none" ask for nothing)."""
    checks = {"stop": bool(req.stop), "tools": bool(req.tools), "logprobs": bool(req.logprobs),
              "response_format": req.response_format not in (None, {"type": "text"}),
              "presence_penalty": req.presence_penalty != 0, "frequency_penalty": req.frequency_penalty != 0,
              "logit_bias": bool(req.logit_bias)}
    if isinstance(req, ChatCompletionRequest):
        checks |= {"store": req.store is True, "top_logprobs": bool(req.top_logprobs),
                   "tool_choice": req.tool_choice not in (None, "none"), "functions": bool(req.functions),
                   "function_call": req.function_call not in (None, "none"),
                   "modalities": req.modalities not in (None, ["text"]), "audio": req.audio is not None,
                   "prediction": req.prediction is not None, "reasoning_effort": req.reasoning_effort is not None}
    return next((name for name, bad in checks.items() if bad), None)


def _check_parts(req: ChatCompletionRequest) -> None:
    """A 400 naming the first content part that is not text with its text (the model reads text only)."""
    for i, message in enumerate(req.messages):
        for j, part in enumerate(message.content if isinstance(message.content, list) else ()):
            if part.type != "text" or part.text is None:
                what = "a text part without its text" if part.type == "text" else f"a part of type {part.type!r}"
                raise bad_field(f"messages[{i}].content[{j}]", f"only text content parts are served, not {what}")


def prompt_of(req: OpenAIRequest) -> Prompt:
    """The backend's prompt: a chat's messages (a `developer` message as the `system` one chat templates know)."""
    if isinstance(req, ChatCompletionRequest):
        return [{"role": "system" if m.role == "developer" else m.role, "content": m.text} for m in req.messages]
    return req.prompt


def sampling_of(req: OpenAIRequest, cfg: ServeConfig) -> Sampling:
    """The request's settings after the server's limits (a 400 naming the field otherwise)."""
    if (name := _unsupported(req)) is not None:
        raise bad_field(name, f"{name} is not supported by this server")
    if isinstance(req, ChatCompletionRequest):
        _check_parts(req)
    if req.stream_options is not None and not req.stream:
        raise bad_field("stream_options", "stream_options is only allowed with stream: true")
    tokens = req.max_completion_tokens or req.max_tokens or cfg.default_max_new_tokens
    check_limit("max_tokens", tokens, cfg.max_new_tokens, "tokens")
    check_limit("n", req.n, cfg.max_n, "choices")
    size = len(req.prompt) if isinstance(req, CompletionRequest) else sum(len(m.text) for m in req.messages)
    check_limit("messages" if isinstance(req, ChatCompletionRequest) else "prompt", size, cfg.max_code_chars,
                "characters")
    return Sampling(tokens, temperature_for(req.n, req.temperature, DEFAULT_TEMPERATURE), req.top_p, req.seed)


async def extras(texts: list[str], compile_check: bool, cfg: ServeConfig) -> list[KernelwrightExtra]:
    codes = [extract_code(t) for t in texts]
    if not compile_check:
        return [KernelwrightExtra(c, compiling.cuda_sources_of(c), None) for c in codes]
    checked = await compiling.check(codes, cfg)
    metrics.record_compiles([info for info, _ in checked])
    return [KernelwrightExtra(c, sources, info) for c, (info, sources) in zip(codes, checked, strict=True)]


def _usage(done: list[Completion]) -> dict[str, int]:
    prompt = done[0].prompt_tokens if done else 0
    completion = sum(c.completion_tokens for c in done)
    metrics.record_tokens(prompt, completion)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def complete(req: OpenAIRequest, backend: ServingBackend, cfg: ServeConfig,
                   model_id: str) -> ChatCompletion | TextCompletion:
    sampling = sampling_of(req, cfg)
    done = await backend.generate([prompt_of(req)] * req.n, sampling)
    more = await extras([c.text for c in done], req.compile_check, cfg)
    created, usage = int(time.time()), _usage(done)
    if isinstance(req, ChatCompletionRequest):
        chat = [ChatChoice(i, ChatMessage("assistant", c.text), c.finish_reason, x)
                for i, (c, x) in enumerate(zip(done, more, strict=True))]
        return ChatCompletion(f"chatcmpl-{uuid.uuid4().hex}", created, model_id, chat, usage)
    text = [TextChoice(i, c.text, c.finish_reason, x) for i, (c, x) in enumerate(zip(done, more, strict=True))]
    return TextCompletion(f"cmpl-{uuid.uuid4().hex}", created, model_id, text, usage)


class _Chunks:
    """Builds the stream's chunks in the shape of the request's kind."""

    def __init__(self, req: OpenAIRequest, model_id: str) -> None:
        self.chat = isinstance(req, ChatCompletionRequest)
        prefix = "chatcmpl" if self.chat else "cmpl"
        self.head: dict[str, Any] = {"id": f"{prefix}-{uuid.uuid4().hex}", "object": "chat.completion.chunk"
                                     if self.chat else "text_completion", "created": int(time.time()),
                                     "model": model_id}
        self.with_usage = req.stream_options is not None and req.stream_options.include_usage
        if self.with_usage:  # OpenAI's: every chunk says `usage: null`, but the last one before [DONE]
            self.head["usage"] = None

    def chunk(self, index: int, text: str | None, finish: str | None = None, extra: Any = None) -> str:
        if self.chat:
            choice: dict[str, Any] = {"index": index, "delta": {} if text is None else {"content": text}}
        else:
            choice = {"index": index, "text": text or "", "logprobs": None}
        choice["finish_reason"] = finish
        if extra is not None:
            choice["kernelwright"] = extra
        return msgspec.json.encode({**self.head, "choices": [choice]}).decode()

    def first(self, index: int) -> str | None:
        if not self.chat:
            return None
        body = {**self.head, "choices": [{"index": index, "delta": {"role": "assistant", "content": ""},
                                          "finish_reason": None}]}
        return msgspec.json.encode(body).decode()

    def usage(self, usage: dict[str, int]) -> str:
        """The chunk after every choice's last: no choices, the request's token counts."""
        return msgspec.json.encode({**self.head, "choices": [], "usage": usage}).decode()


class _Choices:
    """The choices of a streamed request, generated at once; their pieces come through one queue."""

    def __init__(self, req: OpenAIRequest, backend: ServingBackend, sampling: Sampling) -> None:
        self.held: list[tuple[int, str | Completion | Exception]] = []
        self.pieces: asyncio.Queue[tuple[int, str | Completion | Exception]] = asyncio.Queue()
        prompt = prompt_of(req)
        self.tasks = [asyncio.create_task(self._one(backend, prompt, sampling, i)) for i in range(req.n)]

    async def _one(self, backend: ServingBackend, prompt: Prompt, sampling: Sampling, index: int) -> None:
        try:
            async for piece in backend.stream(prompt, sampling):
                self.pieces.put_nowait((index, piece))
        except Exception as exc:  # handed to the consumer, which ends the stream with it
            self.pieces.put_nowait((index, exc))

    async def started(self) -> None:
        """Wait for the first piece: a backend that fails at once (its engine down) fails before any byte is sent."""
        try:
            self.held.append(await self.pieces.get())
            if isinstance(self.held[0][1], Exception):
                raise self.held[0][1]
        except BaseException:
            await self.stop()
            raise

    async def get(self) -> tuple[int, str | Completion | Exception]:
        return self.held.pop() if self.held else await self.pieces.get()

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()  # a client gone (or a failed choice) ends the other choices' generation too
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def stream(req: OpenAIRequest, backend: ServingBackend, cfg: ServeConfig,
                 model_id: str) -> AsyncIterator[str]:
    """The SSE `data:` payloads of a streamed answer (validated, and its first piece made, before any byte is sent).

    The request's choices are generated at once; each delta is sent as it comes, and each choice's
    last chunk (with its compile result) as soon as that choice is done."""
    sampling = sampling_of(req, cfg)
    backend.check_sampling(sampling)
    chunks = _Chunks(req, model_id)
    choices = _Choices(req, backend, sampling)
    await choices.started()

    async def events() -> AsyncIterator[str]:
        try:
            async for event in _events(req, cfg, choices, chunks):
                yield event
        except Exception as exc:  # the status line is sent: the error goes in the stream, OpenAI-style
            client = isinstance(exc, PromptTooLong | SamplingRefused)
            engine = isinstance(exc, EngineBusy | EngineError)
            if engine:
                log.warning("stream failed: %s", exc)
            elif not client:
                log.error("stream failed: %s", type(exc).__name__, exc_info=exc)
            message = str(exc) if client or engine else "internal error: see the server log"
            kind = "invalid_request_error" if client else "server_error"
            yield msgspec.json.encode({"error": {"message": message, "type": kind}}).decode()
        finally:
            await choices.stop()

    return events()


async def _events(req: OpenAIRequest, cfg: ServeConfig, choices: _Choices, chunks: _Chunks) -> AsyncIterator[str]:
    for index in range(req.n):
        if (first := chunks.first(index)) is not None:
            yield first
    done: dict[int, Completion] = {}
    while len(done) < req.n:
        index, piece = await choices.get()
        if isinstance(piece, Exception):
            raise piece
        if isinstance(piece, Completion):
            done[index] = piece
            (extra,) = await extras([piece.text], req.compile_check, cfg)
            yield chunks.chunk(index, None, piece.finish_reason, msgspec.to_builtins(extra))
        else:
            yield chunks.chunk(index, piece)
    usage = _usage([done[i] for i in range(req.n)])
    if chunks.with_usage:
        yield chunks.usage(usage)
    yield "[DONE]"
