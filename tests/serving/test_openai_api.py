"""The OpenAI-compatible routes, non-streaming and streaming, with the scripted backend."""

from __future__ import annotations

import json

import pytest

from kernelwright.serving import openai_api
from kernelwright.serving.backend import EmptyPrompt

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
            "model": MODEL, "stream": True, "messages": [{"role": "user", "content": "ELU please"}]})
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
        plain = client.post("/v1/completions", json={"model": MODEL, "prompt": "```python\n", "compile_check": False})
        streamed = client.post("/v1/completions", json={"model": MODEL, "prompt": "```python\n", "stream": True})
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
    ({"store": True}, "store"),
    ({"service_tier": "priority"}, "service_tier"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),  # without stream: true
])
def test_what_cannot_be_honoured_is_a_400(client_for, good_text, body, field) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "x"}],
                                                      **body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field and field in r.json()["error"]["message"]


def test_an_unknown_model_is_a_404_and_models_lists_the_served_one(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post("/v1/chat/completions", json={"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]})
        listed = client.get("/v1/models").json()
    assert r.status_code == 404 and "gpt-4" in r.json()["error"]["message"]
    assert [m["id"] for m in listed["data"]] == [MODEL] and listed["object"] == "list"


def test_the_served_model_is_retrieved_by_its_id_and_another_is_a_404(client_for, good_text) -> None:
    """OpenAI's GET /v1/models/{model}, with the ids a chat request accepts (they hold slashes)."""
    with client_for([good_text]) as (client, _):
        card = client.get(f"/v1/models/{MODEL}")
        other = client.get("/v1/models/gpt-4")
    assert card.status_code == 200 and card.json()["id"] == MODEL and card.json()["object"] == "model"
    assert other.status_code == 404 and "gpt-4" in other.json()["error"]["message"]


@pytest.mark.parametrize(("route", "body", "field"), [
    ("/v1/chat/completions", {"frobnicate": 1}, "frobnicate"),
    ("/v1/chat/completions", {"tool_choice": "auto"}, "tool_choice"),
    ("/v1/completions", {"verify": True}, "verify"),
    ("/v1/chat/completions", {"stream": True, "stream_options": {"include_obfuscation": False}}, "stream_options"),
])
def test_unknown_fields_are_a_400_naming_them(client_for, good_text, route, body, field) -> None:
    base = {"messages": [{"role": "user", "content": "x"}]} if "chat" in route else {"prompt": "x"}
    with client_for([good_text]) as (client, backend):
        r = client.post(route, json={"model": MODEL, **base, **body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field and r.json()["error"]["type"] == "invalid_request_error"
    assert not backend.prompts  # refused before any generation


@pytest.mark.parametrize(("route", "body"), [("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}),
                                             ("/v1/completions", {"prompt": "x", "stream": True})])
def test_a_missing_model_is_a_400_naming_it(client_for, good_text, route, body) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post(route, json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "model" and "model" in r.json()["error"]["message"]


def test_fields_openai_clients_send_are_taken(client_for, good_text) -> None:
    ignored = {"user": "u1", "metadata": {"team": "k"}, "safety_identifier": "s", "prompt_cache_key": "p",
               "parallel_tool_calls": True, "service_tier": "auto", "store": False}
    with client_for([good_text]) as (client, _):
        chat = client.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "x"}],
                                                         "compile_check": False, **ignored})
        text = client.post("/v1/completions", json={"model": MODEL, "prompt": "x", "user": "u1", "stream": True,
                                                    "stream_options": {"include_usage": False}})
    assert chat.status_code == 200, chat.text
    assert text.status_code == 200 and _events(text.text)[-1] == "[DONE]", text.text


def test_n_choices_at_temperature_0_are_a_400_and_sampled_otherwise(client_for, good_text) -> None:
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "compile_check": False}
    with client_for([good_text]) as (client, backend):
        greedy_pair = client.post("/v1/chat/completions", json={**chat, "n": 2, "temperature": 0})
        streamed_pair = client.post("/v1/completions", json={"model": MODEL, "prompt": "x", "n": 2,
                                                              "temperature": 0, "stream": True})
        assert not backend.samplings
        pair = client.post("/v1/chat/completions", json={**chat, "n": 2})
        greedy = client.post("/v1/chat/completions", json={**chat, "temperature": 0})
    for refused in (greedy_pair, streamed_pair):
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "temperature", refused.text
    assert pair.status_code == 200 and len(pair.json()["choices"]) == 2
    assert greedy.status_code == 200
    assert [s.temperature for s in backend.samplings] == [openai_api.DEFAULT_TEMPERATURE] * 2 + [0.0]


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/completions"])
def test_include_usage_sends_a_last_chunk_with_the_usage(client_for, good_text, route) -> None:
    base = {"messages": [{"role": "user", "content": "ELU please"}]} if "chat" in route else {"prompt": "ELU"}
    body = {"model": MODEL, **base, "n": 2, "stream": True, "compile_check": False}
    with client_for([good_text]) as (client, _):
        counted = client.post(route, json={**body, "stream_options": {"include_usage": True}})
        plain = client.post(route, json=body)
    events = _events(counted.text)
    assert counted.status_code == 200 and events[-1] == "[DONE]", counted.text
    chunks = [json.loads(e) for e in events[:-1]]
    last = chunks[-1]
    assert last["choices"] == [] and last["id"] == chunks[0]["id"]
    usage = last["usage"]
    assert usage["completion_tokens"] == 2 * len(good_text.split()) and usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert all("usage" in c and c["usage"] is None for c in chunks[:-1])
    assert all(c["choices"] for c in chunks[:-1])
    assert all("usage" not in json.loads(e) for e in _events(plain.text)[:-1])  # not asked: OpenAI sends none


def test_the_openai_client_reads_the_usage_chunk(client_for, good_text) -> None:
    openai = pytest.importorskip("openai")
    with client_for([good_text]) as (client, _):
        api = openai.OpenAI(base_url=f"{client.base_url}/v1", api_key="none", http_client=client)
        chunks = list(api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}],
                                                  stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == len(good_text.split())
    assert "".join(c.choices[0].delta.content or "" for c in chunks[:-1]) == good_text


def test_an_empty_prompt_is_a_400_naming_the_prompt(client_for) -> None:
    """An empty prompt leaves the model nothing to continue from: refused by the schema, and by the backend
    where a tokenizer makes no tokens of a prompt that is not empty."""
    with client_for(["x"]) as (client, backend):
        empty = client.post("/v1/completions", json={"model": MODEL, "prompt": ""})

        async def no_tokens(prompts, sampling):  # type: ignore[no-untyped-def]
            raise EmptyPrompt("the prompt has no tokens: there is nothing to continue from")

        backend.generate = no_tokens  # type: ignore[method-assign]
        tokenless = client.post("/v1/completions", json={"model": MODEL, "prompt": " "})
    assert empty.status_code == 400 and empty.json()["detail"].startswith("prompt"), empty.text
    assert tokenless.status_code == 400, tokenless.text
    assert tokenless.json()["detail"] == "prompt: the prompt has no tokens: there is nothing to continue from"


@pytest.mark.parametrize("field, value", [
    ("stop", []), ("stop", ""), ("top_logprobs", None), ("top_logprobs", 0), ("tool_choice", "none"),
    ("tool_choice", None), ("functions", []), ("function_call", "none"), ("modalities", ["text"]), ("audio", None),
    ("prediction", None), ("reasoning_effort", None),
])
def test_a_field_at_a_value_that_asks_for_nothing_is_taken(client_for, field: str, value: object) -> None:
    """Clients fill such fields with their defaults; only a value that asks for something is refused."""
    with client_for(["x"]) as (client, _):
        r = client.post("/v1/chat/completions", json={
            "model": MODEL, "compile_check": False, "messages": [{"role": "user", "content": "hi"}], field: value})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("field, value", [
    ("stop", ["\n"]), ("top_logprobs", 2), ("tool_choice", "auto"), ("functions", [{"name": "f"}]),
    ("function_call", "auto"), ("modalities", ["text", "audio"]), ("audio", {"voice": "alloy"}),
    ("prediction", {"type": "content", "content": "x"}), ("reasoning_effort", "low"),
])
def test_a_field_that_asks_for_what_the_server_does_not_do_is_a_400_naming_it(client_for, field: str,
                                                                                 value: object) -> None:
    with client_for(["x"]) as (client, backend):
        r = client.post("/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": "hi"}], field: value})
    assert r.status_code == 400 and r.json()["detail"] == f"{field}: {field} is not supported by this server", r.text
    assert backend.prompts == []  # refused before any generation


