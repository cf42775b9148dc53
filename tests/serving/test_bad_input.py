"""Whatever a client sends, the answer is a 4xx with a JSON error, never a 5xx or a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.config import parse_config
from kernelwright.serving.config import ServeConfig

ROUTES = ["/v1/kernels/generate", "/v1/chat/completions", "/v1/completions"]
MODEL = "models:/kernelwright-coder@champion"
BODIES: list[object] = [
    None, [], "text", 3, {"n": "two"}, {"messages": "hi"}, {"messages": [{"role": "robot", "content": "x"}]},
    {"messages": [{"role": "user"}]}, {"prompt": None}, {"instruction": 7}, {"reference_code": ["a"]},
    {"instruction": "x", "seed": -1}, {"instruction": "x", "seed": 2**70}, {"instruction": "x", "temperature": "hot"},
    {"instruction": "x", "max_new_tokens": 1.5}, {"prompt": "x", "max_tokens": -3}, {"prompt": "x", "n": None},
    {"prompt": "\u0000\uffff", "top_p": 0}, {"messages": [{"role": "user", "content": "x"}] * 65},
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("body", BODIES, ids=lambda b: json.dumps(b)[:40])
def test_malformed_bodies_are_4xx(client_for, good_text, route: str, body: object) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post(route, json=body)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    assert "Traceback" not in r.text and r.json()["error"]["message"]


@pytest.mark.parametrize(("body", "field"), [
    ({"instruction": "x", "n": "2"}, "n"), ({"instruction": "x", "compile_check": 1}, "compile_check"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "logprobs": 0}, "logprobs"),
])
def test_no_lax_coercion_strings_or_numbers_for_other_types(client_for, good_text, body, field) -> None:
    route = "/v1/kernels/generate" if "instruction" in body else "/v1/chat/completions"
    with client_for([good_text]) as (client, _):
        r = client.post(route, json=body)
    assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text


@pytest.mark.parametrize("route", ROUTES)
def test_wrong_content_and_methods_are_4xx(client_for, good_text, route: str) -> None:
    with client_for([good_text]) as (client, _):
        answers = [client.post(route, content=b"\xff\xfe garbage", headers={"content-type": "application/json"}),
                   client.post(route, content=b"a=b", headers={"content-type": "application/x-www-form-urlencoded"}),
                   client.get(route), client.delete(route)]
    assert all(400 <= r.status_code < 500 for r in answers), [(r.status_code, r.text) for r in answers]


@pytest.mark.usefixtures("fake_compile")
def test_two_streamed_choices_each_end_with_their_compile_result(client_for, good_text, broken_text) -> None:
    with client_for([good_text, broken_text]) as (client, _):
        r = client.post("/v1/chat/completions", json={"model": MODEL, "stream": True, "n": 2,
                                                       "messages": [{"role": "user", "content": "x"}]})
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    finals = [e["choices"][0] for e in events if e["choices"][0]["finish_reason"]]  # in the order they finished
    assert sorted((f["index"], f["kernelwright"]["compile"]["ok"]) for f in finals) == [(0, True), (1, False)]


def test_a_yaml_config_fills_serve_config(tmp_path: Path) -> None:
    (tmp_path / "serve.yaml").write_text("port: 9000\napi_keys: [a, b]\nmax_queue: 0\n")
    cfg = parse_config(ServeConfig, ["--config", str(tmp_path / "serve.yaml"), "--max_n", "2"], "serve")
    assert (cfg.port, cfg.api_keys, cfg.max_queue, cfg.max_n, cfg.host) == (9000, ["a", "b"], 0, 2, "127.0.0.1")
