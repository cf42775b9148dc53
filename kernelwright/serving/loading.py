"""Which model the server answers with, and loading it: registry alias or local folder.

`models:/NAME@champion` falls back to `@candidate` when no champion is set; neither is a clear
usage error. The resolved version, alias and training run id are what responses report.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kernelwright.errors import UsageError
from kernelwright.models import ModelRef, load_model, resolve_ref
from kernelwright.serving.backend import ScriptedBackend, ServingBackend
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.reload import Reloader
from kernelwright.serving.schemas import ModelInfo
from kernelwright.workdir import sqlite_file

log = logging.getLogger(__name__)
# run off the event loop (a model load), or awaited on it (the openai backend waiting for its engine)
Loader = Callable[[], tuple[ServingBackend, ModelInfo]] | Callable[[], Awaitable[tuple[ServingBackend, ModelInfo]]]
FALLBACK = {"champion": "candidate"}


def use_store(cfg: ServeConfig) -> None:
    """Point MLflow at --tracking-uri, else MLFLOW_TRACKING_URI, else the work folder's store, for models:/ URIs."""
    import mlflow

    from kernelwright.store import Store

    uri = Store.of(cfg).tracking_uri
    database = sqlite_file(uri)
    if database is not None and not database.is_file():
        raise UsageError(f"no MLflow store at {database} to resolve {cfg.model}: train and register a model first "
                         "(kernelwright pipeline), or pass --model PATH")
    mlflow.set_tracking_uri(uri)


def _run_id(ref: ModelRef) -> str | None:
    from mlflow.tracking import MlflowClient

    try:
        return MlflowClient().get_model_version(ref.name, ref.version).run_id or None
    except Exception:  # the run id is informative only
        return None


def _resolve_alias(name: str, alias: str) -> tuple[ModelRef, str]:
    try:
        return resolve_ref(f"models:/{name}@{alias}"), alias
    except UsageError:
        if alias not in FALLBACK:
            raise
    fallback = FALLBACK[alias]
    try:
        ref = resolve_ref(f"models:/{name}@{fallback}")
    except UsageError:
        raise UsageError(f"{name} has neither a @{alias} nor a @{fallback} version in the MLflow registry: "
                         "train and register one (kernelwright train), or pass --model PATH") from None
    log.warning("%s has no @%s version: serving @%s (version %s)", name, alias, fallback, ref.version)
    return ref, fallback


def resolve_model(model: str) -> tuple[ModelRef, ModelInfo]:
    """The model to load and what responses say about it."""
    if not model.startswith("models:/"):
        path = Path(model)
        if not (path / "config.json").is_file():
            raise UsageError(f"no model at {path}: pass --model PATH (a HF checkpoint folder) or models:/NAME@ALIAS")
        return ModelRef(uri=model), ModelInfo(name=path.name or model)
    name, sep, alias = model[len("models:/"):].partition("@")
    if sep:
        ref, used = _resolve_alias(name, alias)
    else:
        ref, used = resolve_ref(model), None
    return ref, ModelInfo(name=ref.name or name, version=ref.version, alias=used, run_id=_run_id(ref))


def default_loader(cfg: ServeConfig) -> Loader:
    """What `cfg.backend` names, as a loader (a coroutine function for the openai backend)."""
    if cfg.backend == "openai":
        from kernelwright.serving.openai_startup import engine_loader

        return engine_loader(cfg)
    if cfg.backend.startswith("scripted:"):
        path = Path(cfg.backend.removeprefix("scripted:"))
        return lambda: (ScriptedBackend.from_file(path), ModelInfo(name="scripted", version="0"))

    def load_hf() -> tuple[ServingBackend, ModelInfo]:
        if cfg.model.startswith("models:/"):
            use_store(cfg)
        return _load_hf(*resolve_model(cfg.model), cfg)

    return load_hf


def batching_for(model: Any, cfg: ServeConfig, name: str) -> str:
    """continuous or sequential: what `cfg.batching` asks for, where the model allows it (a warning where not)."""
    if cfg.batching == "sequential":
        return "sequential"
    from kernelwright.serving.batching import paged_cache_refuses

    refused = paged_cache_refuses(model.config)
    if not refused:
        return "continuous"
    asked = " (asked for: continuous)" if cfg.batching == "continuous" else ""
    log.warning("%s has %s layers, which transformers' continuous batching cannot hold: serving it with sequential "
                "batching (generate on one worker thread, waiting requests of the same sampling batched together)%s",
                name, ", ".join(refused), asked)
    return "sequential"


def static_cache_for(model: Any, cfg: ServeConfig) -> bool:
    """Whether sequential batching generates with a static KV cache: `cfg.kv_cache`, auto meaning on a CUDA device."""
    if cfg.kv_cache != "auto":
        return cfg.kv_cache == "static"
    return getattr(getattr(model, "device", None), "type", "cpu") == "cuda"


def hf_backend(model: Any, tokenizer: Any, cfg: ServeConfig, batching: str | None = None) -> ServingBackend:
    """The loaded model behind `batching` (continuous or sequential; None: `batching_for` the model)."""
    if (batching or batching_for(model, cfg, "the model")) == "sequential":
        from kernelwright.serving.hf import HFServingBackend

        return HFServingBackend(model, tokenizer, cfg.max_batch_sequences, cfg.stop_loops, static_cache_for(model, cfg))
    from kernelwright.serving.batching import ContinuousBatchingBackend, EngineSizes

    sizes = EngineSizes(cfg.cb_num_blocks, cfg.cb_page_size, cfg.cb_max_batch_tokens, cfg.cb_max_requests_per_batch,
                        cfg.cb_prefix_sharing)
    return ContinuousBatchingBackend(model, tokenizer, sizes)


def _load_hf(ref: ModelRef, info: ModelInfo, cfg: ServeConfig) -> tuple[ServingBackend, ModelInfo]:
    model, tokenizer = load_model(ref)
    name = f"{info.name} version {info.version}" if info.version else info.name
    batching = batching_for(model, cfg, name)
    backend = hf_backend(model, tokenizer, cfg, batching)
    log.info("loaded %s, %s batching", name, batching)
    warm_up = getattr(backend, "warm_up", None)
    if cfg.warm_up and warm_up is not None and (seconds := warm_up(cfg.default_max_new_tokens)) is not None:
        log.info("compiled the static KV cache's decoding step for %d new tokens in %.1f s", cfg.default_max_new_tokens,
                 seconds)
    return backend, info


def default_reloader(cfg: ServeConfig) -> Reloader | None:
    """Polls what `cfg.model`'s alias names now; None when there is no alias to follow or polling is off."""
    if cfg.backend != "hf" or not cfg.reload_interval_s or not cfg.model.startswith("models:/") or "@" not in cfg.model:
        return None

    def reload(current: ModelInfo) -> tuple[ServingBackend, ModelInfo] | None:
        ref, info = resolve_model(cfg.model)
        return None if info.version == current.version else _load_hf(ref, info, cfg)

    return reload
