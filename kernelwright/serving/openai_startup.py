"""The openai backend's start-up: ready once the engine answered its /v1/models (with a bounded retry).

The server's port opens first; `/readyz` says `loading` while the engine is asked again about
every second, for `backend_startup_s` seconds, and `failed` with the reason after that. A model
list that cannot work (several models and none named, or not the named one) fails at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import httpx

from kernelwright.errors import UsageError
from kernelwright.serving.backend import EngineBusy, ServingBackend
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.openai_backend import (
    EngineSettings,
    OpenAIBackend,
    garbage,
    message_of,
    payload,
    status_error,
    transport_error,
)
from kernelwright.serving.schemas import ModelInfo

log = logging.getLogger(__name__)
RETRY_EVERY_S = 1.0  # between two start-up attempts
AsyncLoader = Callable[[], Awaitable[tuple[ServingBackend, ModelInfo]]]


async def wait_for_engine(settings: EngineSettings, transport: httpx.AsyncBaseTransport | None = None) -> str:
    """The model id to ask for, once the engine answered /v1/models (retried for `startup_s` seconds).

    An engine without /v1/models (404) is ready once its /health answers 200, when backend_model
    names the model. A model list without the named model, or with several and none named, is a
    UsageError (no retry can fix it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.startup_s
    async with settings.client(transport) as client:
        while True:
            try:
                response = await client.get("/v1/models")
                if response.status_code == 404 and settings.model is not None:
                    if (await client.get("/health")).status_code == 200:
                        return settings.model
                if response.status_code == 200:
                    return _choose(settings, _model_ids(response, settings))
                if response.status_code in (401, 403):
                    raise status_error(response, {}, settings)
                why = f"/v1/models answered {response.status_code}: {settings.mask(message_of(response))}"
                if response.status_code == 404 and settings.model is None:
                    why += " (an engine without /v1/models needs --backend_model)"
            except httpx.HTTPError as exc:
                why = str(transport_error(exc, settings))
            if loop.time() + RETRY_EVERY_S > deadline:
                raise EngineBusy(f"the engine at {settings.where} was not ready in {settings.startup_s:g} s "
                                 f"(backend_startup_s): {why}")
            log.info("waiting for the engine at %s: %s", settings.where, why)
            await asyncio.sleep(RETRY_EVERY_S)


def _model_ids(response: httpx.Response, settings: EngineSettings) -> list[str]:
    data = payload(response.text, settings, "a model list").get("data")
    if not isinstance(data, list):
        raise garbage(settings, "a model list")
    return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]


def _choose(settings: EngineSettings, ids: list[str]) -> str:
    if settings.model is not None:
        if settings.model in ids:
            return settings.model
        raise UsageError(f"the engine at {settings.where} serves {', '.join(map(repr, ids)) or 'no model'}, not "
                         f"{settings.model!r} (backend_model)")
    if len(ids) == 1:
        return ids[0]
    listed = f"several models ({', '.join(map(repr, ids[:8]))})" if ids else "no model in /v1/models"
    raise UsageError(f"the engine at {settings.where} lists {listed}: name one with --backend_model")


def engine_loader(cfg: ServeConfig, transport: httpx.AsyncBaseTransport | None = None) -> AsyncLoader:
    """The openai backend, once the engine `cfg` names answered; `transport` stands in for the network in tests."""
    settings = EngineSettings.from_config(cfg)

    async def load() -> tuple[ServingBackend, ModelInfo]:
        model = await wait_for_engine(settings, transport)
        log.info("generating with %s on the engine at %s", model, settings.where)
        return OpenAIBackend(settings, model, transport), ModelInfo(name=model)

    return load
