"""POST /v1/kernels/generate with the scripted backend."""

from __future__ import annotations

import pytest

from kernelwright.serving import compiling
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.kernels import SAMPLED_TEMPERATURE


def test_a_seed_solution_is_compile_checked(client_for, good_text, seed_reference) -> None:
    with client_for([good_text]) as (client, backend):
        r = client.post("/v1/kernels/generate", json={"reference_code": seed_reference, "seed": 7,
                                                       "temperature": 0.5, "max_new_tokens": 64})
    assert r.status_code == 200, r.text
    body = r.json()
    (cand,) = body["candidates"]
    assert "class ModelNew" in cand["code"] and "```" not in cand["code"]
    assert backend.samplings[0].seed == 7 and backend.samplings[0].temperature == 0.5
    assert backend.samplings[0].max_new_tokens == 64
    assert seed_reference.strip() in backend.prompts[0][1]["content"]
    if compiling._module() is None:
        assert cand["compile"]["ok"] is False and cand["compile"]["device"]["status"] == "unavailable"
    else:
        assert cand["compile"]["ok"] is True, cand["compile"]
        assert cand["compile"]["device"]["status"] == "ok"
        assert any("__global__" in s for s in cand["cuda_sources"])
    assert body["model"] == {"name": "models:/kernelwright-coder@champion", "version": None, "alias": None,
                             "run_id": None}
    assert body["usage"]["completion_tokens"] > 0 and set(body["timings"]) == {"generate_s", "compile_s"}


@pytest.mark.usefixtures("fake_compile")
def test_a_broken_kernel_is_repaired_with_its_compiler_log(client_for, broken_text, good_text, seed_reference):
    with client_for([broken_text, good_text]) as (client, backend):
        r = client.post("/v1/kernels/generate", json={"reference_code": seed_reference, "repair": "feedback"})
    (cand,) = r.json()["candidates"]
    assert cand["compile"]["ok"] is True and cand["repairs"] == 1
    repair_prompt = backend.prompts[1]
    assert repair_prompt[2] == {"role": "assistant", "content": broken_text}
    assert "is undefined" in repair_prompt[3]["content"]


@pytest.mark.usefixtures("fake_compile")
def test_a_broken_kernel_is_drawn_again_from_its_prompt_by_default(client_for, broken_text, good_text,
                                                                   seed_reference) -> None:
    """The server's own models never trained on a compiler log: a failed candidate is sampled again from
    the same prompt, never greedy (which would repeat it), each attempt on its own seed where one was given."""
    with client_for([broken_text, good_text]) as (client, backend):
        r = client.post("/v1/kernels/generate", json={"reference_code": seed_reference})
    (cand,) = r.json()["candidates"]
    assert cand["compile"]["ok"] is True and cand["repairs"] == 1
    assert backend.prompts[1] == backend.prompts[0]  # the same prompt, no log
    assert backend.samplings[0].temperature == 0.0 and backend.samplings[1].temperature == 0.2
    with client_for([broken_text, broken_text, good_text], resample_temperature=0.5) as (client, backend):
        r = client.post("/v1/kernels/generate", json={"reference_code": seed_reference, "seed": 11,
                                                       "repair_attempts": 3})
    assert r.json()["candidates"][0]["repairs"] == 2 and len(backend.prompts) == 3
    assert [(s.temperature, s.seed) for s in backend.samplings] == [(0.0, 11), (0.5, 12), (0.5, 13)]
    with client_for([broken_text, good_text]) as (client, backend):
        client.post("/v1/kernels/generate", json={"reference_code": seed_reference, "temperature": 0.9})
    assert [s.temperature for s in backend.samplings] == [0.9, 0.9]  # a sampled request's own temperature


