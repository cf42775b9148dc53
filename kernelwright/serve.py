"""`kernelwright serve`: check what will be served, then run the HTTP API under uvicorn.

    kernelwright serve                                        # models:/kernelwright-coder@champion
    kernelwright serve --model .kernelwright/train/final --port 8080
    KERNELWRIGHT_API_KEYS=k1,k2 kernelwright serve --host 0.0.0.0
    kernelwright serve --backend openai --backend_url http://127.0.0.1:8001   # generation by vLLM & co.

A model that cannot be resolved (no store, neither @champion nor @candidate, no checkpoint at a
path) ends the command with exit status 2 before the port is opened; the weights then load in the
server's lifespan while /healthz already answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from kernelwright.serving.app import create_app
from kernelwright.serving.backend import ScriptedBackend
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.loading import resolve_model, use_store

log = logging.getLogger(__name__)
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def preflight(cfg: ServeConfig) -> str:
    """What will be served, in words; a UsageError when it cannot be."""
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


def run_serve(cfg: ServeConfig, announce: Callable[[str], object] = log.info) -> int:
    """Check the model, then serve until interrupted (uvicorn handles SIGINT/SIGTERM gracefully)."""
    import uvicorn

    what = preflight(cfg)
    if cfg.host not in LOOPBACK and not cfg.keys():
        log.warning("listening on %s without API keys: anyone who can reach the port can generate", cfg.host)
    announce(f"serving {what} on http://{cfg.host}:{cfg.port} (docs at /schema, metrics at /metrics)")
    uvicorn.run(create_app(cfg), host=cfg.host, port=cfg.port, log_level=cfg.log_level,
                timeout_graceful_shutdown=max(1, int(cfg.drain_timeout_s)))
    return 0
