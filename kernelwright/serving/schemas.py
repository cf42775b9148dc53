"""Request and response bodies (msgspec Structs): the kernel API and the OpenAI-compatible one.

Hard ceilings live in the types (a 400 naming the field); the configured limits, which may be
lower, are checked by the services. Request bodies forbid unknown fields: a field this server does
not know is a 400 naming it, never silently dropped. The OpenAI requests also take, and ignore,
the fields that only identify or label a request for OpenAI's own bookkeeping (`user`, `metadata`,
`safety_identifier`, `prompt_cache_key`) and `parallel_tool_calls` (tools are refused anyway).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

N = Annotated[int, Meta(ge=1, le=8)]
Tokens = Annotated[int, Meta(ge=1, le=4096)]
Temperature = Annotated[float, Meta(ge=0.0, le=2.0)]
Seed = Annotated[int, Meta(ge=0, le=2**63 - 1)]


class StageInfo(msgspec.Struct):
    status: Literal["ok", "failed", "unavailable", "skipped"]
    log: str
    seconds: float


class CompileInfo(msgspec.Struct):
    ok: bool
    device: StageInfo
    host: StageInfo


class ModelInfo(msgspec.Struct):
    name: str
    version: str | None = None
    alias: str | None = None
    run_id: str | None = None


class Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0


# --- the kernel API --------------------------------------------------------------------------

class GenerateRequest(msgspec.Struct, forbid_unknown_fields=True):
    reference_code: str | None = None
    instruction: str | None = None
    n: N = 1
    max_new_tokens: Tokens | None = None
    temperature: Temperature | None = None  # None: 0 (greedy) for one candidate, SAMPLED_TEMPERATURE for more
    seed: Seed | None = None
    compile_check: bool = True
    repair_attempts: Annotated[int, Meta(ge=0, le=3)] = 1
    repair: Literal["resample", "feedback"] | None = None  # None: the server's (ServeConfig.repair)
    verify: bool = False


class Candidate(msgspec.Struct):
    code: str
    cuda_sources: list[str]
    compile: CompileInfo | None
    repairs: int = 0  # times this candidate was made again after a failed compile (resampled, or from its log)


class Timings(msgspec.Struct):
    generate_s: float
    compile_s: float


class GenerateResponse(msgspec.Struct):
    candidates: list[Candidate]
    model: ModelInfo
    usage: Usage
    timings: Timings


# --- OpenAI-compatible ------------------------------------------------------------------------

class ChatMessage(msgspec.Struct):
    """A message of an answer: its content always a string."""

    role: Literal["system", "developer", "user", "assistant"]  # developer: OpenAI's newer name for system
    content: str


class ContentPart(msgspec.Struct):
    """One part of a request message's content: `{"type": "text", "text": ...}` is served; any other type
    (an image, audio, a file) answers 400 naming the part."""

    type: str
    text: str | None = None


class RequestMessage(msgspec.Struct):
    """A request's message: its content a string, or a list of text parts as OpenAI's API also takes
    (what many clients send), joined with newlines; `name` is taken and ignored, as roles are enough here."""

    role: Literal["system", "developer", "user", "assistant"]
    content: str | Annotated[list[ContentPart], Meta(min_length=1, max_length=64)]
    name: str | None = None

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text or "" for part in self.content)


class StreamOptions(msgspec.Struct, forbid_unknown_fields=True):
    include_usage: bool = False  # a last chunk with the usage and no choices, before `data: [DONE]`


class _OpenAIParams(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    model: str  # required, as OpenAI's API requires it
    n: N = 1
    max_tokens: Tokens | None = None
    max_completion_tokens: Tokens | None = None
    temperature: Temperature | None = None  # None: 1 (OpenAI's default)
    top_p: Annotated[float, Meta(gt=0.0, le=1.0)] = 1.0
    seed: Seed | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    compile_check: bool = True  # kernelwright's extension: check the code of each choice
    user: str | None = None  # ignored: identifies the end user to OpenAI
    # accepted so that a client sending them gets a clear 400 rather than silence
    stop: str | list[str] | None = None
    tools: list[Any] | None = None
    response_format: dict[str, Any] | None = None
    logprobs: bool | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: dict[str, float] | None = None


class ChatCompletionRequest(_OpenAIParams, kw_only=True, forbid_unknown_fields=True):
    messages: Annotated[list[RequestMessage], Meta(min_length=1, max_length=64)]
    # ignored: they label the request for OpenAI's bookkeeping, or tune tools this server refuses
    metadata: dict[str, str] | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    parallel_tool_calls: bool | None = None
    service_tier: Literal["auto", "default"] | None = None  # one tier here: other tiers answer 400
    store: bool | None = None  # nothing is stored for OpenAI's API to read back: true answers 400
    # taken at the values that ask for nothing (null, "none", ["text"], 0); any other answers 400
    top_logprobs: Annotated[int, Meta(ge=0, le=20)] | None = None
    tool_choice: str | dict[str, Any] | None = None
    functions: list[Any] | None = None
    function_call: str | dict[str, Any] | None = None
    modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    reasoning_effort: str | None = None


class CompletionRequest(_OpenAIParams, kw_only=True, forbid_unknown_fields=True):
    prompt: Annotated[str, Meta(min_length=1)]  # an empty one leaves the model nothing to continue from


class KernelwrightExtra(msgspec.Struct):
    code: str
    cuda_sources: list[str]
    compile: CompileInfo | None


class ChatChoice(msgspec.Struct):
    index: int
    message: ChatMessage
    finish_reason: str
    kernelwright: KernelwrightExtra


class TextChoice(msgspec.Struct):
    index: int
    text: str
    finish_reason: str
    kernelwright: KernelwrightExtra
    logprobs: None = None


class ChatCompletion(msgspec.Struct):
    id: str
    created: int
    model: str
    choices: list[ChatChoice]
    usage: dict[str, int]
    object: str = "chat.completion"


class TextCompletion(msgspec.Struct):
    id: str
    created: int
    model: str
    choices: list[TextChoice]
    usage: dict[str, int]
    object: str = "text_completion"


class ModelCard(msgspec.Struct):
    id: str
    created: int
    owned_by: str = "kernelwright"
    object: str = "model"


class ModelList(msgspec.Struct):
    data: list[ModelCard]
    object: str = "list"
