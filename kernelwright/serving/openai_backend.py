"""The `openai` backend: generation by a remote OpenAI-compatible engine (vLLM, SGLang, TGI, `transformers serve`).

    kernelwright serve --backend openai --backend_url http://127.0.0.1:8001 [--backend_model ID] \\
        [--backend_api_key_env ENGINE_KEY]

Only the generation moves to the engine; the compile check, repair, metrics, keys, limits and the
request log stay in kernelwright. Every candidate is one request (some engines, `transformers
serve` among them, ignore `n`): chat prompts go to `/v1/chat/completions`, raw text prompts to
`/v1/completions` (an engine without that route, answering 404 or 405, gets them as one user
message on the chat route from then on). Each request sends `max_tokens`, `temperature`, `top_p`,
and `seed` when one is set: candidate i of one `generate` call gets seed + i, so that a seeded
request's candidates differ as those of one seeded batch do; the choices of a streamed request
share the seed. Streams ask for the usage (`stream_options.include_usage`; dropped for an engine
that refuses it) and end at `data: [DONE]` or at the end of the body after a `finish_reason`.

Token counts are the engine's `usage`. An engine that sends none gets an estimate instead: the
whitespace-separated words of the prompt and of the text (as the scripted backend counts).

Failures are one line, never a traceback:
- the engine cannot be reached, or answers 503 or 429: `EngineBusy` (503 with Retry-After);
- it takes longer than `backend_timeout_s`: `EngineError` 504;
- another error status, a broken connection, a body that is not an OpenAI completion, or an error
  in the middle of a stream: `EngineError` 502, with the engine's own message (a stream fails
  before its status line when its first piece fails; later, its last event is the error);
- a 4xx whose message names a sampling field that was sent (`seed`, `temperature`, `top_p`,
  `max_tokens`): `SamplingRefused` (400 naming it, `max_new_tokens` for `max_tokens`); one about
  the context length: `PromptTooLong` (400 naming `max_new_tokens`).

The engine's key comes from the environment variable `backend_api_key_env` names and is sent as a
bearer token; it is never logged, and masked in any message the engine echoes it in. Waiting for
the engine at start-up, and the loader, are in openai_startup.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from kernelwright import jsontext
from kernelwright.errors import UsageError
from kernelwright.serving.backend import (
    Completion,
    EngineBusy,
    EngineError,
    Prompt,
    PromptTooLong,
    Sampling,
    SamplingRefused,
    prompt_text,
)
from kernelwright.serving.config import ServeConfig
from kernelwright.workdir import redacted

log = logging.getLogger(__name__)
MESSAGE_CHARS = 300  # of an engine's error message, in ours
SEED_LIMIT = 2**63
HEALTH_TIMEOUT_S = 5.0  # for one /readyz probe of the engine
CHAT, TEXT = "/v1/chat/completions", "/v1/completions"
LENGTH = {"length", "max_tokens", "model_length"}  # finish reasons that mean the token budget ran out
FAILED = {"abort", "error"}  # finish reasons that mean there is no answer
# sampling fields as the engine names them -> as kernelwright's APIs name them (in a 400)
FIELDS = {"seed": "seed", "temperature": "temperature", "top_p": "top_p", "max_tokens": "max_new_tokens"}
CONTEXT = re.compile(r"context (length|window)|maximum (sequence|model) length|prompt is too long", re.I)


@dataclass(frozen=True)
class EngineSettings:
    """Where the engine is and how long to wait for it (`ServeConfig`'s backend_* fields)."""

    base_url: str  # without a trailing /v1
    model: str | None = None  # None: the one model the engine lists
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 300.0  # per answer, or between two streamed chunks; 0: no limit
    connect_timeout_s: float = 10.0  # 0: no limit
    startup_s: float = 120.0  # of retrying /v1/models at start-up; 0: one try
    health_s: float = 5.0  # how long /readyz trusts the engine's last answer; 0: asks at every probe

    @classmethod
    def from_config(cls, cfg: ServeConfig) -> EngineSettings:
        """The settings; a UsageError when the key's variable is named but not set."""
        key = None
        if cfg.backend_api_key_env:
            key = os.environ.get(cfg.backend_api_key_env, "").strip()
            if not key:
                raise UsageError(f"backend_api_key_env names {cfg.backend_api_key_env}, which is not set (or is "
                                 "empty) in the environment")
        url = (cfg.backend_url or "").rstrip("/").removesuffix("/v1")
        return cls(url, cfg.backend_model, key, cfg.backend_timeout_s, cfg.backend_connect_timeout_s,
                   cfg.backend_startup_s, cfg.backend_health_s)

    @property
    def where(self) -> str:
        return redacted(self.base_url)

    def client(self, transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
        timeout = httpx.Timeout(self.timeout_s or None, connect=self.connect_timeout_s or None, pool=None)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    def mask(self, text: str) -> str:
        """`text` in one line of at most MESSAGE_CHARS, with the key (should the engine echo it) masked."""
        text = " ".join(text.split())[:MESSAGE_CHARS]
        return text.replace(self.api_key, "***") if self.api_key else text


def message_of(response: httpx.Response) -> str:
    """The engine's error message: OpenAI's `error.message`, FastAPI's `detail`, or the body's text."""
    try:
        body = jsontext.loads(response.content)
    except ValueError:  # not JSON (or nested deeper than the parser goes)
        return response.text or response.reason_phrase
    if isinstance(body, dict):
        found = body.get("error") or body.get("detail") or body.get("message")
        if isinstance(found, dict):
            found = found.get("message")
        if isinstance(found, list):  # FastAPI's validation errors: [{"loc": [...], "msg": ...}]
            found = "; ".join(f"{'.'.join(map(str, e.get('loc', [])))}: {e.get('msg')}" for e in found
                              if isinstance(e, dict))
        if isinstance(found, str) and found:
            return found
    return response.text


def transport_error(exc: httpx.HTTPError, settings: EngineSettings) -> Exception:
    """What an exception of httpx means for the client: 503 (not reached), 504 (too slow) or 502."""
    what = settings.mask(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return EngineBusy(f"the engine at {settings.where} cannot be reached ({what}): retry later")
    if isinstance(exc, httpx.TimeoutException):
        return EngineError(f"the engine at {settings.where} did not answer within backend_timeout_s "
                           f"({settings.timeout_s:g} s)", 504)
    return EngineError(f"the connection to the engine at {settings.where} broke ({what})")


def status_error(response: httpx.Response, sent: dict[str, Any], settings: EngineSettings) -> Exception:
    """What an error status of the engine means for the client (see the module's docstring)."""
    status, message = response.status_code, settings.mask(message_of(response))
    if status in (429, 503):
        return EngineBusy(f"the engine at {settings.where} is busy or unavailable ({status}): {message}")
    if status in (401, 403):
        return EngineError(f"the engine at {settings.where} refused the key ({status}): check backend_api_key_env")
    if 400 <= status < 500:
        if CONTEXT.search(message):
            return PromptTooLong(f"the engine refused the prompt and token budget: {message}")
        for name, ours in FIELDS.items():
            if name in sent and re.search(rf"\b{name}\b", message):
                return SamplingRefused(ours, f"the engine refused {ours}: {message}")
    return EngineError(f"the engine at {settings.where} answered {status}: {message}")


def garbage(settings: EngineSettings, what: str) -> EngineError:
    return EngineError(f"the engine at {settings.where} answered something that is not {what}")


def payload(text: str, settings: EngineSettings, what: str) -> dict[str, Any]:
    try:
        body = jsontext.loads(text)
    except ValueError:  # not JSON, or nested deeper than the parser goes
        raise garbage(settings, what) from None
    if not isinstance(body, dict):
        raise garbage(settings, what)
    if "error" in body and not body.get("choices"):  # an error the engine put where an answer was due
        error = body["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise EngineError(f"the engine at {settings.where} failed: {settings.mask(str(message))}")
    return body


def _choices(body: dict[str, Any], settings: EngineSettings) -> list[dict[str, Any]]:
    choices = body.get("choices")
    if choices is None:
        return []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise garbage(settings, "an OpenAI completion")
    return choices


def _text(choice: dict[str, Any], chat: bool, settings: EngineSettings) -> str:
    """The text of a choice or of a streamed chunk's choice ('' when it holds none)."""
    holder = (choice.get("message") or choice.get("delta")) if chat else choice
    text = holder.get("content" if chat else "text") if isinstance(holder, dict) else None
    if text is not None and not isinstance(text, str):
        raise garbage(settings, "an OpenAI completion")
    return text or ""


def _usage(usage: Any) -> tuple[int, int] | None:
    if not isinstance(usage, dict):
        return None
    counts = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        return counts[0], counts[1]  # type: ignore[return-value]
    return None


def _words(text: str) -> int:
    return len(text.split())


def seed_of(seed: int | None, index: int) -> int | None:
    """The seed of candidate `index` of one request (None stays None)."""
    return None if seed is None else (seed + index) % SEED_LIMIT


class OpenAIBackend:
    """A `ServingBackend` over a remote engine's OpenAI routes (httpx.AsyncClient, made on the loop that uses it)."""

    def __init__(self, settings: EngineSettings, model: str, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings, self.model, self._transport = settings, model, transport
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.chat_only = False  # the engine has no /v1/completions: raw prompts go to chat as one user message
        self.usage_option = True  # the engine takes stream_options
        self._health: tuple[float, str | None] | None = None  # (when asked, on the loop's clock; the answer)

    def __repr__(self) -> str:
        return f"OpenAIBackend({self.settings.where!r}, model={self.model!r})"

    def check_sampling(self, sampling: Sampling) -> None:
        """Nothing is known beforehand: a setting the engine refuses answers 400 naming it when it does."""

    async def health(self) -> str | None:
        """None while the engine answers its model list (or /health, for an engine without one) with 200
        and still lists the model; else why not. An answer is kept for `health_s` seconds, so a load
        balancer's frequent probes do not each reach the engine."""
        now = asyncio.get_running_loop().time()
        if self._health is not None and now - self._health[0] < self.settings.health_s:
            return self._health[1]
        answer = await self._ask_health()
        self._health = (now, answer)
        return answer

    async def _ask_health(self) -> str | None:
        try:
            response = await self._http().get("/v1/models", timeout=HEALTH_TIMEOUT_S)
            if response.status_code == 404:
                health = await self._http().get("/health", timeout=HEALTH_TIMEOUT_S)
                return None if health.status_code == 200 else f"the engine's /health answered {health.status_code}"
            if response.status_code != 200:
                why = self.settings.mask(message_of(response))
                return f"the engine's /v1/models answered {response.status_code}: {why}"
            data = jsontext.loads(response.text).get("data")
            ids = [m.get("id") for m in data if isinstance(m, dict)] if isinstance(data, list) else []
            return None if self.model in ids else f"the engine no longer lists {self.model!r}"
        except httpx.HTTPError as exc:
            return str(transport_error(exc, self.settings))
        except (ValueError, AttributeError):
            return "the engine's /v1/models answered something that is not a model list"

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:  # a client belongs to the loop that made it
            self._client, self._loop = self.settings.client(self._transport), loop
        return self._client

    def close(self) -> None:
        """Close the connections to the engine (from the loop's thread or another one)."""
        client, loop, self._client = self._client, self._loop, None
        if client is None or loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            if asyncio.get_running_loop() is loop:
                loop.create_task(client.aclose())
                return
        if loop.is_running():
            with contextlib.suppress(Exception):  # a loop that stops meanwhile leaves the sockets to the process
                asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=5)

    def _body(self, prompt: Prompt, sampling: Sampling, seed: int | None, stream: bool) -> tuple[str, dict[str, Any]]:
        chat = not isinstance(prompt, str) or self.chat_only
        body: dict[str, Any] = {"model": self.model, "max_tokens": sampling.max_new_tokens,
                                "temperature": sampling.temperature, "top_p": sampling.top_p}
        if seed is not None:
            body["seed"] = seed
        if chat:
            body["messages"] = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        else:
            body["prompt"] = prompt
        if stream:
            body["stream"] = True
            if self.usage_option:
                body["stream_options"] = {"include_usage": True}
        return (CHAT if chat else TEXT), body

    def _adapt(self, response: httpx.Response, path: str, body: dict[str, Any]) -> bool:
        """Learn from a refusal what this engine lacks; True when the request is worth sending again."""
        if path == TEXT and response.status_code in (404, 405):
            log.warning("the engine at %s has no %s: raw prompts go to %s as one user message", self.settings.where,
                        TEXT, CHAT)
            self.chat_only = True
            return True
        if "stream_options" in body and 400 <= response.status_code < 500 and "stream_options" in message_of(response):
            self.usage_option = False
            return True
        return False

    def _completion(self, prompt: Prompt, text: str, finish: Any, usage: Any) -> Completion:
        if finish in FAILED:
            raise EngineError(f"the engine at {self.settings.where} ended the answer with finish_reason {finish!r}")
        counts = _usage(usage) or (_words(prompt_text(prompt)), _words(text))
        return Completion(text, counts[0], counts[1], "length" if finish in LENGTH else "stop")

    async def _one(self, prompt: Prompt, sampling: Sampling, seed: int | None) -> Completion:
        for _ in range(3):
            path, body = self._body(prompt, sampling, seed, stream=False)
            try:
                response = await self._http().post(path, json=body)
            except httpx.HTTPError as exc:
                raise transport_error(exc, self.settings) from None
            if response.status_code == 200:
                answer = payload(response.text, self.settings, "an OpenAI completion")
                choices = _choices(answer, self.settings)
                if not choices:
                    raise garbage(self.settings, "an OpenAI completion (no choices)")
                text = _text(choices[0], path == CHAT, self.settings)
                return self._completion(prompt, text, choices[0].get("finish_reason"), answer.get("usage"))
            if not self._adapt(response, path, body):
                raise status_error(response, body, self.settings)
        raise EngineError(f"the engine at {self.settings.where} refused every form of the request")

    async def generate(self, prompts: Sequence[Prompt], sampling: Sampling) -> list[Completion]:
        """One request per prompt, all at once; the first failure cancels the others and is raised."""
        jobs = [asyncio.ensure_future(self._one(p, sampling, seed_of(sampling.seed, i))) for i, p in enumerate(prompts)]
        try:
            done, _ = await asyncio.wait(jobs, return_when=asyncio.FIRST_EXCEPTION)
            failed = next((j.exception() for j in jobs if j in done and not j.cancelled() and j.exception()), None)
            if failed is not None:
                raise failed
            return [j.result() for j in jobs]
        finally:
            for job in jobs:
                job.cancel()
            await asyncio.gather(*jobs, return_exceptions=True)

    async def stream(self, prompt: Prompt, sampling: Sampling) -> AsyncIterator[str | Completion]:
        """The engine's text deltas as they come, then the whole completion."""
        for _ in range(3):
            path, body = self._body(prompt, sampling, sampling.seed, stream=True)
            try:
                async with self._http().stream("POST", path, json=body) as response:
                    if response.status_code != 200:
                        await response.aread()
                        if self._adapt(response, path, body):
                            continue
                        raise status_error(response, body, self.settings)
                    async for piece in self._pieces(response, prompt, path == CHAT):
                        yield piece
                    return
            except httpx.HTTPError as exc:
                raise transport_error(exc, self.settings) from None
        raise EngineError(f"the engine at {self.settings.where} refused every form of the request")

    async def _pieces(self, response: httpx.Response, prompt: Prompt, chat: bool) -> AsyncIterator[str | Completion]:
        parts: list[str] = []
        finish: Any = None
        usage: Any = None
        events = 0
        async for data in _sse_data(response):
            events += 1
            chunk = payload(data, self.settings, "an OpenAI stream chunk")
            usage = chunk.get("usage") or usage
            for choice in _choices(chunk, self.settings):
                if piece := _text(choice, chat, self.settings):
                    parts.append(piece)
                    yield piece
                finish = choice.get("finish_reason") or finish
        if not events:
            raise garbage(self.settings, "an OpenAI stream (no data: events)")
        if finish is None:
            raise EngineError(f"the engine at {self.settings.where} ended its stream before the answer's end")
        yield self._completion(prompt, "".join(parts), finish, usage)


async def _sse_data(response: httpx.Response) -> AsyncIterator[str]:
    """The `data:` payloads of a Server-Sent Events body, up to `[DONE]` or the body's end."""
    lines: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
        elif not line.strip() and lines:
            data, lines = "\n".join(lines), []
            if data.strip() == "[DONE]":
                return
            yield data
        # `event:`, `id:`, `retry:` and comments carry nothing for a completion
    if lines and "\n".join(lines).strip() != "[DONE]":
        yield "\n".join(lines)
