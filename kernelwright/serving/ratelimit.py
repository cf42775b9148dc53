"""Per-API-key rate limits on the /v1 routes: Litestar's `RateLimitMiddleware` over a store.

Each key (a digest of it: the key itself is neither stored nor logged) may send
`rate_limit_per_minute` requests a minute; one more answers 429 with `Retry-After` and the
`RateLimit-*` headers. Without configured keys the client address is counted. The counts live
in the process's memory unless `redis_url` names a Redis server, where every worker and every
server that names the same one shares them.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from typing import Any

from litestar import Request
from litestar.exceptions import ServiceUnavailableException, TooManyRequestsException
from litestar.middleware.base import DefineMiddleware
from litestar.middleware.rate_limit import CacheObject, RateLimitConfig, RateLimitMiddleware, get_remote_address
from litestar.stores.base import Store
from litestar.stores.memory import MemoryStore
from litestar.types import Receive, Scope, Send

from kernelwright.serving.config import ServeConfig

log = logging.getLogger(__name__)
STORE_NAME = "kernelwright_rate_limit"
NAMESPACE = "kernelwright-rate-limit"
_DIGEST_SALT = b"kernelwright-rate-limit"


def _store_errors() -> tuple[type[BaseException], ...]:
    try:
        from redis.exceptions import RedisError
    except ImportError:
        return (OSError,)
    return (OSError, RedisError)


STORE_ERRORS = _store_errors()


def bearer_token(request: Request[Any, Any, Any]) -> str:
    scheme, _sep, token = request.headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" else ""


def key_digest(key: str) -> str:
    """What stands for an API key in the store (and anywhere else): a keyed digest, never the key."""
    return hmac.new(_DIGEST_SALT, key.encode(), hashlib.sha256).hexdigest()[:32]


def identifier(request: Request[Any, Any, Any]) -> str:
    """The counted identity: a configured key the request carries, else the client address."""
    keys: frozenset[str] = request.app.state.api_keys
    token = bearer_token(request)
    if token and any(hmac.compare_digest(token.encode(), k.encode()) for k in keys):
        return f"key:{key_digest(token)}"
    return f"addr:{get_remote_address(request)}"


class KeyRateLimitMiddleware(RateLimitMiddleware):
    """Litestar's middleware, with `Retry-After` on its 429 and a 503 when the shared store is down."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except TooManyRequestsException as exc:
            headers = dict(exc.headers or {})
            reset = headers.get(self.config.rate_limit_reset_header_key, "1")
            headers["Retry-After"] = str(max(1, int(reset)))
            raise TooManyRequestsException("rate limit of this API key reached: retry later",
                                           headers=headers) from None

    async def retrieve_cached_history(self, key: str, store: Store) -> CacheObject:
        try:
            return await super().retrieve_cached_history(key, store)
        except STORE_ERRORS as exc:
            raise _store_down(exc) from None

    async def set_cached_history(self, key: str, cache_object: CacheObject, store: Store) -> None:
        try:
            await super().set_cached_history(key, cache_object, store)
        except STORE_ERRORS as exc:
            raise _store_down(exc) from None


def _store_down(exc: BaseException) -> ServiceUnavailableException:
    log.error("the rate-limit store is unreachable: %s", type(exc).__name__)
    return ServiceUnavailableException("the rate-limit store is unreachable: retry later",
                                       headers={"Retry-After": "2"})


def rate_limit_middleware(cfg: ServeConfig) -> DefineMiddleware | None:
    """The middleware for the /v1 router; None when rate limits are off."""
    if not cfg.rate_limit_per_minute:
        return None
    return RateLimitConfig(rate_limit=("minute", cfg.rate_limit_per_minute), identifier_for_request=identifier,
                           middleware_class=KeyRateLimitMiddleware, store=STORE_NAME).middleware


def rate_limit_store(cfg: ServeConfig) -> Store:
    """A Redis store when `redis_url` is set (counts shared by every process naming it), else memory."""
    if not cfg.redis_url:
        return MemoryStore()
    from litestar.stores.redis import RedisStore

    return RedisStore.with_client(url=cfg.redis_url, namespace=NAMESPACE)


async def close_store(store: Store) -> None:
    """Close the store's connections (a Redis store's pool), at shutdown."""
    close = getattr(store, "__aexit__", None)
    if close is not None:
        await close(None, None, None)