def test_the_repair_mode_is_checked(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post("/v1/kernels/generate", json={"instruction": "x", "repair": "pray"})
    assert r.status_code == 400 and "repair" in r.text
    for bad in ({"repair": "sometimes"}, {"resample_temperature": 0.0}, {"resample_temperature": 2.5}):
        with pytest.raises(ValueError, match="repair|resample_temperature"):
            ServeConfig(**bad)


@pytest.mark.usefixtures("fake_compile")
def test_compiled_candidates_come_first_and_no_repair_means_failed_stays(client_for, broken_text, good_text,
                                                                          seed_reference) -> None:
    with client_for([broken_text, good_text]) as (client, backend):
        r = client.post("/v1/kernels/generate", json={"reference_code": seed_reference, "n": 2,
                                                       "repair_attempts": 0})
    oks = [c["compile"]["ok"] for c in r.json()["candidates"]]
    assert oks == [True, False] and len(backend.prompts) == 2


@pytest.mark.usefixtures("fake_compile")
def test_repairs_stop_after_the_attempts(client_for, broken_text, seed_reference) -> None:
    with client_for([broken_text]) as (client, backend):
        r = client.post("/v1/kernels/generate", json={"reference_code": seed_reference, "n": 2,
                                                       "repair_attempts": 2})
    cands = r.json()["candidates"]
    assert [c["compile"]["ok"] for c in cands] == [False, False] and [c["repairs"] for c in cands] == [2, 2]
    assert len(backend.prompts) == 6 and r.json()["candidates"][0]["compile"]["device"]["status"] == "failed"


def test_no_compile_check_marks_nothing(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post("/v1/kernels/generate", json={"instruction": "Write a ReLU kernel.",
                                                       "compile_check": False})
    (cand,) = r.json()["candidates"]
    assert cand["compile"] is None and cand["cuda_sources"] and r.json()["timings"]["compile_s"] == 0


@pytest.mark.parametrize(("body", "field"), [
    ({}, "reference_code"),
    ({"reference_code": "x", "instruction": "y"}, "instruction"),
    ({"instruction": "   "}, "instruction"),
    ({"instruction": "x", "n": 9}, "n"),
    ({"instruction": "x", "n": 0}, "n"),
    ({"instruction": "x", "max_new_tokens": 5000}, "max_new_tokens"),
    ({"instruction": "x", "temperature": -1}, "temperature"),
    ({"instruction": "x", "repair_attempts": 4}, "repair_attempts"),
    ({"instruction": "x", "verify": True}, "verify"),
    ({"instruction": "x", "nonsense": 1}, "nonsense"),
    ({"instruction": "x", "n": 2, "temperature": 0}, "temperature"),  # two greedy candidates: the same twice
    ({"instruction": "x" * 101}, "instruction"),
])
def test_bad_bodies_answer_400_naming_the_field(client_for, good_text, body, field) -> None:
    with client_for([good_text], max_code_chars=100, max_n=8) as (client, _):
        r = client.post("/v1/kernels/generate", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field and field in r.json()["detail"] and "Traceback" not in r.text
    if field == "verify":
        assert "verify is not available in this server" in r.json()["detail"]


def test_configured_limits_below_the_ceilings(client_for, good_text) -> None:
    with client_for([good_text], max_n=2, max_new_tokens=100, default_max_new_tokens=50) as (client, _):
        n = client.post("/v1/kernels/generate", json={"instruction": "x", "n": 3})
        tokens = client.post("/v1/kernels/generate", json={"instruction": "x", "max_new_tokens": 101})
    assert n.status_code == 400 and n.json()["error"]["param"] == "n"
    assert tokens.status_code == 400 and tokens.json()["error"]["param"] == "max_new_tokens"


def test_malformed_json_is_a_400(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post("/v1/kernels/generate", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400


def test_several_candidates_are_sampled_unless_a_temperature_is_given(client_for, good_text) -> None:
    body = {"instruction": "a ReLU kernel", "compile_check": False}
    with client_for([good_text]) as (client, backend):
        answers = [client.post("/v1/kernels/generate", json={**body, **extra})
                   for extra in ({"n": 2}, {}, {"n": 2, "temperature": 0.3}, {"temperature": 0})]
    assert [r.status_code for r in answers] == [200] * 4, [r.text for r in answers]
    assert SAMPLED_TEMPERATURE > 0
    assert [s.temperature for s in backend.samplings] == [SAMPLED_TEMPERATURE] * 2 + [0.0] + [0.3] * 2 + [0.0]


def test_a_candidate_that_does_not_parse_fails_one_stage_and_skips_the_other(client_for, good_text) -> None:
    unparsable = "```python\nclass ModelNew(:\n    pass\n```"
    with client_for([unparsable, good_text]) as (client, backend):
        r = client.post("/v1/kernels/generate", json={"instruction": "a ReLU kernel", "repair_attempts": 1,
                                                       "repair": "feedback"})
    (cand,) = r.json()["candidates"]
    assert cand["repairs"] == 1 and "python_syntax" in backend.prompts[1][3]["content"]  # repaired with the reason
    with client_for([unparsable]) as (client, _):
        r = client.post("/v1/kernels/generate", json={"instruction": "a ReLU kernel", "repair_attempts": 0})
    compile_info = r.json()["candidates"][0]["compile"]
    device, host = compile_info["device"], compile_info["host"]
    assert compile_info["ok"] is False
    assert device["status"] == "failed" and device["log"].startswith("python_syntax: line 1")
    assert host["status"] == "skipped" and "the Python source did not parse" in host["log"]
    assert host["log"] != device["log"] and host["seconds"] == 0
