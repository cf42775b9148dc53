"""`kernelwright serve`: check what will be served, then run the HTTP API under uvicorn.

    kernelwright serve                                        # models:/kernelwright-coder@champion
    kernelwright serve --model .kernelwright/train/final --port 8080
    KERNELWRIGHT_API_KEYS=k1,k2 kernelwright serve --host 0.0.0.0
    kernelwright serve --backend openai --backend_url http://127.0.0.1:8001   # generation by vLLM & co.

A model that cannot be resolved (no store, neither @champion nor @candidate, no checkpoint at a
path) ends the command with exit status 2 before the port is opened; the weights then load in the
server's lifespan while /healthz already answers.

SIGTERM (or Ctrl-C) drains before uvicorn stops: the port stays open, new /v1 requests answer 503
with Retry-After and /readyz 503 `draining`, while the requests in flight finish; once none is left,
or `drain_timeout_s` after the signal (those still running then answer 503), uvicorn closes the
port and the connections and the process exits. A second signal ends the drain at once (the
requests still in flight answer 503); a third is uvicorn's own (Ctrl-C: stop at once).
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import uvicorn
from litestar.datastructures import State

from kernelwright.serving.app import create_app
from kernelwright.serving.backend import ScriptedBackend
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.lifecycle import drain
from kernelwright.serving.loading import resolve_model, use_store

log = logging.getLogger(__name__)
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def check_serve_config(cfg: ServeConfig) -> str:
    """The serve stage's config check: a UsageError when the model cannot be served; else what will be
    served, in words."""
    if cfg.backend == "openai":
        from kernelwright.serving.openai_backend import EngineSettings

        settings = EngineSettings.from_config(cfg)
        return f"{settings.model or 'the model'} of the OpenAI-compatible engine at {settings.where}"
    if cfg.backend.startswith("scripted:"):
        path = cfg.backend.removeprefix("scripted:")
        return f"scripted backend ({len(ScriptedBackend.from_file(Path(path)).texts)} texts from {path})"
    if cfg.model.startswith("models:/"):
        use_store(cfg)
    _, info = resolve_model(cfg.model)
    version = f" version {info.version}" if info.version else ""
    alias = f" (@{info.alias})" if info.alias else ""
    return f"{info.name}{version}{alias}"


class DrainingServer(uvicorn.Server):
    """uvicorn's server, which on its first SIGTERM/SIGINT drains the app before it starts to stop.

    uvicorn alone closes its listening socket as soon as the signal comes (new connections are
    refused); here the app's `draining` state turns on at once and uvicorn's shutdown begins once
    no request is in flight, or at the drain's deadline (`drain_timeout_s` after the signal, or a
    second signal), where `drain` cuts off what is left. uvicorn's own wait ends at that deadline."""

    def __init__(self, config: uvicorn.Config, state: State, drain_timeout_s: float) -> None:
        super().__init__(config)
        self.state = state
        self.drain_timeout_s = drain_timeout_s
        self.signals: list[int] = []
        self._drain: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # in a signal handler: flags only; the main loop's next tick starts the drain
        if not self.started or len(self.signals) >= 2:  # before serving, or a third signal: uvicorn's way
            super().handle_exit(sig, frame)
            return
        self.signals.append(sig)
        now = time.monotonic()
        self.state.draining = True
        self.state.drain_deadline = now + self.drain_timeout_s if len(self.signals) == 1 else now

    async def on_tick(self, counter: int) -> bool:
        if self.signals and self._drain is None:
            self._drain = asyncio.create_task(self._drain_then_exit(self.signals[0]))
        return await super().on_tick(counter)

    async def _drain_then_exit(self, sig: int) -> None:
        log.info("draining: new requests answer 503 while %d in flight finish (at most %g s)",
                 self.state.in_flight, self.drain_timeout_s)
        await drain(self.state, self.drain_timeout_s)
        super().handle_exit(sig, None)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.state.drain_deadline is not None:  # uvicorn waits for what is left only until the drain's deadline
            self.config.timeout_graceful_shutdown = math.ceil(max(0.0, self.state.drain_deadline - time.monotonic()))
        await super().shutdown(sockets)


def run_serve(cfg: ServeConfig, announce: Callable[[str], object] = log.info) -> int:
    """Check the model, then serve until SIGTERM or Ctrl-C, draining before the process exits."""
    what = check_serve_config(cfg)
    if cfg.host not in LOOPBACK and not cfg.keys():
        log.warning("listening on %s without API keys: anyone who can reach the port can generate", cfg.host)
    announce(f"serving {what} on http://{cfg.host}:{cfg.port} (docs at /schema, metrics at /metrics)")
    app = create_app(cfg)
    config = uvicorn.Config(app, host=cfg.host, port=cfg.port, log_level=cfg.log_level,
                            timeout_graceful_shutdown=math.ceil(cfg.drain_timeout_s))
    server = DrainingServer(config, app.state, cfg.drain_timeout_s)
    try:
        server.run()
    except KeyboardInterrupt:  # a signal uvicorn passes on once it has shut down
        pass
    return 0 if server.started else 1
