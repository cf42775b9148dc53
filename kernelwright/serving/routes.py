"""The HTTP routes: thin controllers over kernels.py and openai_api.py."""

from __future__ import annotations

from typing import Any

from litestar import Response, Router, get, post
from litestar.datastructures import State
from litestar.exceptions import NotFoundException, ServiceUnavailableException, TooManyRequestsException
from litestar.params import JSONBody
from litestar.response import ServerSentEvent

from kernelwright.serving import openai_api
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.kernels import generate_kernels
from kernelwright.serving.limits import QueueMiddleware, auth_guard, ready_guard
from kernelwright.serving.ratelimit import rate_limit_middleware
from kernelwright.serving.schemas import (
    ChatCompletion,
    ChatCompletionRequest,
    CompletionRequest,
    GenerateRequest,
    GenerateResponse,
    ModelCard,
    ModelList,
    TextCompletion,
)

BUSY = [ServiceUnavailableException, TooManyRequestsException]


class EventStream(ServerSentEvent):
    """An SSE answer from a handler that may also answer JSON: the event-stream media type wins."""

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["media_type"] = "text/event-stream"
        return super().to_asgi_response(*args, **kwargs)


def model_id(state: State) -> str:
    return str(state.model_info.name)


def _check_model(state: State, asked: str | None) -> None:
    accepted = {model_id(state), state.cfg.model, f"{model_id(state)}/{state.model_info.version}"}
    if asked is not None and asked not in accepted:
        raise NotFoundException(f"model {asked!r} is not served here (this server serves {model_id(state)!r})")


@post("/kernels/generate", status_code=200, raises=BUSY, summary="Generate compile-checked CUDA kernels")
async def generate(data: JSONBody[GenerateRequest], state: State) -> GenerateResponse:
    return await generate_kernels(data, state.backend, state.cfg, state.model_info)


async def _openai(data: openai_api.OpenAIRequest, state: State) -> Any:
    _check_model(state, data.model)
    if data.stream:
        events = await openai_api.stream(data, state.backend, state.cfg, model_id(state))
        return EventStream(events)
    return await openai_api.complete(data, state.backend, state.cfg, model_id(state))


@post("/chat/completions", status_code=200, raises=BUSY, summary="OpenAI-compatible chat completions")
async def chat_completions(data: JSONBody[ChatCompletionRequest], state: State) -> ChatCompletion | ServerSentEvent:
    result: ChatCompletion | ServerSentEvent = await _openai(data, state)
    return result


@post("/completions", status_code=200, raises=BUSY, summary="OpenAI-compatible completions")
async def completions(data: JSONBody[CompletionRequest], state: State) -> TextCompletion | ServerSentEvent:
    result: TextCompletion | ServerSentEvent = await _openai(data, state)
    return result


@get("/models", raises=BUSY, summary="The served model")
async def models(state: State) -> ModelList:
    return ModelList([ModelCard(id=model_id(state), created=int(state.started))])


def v1_router(cfg: ServeConfig) -> Router:
    """The /v1 routes behind the rate limit (when on), the in-flight bound, the key and readiness guards."""
    limit = rate_limit_middleware(cfg)
    return Router("/v1", route_handlers=[generate, chat_completions, completions, models],
                  guards=[auth_guard, ready_guard], middleware=[*([limit] if limit else []), QueueMiddleware()])


@get("/healthz", summary="200 while the process lives")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@get("/readyz", summary="200 once the model is loaded, 503 before")
async def readyz(state: State) -> Response[dict[str, Any]]:
    if state.ready:
        return Response({"status": "ready", "model": state.model_info.name, "version": state.model_info.version})
    status = "failed" if state.load_error else "loading"
    return Response({"status": status, "detail": state.load_error or "the model is loading"}, status_code=503,
                    headers={"Retry-After": str(state.cfg.retry_after_s)})
