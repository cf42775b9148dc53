"""The OpenAI-compatible routes, non-streaming and streaming, with the scripted backend."""

from __future__ import annotations

import json

import pytest

MODEL = "models:/kernelwright-coder@champion"


def _events(text: str) -> list[str]:
    return [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]


@pytest.mark.usefixtures("fake_compile")
def test_chat_completion_carries_each_choices_compile_result(client_for, good_text, broken_text) -> None:
    with client_for([good_text, broken_text]) as (client, backend):
        r = client.post("/v1/chat/completions", json={
            "model": MODEL, "n": 2, "seed": 3, "temperature": 0.7, "max_tokens": 32,
            "messages": [{"role": "user", "content": "Write ModelNew for ELU"}]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == MODEL
    first, second = body["choices"]
    assert first["message"] == {"role": "assistant", "content": good_text}
    assert first["kernelwright"]["compile"]["ok"] is True and second["kernelwright"]["compile"]["ok"] is False
    assert "class ModelNew" in first["kernelwright"]["code"]
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    assert backend.samplings[0].seed == 3 and backend.samplings[0].temperature == 0.7
    assert backend.samplings[0].max_new_tokens == 32


@pytest.mark.usefixtures("fake_compile")
def test_chat_completion_streams_sse_chunks_then_done(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post("/v1/chat/completions", json={
            "stream": True, "messages": [{"role": "user", "content": "ELU please"}]})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = _events(r.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == good_text
    last = chunks[-1]["choices"][0]
    assert last["finish_reason"] == "stop" and last["kernelwright"]["compile"]["ok"] is True


def test_completions_non_stream_and_stream(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        plain = client.post("/v1/completions", json={"prompt": "```python\n", "compile_check": False})
        streamed = client.post("/v1/completions", json={"prompt": "```python\n", "stream": True})
    assert plain.status_code == 200 and plain.json()["choices"][0]["text"] == good_text
    assert plain.json()["choices"][0]["kernelwright"]["compile"] is None
    events = _events(streamed.text)
    assert events[-1] == "[DONE]"
    text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
    assert text == good_text


@pytest.mark.parametrize(("body", "field"), [
    ({"stop": ["\n"]}, "stop"),
    ({"tools": [{"type": "function"}]}, "tools"),
    ({"logprobs": True}, "logprobs"),
    ({"presence_penalty": 0.5}, "presence_penalty"),
    ({"n": 9}, "n"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"messages": []}, "messages"),
])
def test_what_cannot_be_honoured_is_a_400(client_for, good_text, body, field) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], **body})
    assert r.status_code == 400, r.text
    assert field in r.text


def test_an_unknown_model_is_a_404_and_models_lists_the_served_one(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post("/v1/chat/completions", json={"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]})
        listed = client.get("/v1/models").json()
    assert r.status_code == 404 and "gpt-4" in r.json()["error"]["message"]
    assert [m["id"] for m in listed["data"]] == [MODEL] and listed["object"] == "list"
