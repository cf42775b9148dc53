"""Per-API-key rate limits: 429 with Retry-After, keys never stored or logged, counts shared through Redis."""

from __future__ import annotations

import logging
import socket
import uuid

import pytest
from litestar.testing import TestClient

from kernelwright.serving.app import create_app
from kernelwright.serving.backend import ScriptedBackend
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.ratelimit import key_digest

REDIS_URL = "redis://127.0.0.1:6379/0"


def _redis_reachable() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_each_key_has_its_own_budget_and_the_429_says_when(client_for, good_text, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    with client_for([good_text], api_keys=["key-a-123", "key-b-456"], rate_limit_per_minute=2) as (client, _):
        a = [client.get("/v1/models", headers=_auth("key-a-123")) for _ in range(3)]
        b = client.get("/v1/models", headers=_auth("key-b-456"))
        health = [client.get("/healthz") for _ in range(3)]
    assert [r.status_code for r in a] == [200, 200, 429] and b.status_code == 200
    assert all(r.status_code == 200 for r in health)
    limited = a[2]
    assert 1 <= int(limited.headers["retry-after"]) <= 60 and limited.headers["ratelimit-limit"] == "2"
    assert limited.json()["error"]["code"] == 429 and "rate limit" in limited.json()["detail"]
    assert a[0].headers["ratelimit-remaining"] == "1"
    assert "key-a-123" not in caplog.text and "key-a-123" not in limited.text


def test_no_limit_by_default_and_addresses_count_without_keys(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        assert all(client.get("/v1/models").status_code == 200 for _ in range(5))
    with client_for([good_text], rate_limit_per_minute=1) as (client, _):
        assert [client.get("/v1/models").status_code for _ in range(2)] == [200, 429]


def test_an_unreachable_redis_is_a_503_not_a_500(good_text) -> None:
    cfg = ServeConfig(api_keys=["k-1"], rate_limit_per_minute=5, redis_url="redis://127.0.0.1:1/0")
    with TestClient(app=create_app(cfg, ScriptedBackend([good_text]))) as client:
        r = client.get("/v1/models", headers=_auth("k-1"))
    assert r.status_code == 503 and r.headers["retry-after"] and "redis" not in r.text.lower()


@pytest.mark.skipif(not _redis_reachable(), reason="no Redis server answers at 127.0.0.1:6379")
def test_two_servers_share_the_counts_through_redis(good_text) -> None:
    import redis

    key = f"shared-{uuid.uuid4().hex}"  # a fresh key: its count starts at zero whatever ran before
    cfg = ServeConfig(api_keys=[key], rate_limit_per_minute=3, redis_url=REDIS_URL)
    first, second = (TestClient(app=create_app(cfg, ScriptedBackend([good_text]))) for _ in range(2))
    with first, second:
        answers = [c.get("/v1/models", headers=_auth(key)).status_code for c in (first, second, first, second)]
    assert answers == [200, 200, 200, 429]
    stored = redis.Redis.from_url(REDIS_URL).keys("kernelwright-rate-limit*")
    assert any(key_digest(key).encode() in k for k in stored) and not any(key.encode() in k for k in stored)
