"""What is served now (`Served`: a backend and what responses say about its model), and swapping it.

Every request takes `state.served` once, when its handler starts, and keeps that pair to its last
byte: a request in flight finishes on the model it started on, whatever replaces it meanwhile.
`watch` polls the registry alias every `reload_interval_s`; when the alias names another version,
that version loads in a worker thread while the old one goes on serving, and one assignment
swaps them. The old model is freed when its last request lets go of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from litestar import Request
from litestar.datastructures import State

from kernelwright.serving import metrics
from kernelwright.serving.backend import ServingBackend
from kernelwright.serving.schemas import ModelInfo

log = logging.getLogger(__name__)
# given what is served, a new (backend, info) when the alias has moved, else None (runs in a thread)
Reloader = Callable[[ModelInfo], "tuple[ServingBackend, ModelInfo] | None"]


@dataclass(frozen=True)
class Served:
    backend: ServingBackend
    info: ModelInfo


def version_label(info: ModelInfo) -> str:
    return str(info.version or "local")


def provide_served(request: Request[Any, Any, Any], state: State) -> Served:
    """The dependency every /v1 handler takes: what serves this request, noted for its headers."""
    served: Served = state.served
    request.scope.setdefault("state", {})["model_version"] = version_label(served.info)  # type: ignore[typeddict-item]
    return served


async def reload_once(state: State, reloader: Reloader) -> bool:
    """Poll once; swap in the new version when the alias moved. False when nothing changed."""
    current: Served = state.served
    try:
        fresh = await asyncio.to_thread(reloader, current.info)
    except Exception as exc:  # a failed poll or load keeps the served model; the next poll tries again
        metrics.RELOADS.labels("failed").inc()
        log.warning("model reload failed, still serving version %s: %s", current.info.version,
                    str(exc) or type(exc).__name__)
        return False
    if fresh is None:
        return False
    state.served = Served(*fresh)
    metrics.RELOADS.labels("swapped").inc()
    log.info("now serving %s version %s (was version %s)", fresh[1].name, fresh[1].version, current.info.version)
    return True


async def watch(state: State, reloader: Reloader, interval_s: float) -> None:
    """Poll the alias every `interval_s` seconds while the app runs (cancelled at shutdown)."""
    while True:
        await asyncio.sleep(interval_s)
        if state.ready:
            await reload_once(state, reloader)
