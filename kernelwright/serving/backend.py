"""What the server generates with: the `ServingBackend` protocol and the scripted test/demo backend.

A backend takes prompts (chat messages, or a raw text prompt) and per-request sampling settings
and answers completions with token counts; `stream` yields text deltas and then the whole
`Completion`. `check_sampling` refuses, before any work, a setting the backend cannot honour
(`SamplingRefused`: a 400 naming the field), so that nothing a client asks for is silently
ignored; `close` lets go of what the backend started (at shutdown); `health` says whether it can
generate now (`/readyz`). The `hf` backend wraps a loaded transformers model: continuous batching
(batching.py) or one request at a time (hf.py); the `openai` backend (openai_backend.py) asks a
remote OpenAI-compatible engine.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Union

from kernelwright import jsontext
from kernelwright.errors import UsageError

Prompt = Union[list[dict[str, str]], str]  # noqa: UP007 (a runtime alias)


class PromptTooLong(ValueError):
    """The prompt and the token budget do not fit the model's context: the client's to shorten (400)."""


class EmptyPrompt(ValueError):
    """The prompt has no tokens, so there is nothing to continue from: the client's to fill (400)."""


class EngineBusy(RuntimeError):
    """The backend takes no new work for now (its engine is stopping): the client's to retry (503)."""


class EngineError(RuntimeError):
    """A remote engine failed: it answered an error or something unreadable (502), or too late (504)."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


class SamplingRefused(ValueError):
    """A sampling setting this backend cannot honour: the client's to change (400 naming `field`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Sampling:
    """Per-request settings, honoured by every backend. temperature 0: greedy; seed None: unseeded."""

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" (end of sequence) or "length" (max_new_tokens reached)


class ServingBackend(Protocol):
    def check_sampling(self, sampling: Sampling) -> None: ...

    async def generate(self, prompts: Sequence[Prompt], sampling: Sampling) -> list[Completion]: ...

    def stream(self, prompt: Prompt, sampling: Sampling) -> AsyncIterator[str | Completion]: ...

    def close(self) -> None: ...

    async def health(self) -> str | None:
        """None while the backend can generate, else why not (`/readyz` answers 503 with it)."""
        ...


def _words(text: str) -> int:
    return len(text.split())


def prompt_text(prompt: Prompt) -> str:
    return prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)


@dataclass
class ScriptedBackend:
    """Answers the texts of `texts` in order (cycling), whatever the prompt: for tests and demos.

    Token counts are whitespace-separated words. Every prompt and sampling setting it is given is
    kept in `prompts` and `samplings`, so tests can see what a request asked for.
    """

    texts: list[str]
    prompts: list[Prompt] = field(default_factory=list)
    samplings: list[Sampling] = field(default_factory=list)
    _next: int = 0

    @classmethod
    def from_file(cls, path: Path) -> ScriptedBackend:
        try:
            texts = jsontext.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"scripted backend file {path}: {exc}") from None
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise UsageError(f"scripted backend file {path} must hold a non-empty JSON list of strings")
        return cls(list(texts))

    def check_sampling(self, sampling: Sampling) -> None:
        """Every setting is kept (in `samplings`), none refused."""

    def close(self) -> None:
        """Nothing to let go of."""

    async def health(self) -> str | None:
        """Always able to answer."""
        return None

    def _answer(self, prompt: Prompt, sampling: Sampling) -> Completion:
        self.prompts.append(prompt)
        self.samplings.append(sampling)
        text = self.texts[self._next % len(self.texts)]
        self._next += 1
        return Completion(text, _words(prompt_text(prompt)), _words(text), "stop")

    async def generate(self, prompts: Sequence[Prompt], sampling: Sampling) -> list[Completion]:
        await asyncio.sleep(0)
        return [self._answer(p, sampling) for p in prompts]

    async def stream(self, prompt: Prompt, sampling: Sampling) -> AsyncIterator[str | Completion]:
        done = self._answer(prompt, sampling)
        for i in range(0, len(done.text), 64):
            await asyncio.sleep(0)
            yield done.text[i:i + 64]
        yield done
