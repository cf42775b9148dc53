"""`create_app(cfg)`: the Litestar application of `kernelwright serve`.

The lifespan starts loading the model off the event loop (with the openai backend: waiting for
the engine to answer) and returns at once, so `/healthz` answers while the weights load and
`/readyz` (and every /v1 route) answers 503 until they are in; a load that fails keeps `/readyz`
at 503 with the reason. Once loaded, the registry alias is polled (reload.py) and a version it
moves to replaces the served one without a restart. Meanwhile a daemon thread builds the compile
check's precompiled header, so the first request that compiles does not wait for it. At shutdown
the app drains the requests in flight, then closes the served backend (which stops the
continuous-batching engine).

Every request's body is read first, within its bounds (body_limits.py), and every HTTP answer is
counted once where it leaves the app (`ServingApp`, metrics.py).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar
from litestar.datastructures import State
from litestar.exceptions import HTTPException
from litestar.openapi import OpenAPIConfig
from litestar.types import LifeSpanReceive, LifeSpanScope, LifeSpanSend, Receive, Scope, Send

from kernelwright import __version__
from kernelwright.serving import metrics
from kernelwright.serving.backend import ServingBackend
from kernelwright.serving.body_limits import BodyLimits
from kernelwright.serving.compiling import prepare_in_background
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.lifecycle import drain
from kernelwright.serving.limits import add_headers, http_error, server_error
from kernelwright.serving.loading import Loader, default_loader, default_reloader
from kernelwright.serving.openapi_docs import COMPONENTS, MetricsController
from kernelwright.serving.ratelimit import STORE_NAME, close_store, rate_limit_store
from kernelwright.serving.reload import Reloader, Served, watch
from kernelwright.serving.request_log import RequestLog
from kernelwright.serving.routes import healthz, readyz, v1_router
from kernelwright.serving.schemas import ModelInfo

log = logging.getLogger(__name__)


async def _load(state: State, loader: Loader) -> None:
    try:
        loaded: Any = await loader() if inspect.iscoroutinefunction(loader) else await asyncio.to_thread(loader)
        state.served = Served(*loaded)
        state.ready = True
    except Exception as exc:  # the reason is kept for /readyz; the process stays up for health checks
        state.load_error = str(exc) or type(exc).__name__
        log.error("the model failed to load: %s", state.load_error)


def _lifespan(loader: Loader | None, reloader: Reloader | None, interval_s: float):  # type: ignore[no-untyped-def]
    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        app.state.draining, app.state.drain_deadline = False, None  # a lifespan started again (in tests) serves again
        tasks = [asyncio.create_task(_load(app.state, loader))] if loader is not None else []
        if loader is not None:  # a served model (not a test's backend): the compile check's header meanwhile
            prepare_in_background(app.state.cfg)
        if reloader is not None and interval_s > 0:
            tasks.append(asyncio.create_task(watch(app.state, reloader, interval_s)))
        try:
            yield
        finally:
            await drain(app.state, app.state.cfg.drain_timeout_s)
            if app.state.served is not None:  # stops the continuous-batching engine's thread
                await asyncio.to_thread(app.state.served.backend.close)
            if app.state.request_log is not None:
                await asyncio.to_thread(app.state.request_log.close)
            for task in tasks:
                task.cancel()
            await close_store(app.stores.get(STORE_NAME))

    return lifespan


class ServingApp(Litestar):
    """The Litestar app, its HTTP requests counted outside every middleware and error handler."""

    async def __call__(self, scope: Scope | LifeSpanScope, receive: Receive | LifeSpanReceive,
                       send: Send | LifeSpanSend) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        await metrics.observe(scope, receive, send, super().__call__)


def _state(cfg: ServeConfig, backend: ServingBackend | None, info: ModelInfo | None) -> State:
    served = Served(backend, info or ModelInfo(name=cfg.model)) if backend is not None else None
    return State({"cfg": cfg, "api_keys": cfg.keys(), "served": served, "ready": served is not None,
                  "load_error": None, "started": time.time(), "in_flight": 0, "handlers": set(), "draining": False,
                  "drain_deadline": None, "request_log": RequestLog(cfg) if cfg.log_requests else None})


def create_app(cfg: ServeConfig | None = None, backend: ServingBackend | None = None, *,
               loader: Loader | None = None, model_info: ModelInfo | None = None,
               reloader: Reloader | None = None) -> ServingApp:
    """The app; `backend` serves at once (tests), else `loader` (default: what cfg names) loads in the lifespan.

    `reloader` (default: cfg's alias, when it names one) is polled every `cfg.reload_interval_s`."""
    cfg = cfg or ServeConfig()
    if backend is None and loader is None:
        loader, reloader = default_loader(cfg), reloader or default_reloader(cfg)
    return ServingApp(
        route_handlers=[v1_router(cfg), healthz, readyz, MetricsController],
        lifespan=[_lifespan(loader if backend is None else None, reloader, cfg.reload_interval_s)],
        state=_state(cfg, backend, model_info),
        middleware=[BodyLimits()],
        before_send=[add_headers],
        exception_handlers={HTTPException: http_error, Exception: server_error},
        request_max_body_size=cfg.max_body_bytes,
        stores={STORE_NAME: rate_limit_store(cfg)},
        openapi_config=OpenAPIConfig(title="kernelwright", version=__version__, path="/schema", components=COMPONENTS),
        debug=False,
    )
