"""The HTTP routes: thin controllers over kernels.py and openai_api.py.

Each POST body is decoded strictly by `bodies.StrictBody` (a 400 naming the field); an empty one is
None here, and `bodies.present` answers 400 saying what to send.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, Router, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.exceptions import NotFoundException, ServiceUnavailableException
from litestar.params import FromPath, JSONBody
from litestar.response import ServerSentEvent

from kernelwright.serving import openai_api, request_log
from kernelwright.serving.bodies import StrictBody, present
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.kernels import generate_kernels
from kernelwright.serving.lifecycle import CancelOnDisconnect
from kernelwright.serving.limits import QueueMiddleware, auth_guard, ready_guard, request_id
from kernelwright.serving.openapi_docs import READ_ERRORS, SECURITY, WRITE_ERRORS, JSONOrEventStream
from kernelwright.serving.ratelimit import rate_limit_middleware
from kernelwright.serving.reload import Served, provide_served
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


class EventStream(ServerSentEvent):
    """An SSE answer from a handler that may also answer JSON: the event-stream media type wins."""

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["media_type"] = "text/event-stream"
        return super().to_asgi_response(*args, **kwargs)


def model_id(served: Served) -> str:
    return str(served.info.name)


def _card(state: State, served: Served) -> ModelCard:
    """The served model's card, as /v1/models lists it and /v1/models/{model} answers it."""
    return ModelCard(id=model_id(served), created=int(state.started))


def _check_model(state: State, served: Served, asked: str | None) -> None:
    accepted = {model_id(served), state.cfg.model, f"{model_id(served)}/{served.info.version}"}
    if asked is not None and asked not in accepted:
        raise NotFoundException(f"model {asked!r} is not served here (this server serves {model_id(served)!r})")


@post("/kernels/generate", status_code=200, raises=WRITE_ERRORS, summary="Generate compile-checked CUDA kernels",
      dto=StrictBody[GenerateRequest], return_dto=None)
async def generate(request: Request[Any, Any, Any], state: State, served: NamedDependency[Served],
                   data: JSONBody[GenerateRequest | None] = None) -> GenerateResponse:
    body = present(data, "reference_code or instruction")
    answer = await generate_kernels(body, served.backend, state.cfg, served.info)
    if state.request_log is not None:
        cands = [(c.code, c.cuda_sources, c.compile, c.repairs) for c in answer.candidates]
        await request_log.record(state, request_log.rows_of(request_id(request.scope), "kernels/generate",
                                                            served.info.version, body.reference_code
                                                            or body.instruction, cands))
    return answer


async def _openai(data: openai_api.OpenAIRequest, request: Request[Any, Any, Any], state: State,
                  served: Served) -> Any:
    _check_model(state, served, data.model)
    if data.stream:
        events = await openai_api.stream(data, served.backend, state.cfg, model_id(served))
        return EventStream(events)
    answer = await openai_api.complete(data, served.backend, state.cfg, model_id(served))
    if state.request_log is not None:
        cands = [(c.kernelwright.code, c.kernelwright.cuda_sources, c.kernelwright.compile, 0) for c in answer.choices]
        await request_log.record(state, request_log.rows_of(request_id(request.scope), request.url.path,
                                                            served.info.version, openai_api.prompt_of(data), cands))
    return answer


@post("/chat/completions", status_code=200, raises=WRITE_ERRORS, operation_class=JSONOrEventStream,
      summary="OpenAI-compatible chat completions", dto=StrictBody[ChatCompletionRequest], return_dto=None)
async def chat_completions(request: Request[Any, Any, Any], state: State, served: NamedDependency[Served],
                           data: JSONBody[ChatCompletionRequest | None] = None) -> ChatCompletion | ServerSentEvent:
    body = present(data, "model and messages")
    result: ChatCompletion | ServerSentEvent = await _openai(body, request, state, served)
    return result


@post("/completions", status_code=200, raises=WRITE_ERRORS, operation_class=JSONOrEventStream,
      summary="OpenAI-compatible completions", dto=StrictBody[CompletionRequest], return_dto=None)
async def completions(request: Request[Any, Any, Any], state: State, served: NamedDependency[Served],
                      data: JSONBody[CompletionRequest | None] = None) -> TextCompletion | ServerSentEvent:
    body = present(data, "model and prompt")
    result: TextCompletion | ServerSentEvent = await _openai(body, request, state, served)
    return result


@get("/models", raises=READ_ERRORS, summary="The served model")
async def models(state: State, served: NamedDependency[Served]) -> ModelList:
    return ModelList([_card(state, served)])


@get("/models/{model:path}", raises=[*READ_ERRORS, NotFoundException],
     summary="The served model, by its id (OpenAI's retrieve model)")
async def retrieve_model(state: State, served: NamedDependency[Served], model: FromPath[str]) -> ModelCard:
    """The card of the served model when `model` names it (the ids chat requests accept); else 404."""
    _check_model(state, served, model.removeprefix("/"))
    return _card(state, served)


def v1_router(cfg: ServeConfig) -> Router:
    """The /v1 routes behind the rate limit (when on), the in-flight bound, the key and readiness guards."""
    limit = rate_limit_middleware(cfg)
    middleware = [*([limit] if limit else []), QueueMiddleware(), CancelOnDisconnect()]
    return Router("/v1", route_handlers=[generate, chat_completions, completions, models, retrieve_model],
                  guards=[auth_guard, ready_guard], middleware=middleware,
                  dependencies={"served": Provide(provide_served, sync_to_thread=False)}, security=SECURITY)


@get("/healthz", summary="200 while the process lives")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@get("/readyz", raises=[ServiceUnavailableException], summary="200 once the model is loaded, 503 before "
     "(and while shutting down, or while the openai backend's engine does not answer)")
async def readyz(state: State) -> Response[dict[str, Any]]:
    if state.draining:
        status, detail = "draining", "the server is shutting down"
    elif not state.ready:
        status, detail = ("failed", state.load_error) if state.load_error else ("loading", "the model is loading")
    else:
        served = state.served
        engine_down = await served.backend.health()
        if engine_down is None:
            return Response({"status": "ready", "model": served.info.name, "version": served.info.version})
        status, detail = "engine_down", engine_down
    return Response({"status": status, "detail": detail}, status_code=503,
                    headers={"Retry-After": str(state.cfg.retry_after_s)})
