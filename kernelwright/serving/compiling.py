"""The compile check of generated code, through `kernelwright.cuda.compile_check`.

This adapter only maps its `CompileResult` into the response types and runs it off the event
loop. Where that module cannot be imported, every stage reports "unavailable" and nothing is
marked ok: a candidate is ok only when the compile check says so.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelwright.cuda.spans import SpanResult, cuda_string_literals
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.schemas import CompileInfo, StageInfo

log = logging.getLogger(__name__)
# one request's candidates are checked at a time (each check runs compile_workers compiles), so the
# compilers' CPU and memory stay bounded whatever the number of requests in flight
_ONE_AT_A_TIME = threading.Lock()
UNAVAILABLE = "the compile check is not available in this installation"


def _module() -> Any | None:
    try:
        return importlib.import_module("kernelwright.cuda.compile_check")
    except ImportError:
        return None


def cuda_sources_of(code: str) -> list[str]:
    """The CUDA source strings of a Python candidate (when no compile check ran)."""
    return [text for _, text in cuda_string_literals(code, SpanResult())]


def _stage(stage: Any) -> StageInfo:
    return StageInfo(status=str(stage.status), log=str(stage.log or ""), seconds=float(stage.seconds))  # type: ignore[arg-type]


def unavailable(reason: str = UNAVAILABLE) -> tuple[CompileInfo, list[str]]:
    stage = StageInfo(status="unavailable", log=reason, seconds=0.0)
    return CompileInfo(ok=False, device=stage, host=stage), []


def from_result(result: Any) -> tuple[CompileInfo, list[str]]:
    """(compile info, CUDA sources) of one `CompileResult`."""
    info = CompileInfo(ok=bool(result.ok), device=_stage(result.device), host=_stage(result.host))
    return info, [str(s) for s in result.cuda_sources]


def settings_for(module: Any, cfg: ServeConfig) -> Any:
    """The compile check's settings from the server's config (fields it does not have are left out)."""
    wanted: dict[str, Any] = {"host": cfg.compile_host, "timeout_s": cfg.compile_timeout_s,
                              "workers": cfg.compile_workers, "host_frontend": cfg.compile_host_frontend}
    if cfg.compile_cache_dir:
        wanted["cache_dir"] = Path(cfg.compile_cache_dir)
    cls = module.CompileCheckSettings
    known = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    return cls(**{k: v for k, v in wanted.items() if k in known})


def prepare(cfg: ServeConfig) -> None:
    """Build the host stage's precompiled torch header now (10-60 s, once per machine and toolchain), so that
    the first request that compiles does not wait for it; requests meanwhile wait on the header's lock."""
    module = _module()
    if module is None or not cfg.compile_host:
        return
    start = time.perf_counter()
    try:
        stages = importlib.import_module("kernelwright.cuda.compile_stages")
        tools = stages.toolchain(settings_for(module, cfg))
    except Exception as exc:  # noqa: BLE001 - a request builds it again, and reports what fails
        log.warning("the compile check's precompiled header could not be prepared: %s", exc)
        return
    if isinstance(tools, str):
        log.info("no host stage here: %s", tools)
    else:
        log.info("compile check ready (host checker %s, header %s) in %.1f s", tools[0], tools[2],
                 time.perf_counter() - start)


def prepare_in_background(cfg: ServeConfig) -> threading.Thread | None:
    """`prepare` on a daemon thread (a shutdown does not wait for it); None when there is no host stage."""
    if not cfg.compile_host:
        return None
    thread = threading.Thread(target=prepare, args=(cfg,), name="kw-compile-prepare", daemon=True)
    thread.start()
    return thread


def check_sync(codes: Sequence[str], cfg: ServeConfig) -> list[tuple[CompileInfo, list[str]]]:
    module = _module()
    if module is None:
        return [unavailable() for _ in codes]
    settings = settings_for(module, cfg)
    with _ONE_AT_A_TIME:
        if hasattr(module, "check_many"):
            results = module.check_many(list(codes), settings)
        else:
            results = [module.check_candidate(c, settings) for c in codes]
    return [from_result(r) for r in results]


async def check(codes: Sequence[str], cfg: ServeConfig) -> list[tuple[CompileInfo, list[str]]]:
    """Compile-check each candidate's Python source in a worker thread."""
    if not codes:
        return []
    try:
        return await asyncio.to_thread(check_sync, list(codes), cfg)
    except Exception as exc:  # a compile check that breaks must not break the request
        log.exception("compile check failed")
        return [unavailable(f"the compile check failed: {type(exc).__name__}") for _ in codes]