def test_a_developer_message_reaches_the_model_as_the_system_one(client_for) -> None:
    with client_for(["x"]) as (client, backend):
        r = client.post("/v1/chat/completions", json={"model": MODEL, "compile_check": False, "messages": [
            {"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}]})
    assert r.status_code == 200, r.text
    assert backend.prompts == [[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]]


def test_text_content_parts_are_joined_and_a_message_name_is_taken(client_for, good_text) -> None:
    """Many clients send a message's content as a list of text parts, as OpenAI's API allows."""
    messages = [{"role": "developer", "content": [{"type": "text", "text": "You write CUDA."}]},
                {"role": "user", "name": "alice",
                 "content": [{"type": "text", "text": "Write ModelNew"}, {"type": "text", "text": "for ELU"}]}]
    with client_for([good_text]) as (client, backend):
        r = client.post("/v1/chat/completions", json={"model": MODEL, "compile_check": False, "messages": messages})
    assert r.status_code == 200, r.text
    assert backend.prompts == [[{"role": "system", "content": "You write CUDA."},
                                {"role": "user", "content": "Write ModelNew\nfor ELU"}]]


@pytest.mark.parametrize(("content", "said"), [
    ([{"type": "text", "text": "ELU"}, {"type": "image_url", "image_url": {"url": "https://x/k.png"}}],
     "not a part of type 'image_url'"),
    ([{"type": "text"}], "not a text part without its text"),
])
def test_a_content_part_that_is_not_text_answers_400_naming_it(client_for, good_text, content, said) -> None:
    with client_for([good_text]) as (client, backend):
        r = client.post("/v1/chat/completions", json={
            "model": MODEL, "stream": True, "messages": [{"role": "user", "content": "hi"},
                                                         {"role": "user", "content": content}]})
    assert r.status_code == 400 and said in r.json()["detail"], r.text
    assert r.json()["error"]["param"] == f"messages[1].content[{len(content) - 1}]" and backend.prompts == []


def test_parts_count_toward_the_prompt_limit(client_for, good_text) -> None:
    parts = [{"type": "text", "text": "x" * 600} for _ in range(2)]
    with client_for([good_text], max_code_chars=1000) as (client, _):
        r = client.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": parts}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages", r.text
