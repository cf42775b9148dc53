"""Every /v1 POST body is decoded strictly, and what is wrong with it is said in words a client can act on."""

from __future__ import annotations

import pytest

MODEL = "models:/kernelwright-coder@champion"
ROUTES = {"/v1/kernels/generate": "reference_code or instruction", "/v1/chat/completions": "model and messages",
          "/v1/completions": "model and prompt"}
GOOD = {"/v1/kernels/generate": {"instruction": "a ReLU kernel"},
        "/v1/chat/completions": {"model": MODEL, "messages": [{"role": "user", "content": "x"}]},
        "/v1/completions": {"model": MODEL, "prompt": "x"}}


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("content_type", ["application/json", None])
def test_an_empty_body_says_what_to_send(client_for, good_text, route: str, content_type: str | None) -> None:
    with client_for([good_text]) as (client, backend):
        r = client.post(route, content=b"", headers={"content-type": content_type} if content_type else {})
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "the request body is empty" in message and ROUTES[route] in message, message
    assert "'data'" not in r.text and not backend.prompts


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize(("raw", "words"), [(b"null", "not null"), (b"[1]", "not array"), (b'"x"', "not str"),
                                            (b"{not json", "not valid JSON")])
def test_a_body_that_is_not_an_object_says_so(client_for, good_text, route: str, raw: bytes, words: str) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post(route, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and words in r.json()["error"]["message"], r.text
    assert r.json()["error"]["param"] == "body"


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_unknown_field_is_named(client_for, good_text, route: str) -> None:
    with client_for([good_text]) as (client, backend):
        r = client.post(route, json={**GOOD[route], "frobnicate": 1, "wibble": 2})
        good = client.post(route, json={**GOOD[route], "compile_check": False})
    assert r.status_code == 400 and r.json()["error"]["param"] == "frobnicate", r.text
    assert "frobnicate, wibble" in r.json()["error"]["message"]
    assert good.status_code == 200 and len(backend.prompts) == 1, good.text


@pytest.mark.parametrize(("route", "body", "field"), [
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "n": "2"}, "n"),
    ("/v1/completions", {"model": 3, "prompt": "x"}, "model"),
    ("/v1/kernels/generate", {"instruction": "x", "verify": 0}, "verify"),
])
def test_a_wrong_value_names_its_field(client_for, good_text, route: str, body: dict, field: str) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post(route, json=body)
    assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text
