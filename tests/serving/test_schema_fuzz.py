"""schemathesis against the app's own OpenAPI schema, in-process: no 5xx, every status documented.

The examples per operation are bounded (MAX_EXAMPLES), so the whole run stays well under a minute
on two CPU cores; the scripted backend answers and the compile check is the test stand-in.
"""

from __future__ import annotations

import re

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis import checks  # noqa: E402, F401
from schemathesis.config import SchemathesisConfig  # noqa: E402

from kernelwright.serving import compiling  # noqa: E402
from kernelwright.serving.app import create_app  # noqa: E402
from kernelwright.serving.backend import ScriptedBackend  # noqa: E402
from kernelwright.serving.config import ServeConfig  # noqa: E402
from tests.serving.conftest import FakeCompileCheck  # noqa: E402

KEY = "fuzz-key-123"
# a schema-valid body may still break a rule no OpenAPI schema states (exactly one of reference_code and
# instruction, the configured limits below the types' ceilings): a 400 naming the field is right there
SEMANTIC = [schemathesis.checks.positive_data_acceptance]
MAX_EXAMPLES = 25
ANSWER = "```python\nclass ModelNew:\n    pass\n```"
CFG = ServeConfig(api_keys=[KEY], max_queue=0, compile_host=False, max_body_bytes=20_000, max_code_chars=4_000)
# a schema-violating body may also be over the body limit: refusing it with 413 is a rejection too
REJECTED = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5XX"]
CONFIG = SchemathesisConfig.from_dict({"checks": {"negative_data_rejection": {"expected-statuses": REJECTED}}})
schema = schemathesis.openapi.from_asgi("/schema/openapi.json", create_app(CFG, ScriptedBackend([ANSWER])),
                                        config=CONFIG)


@pytest.fixture(autouse=True)
def _fake_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiling, "_module", lambda: FakeCompileCheck)


def _operation_test(one: schemathesis.BaseSchema):  # type: ignore[no-untyped-def]
    """The test of one operation. One test function each: the items of one function that schemathesis makes per
    operation share a node id under pytest 9, and a parallel test run (pytest-xdist) runs one item per node id."""

    @one.parametrize()
    @settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    def test(case) -> None:  # type: ignore[no-untyped-def]
        case.call_and_validate(headers={"Authorization": f"Bearer {KEY}"}, excluded_checks=SEMANTIC)

    return test


OPERATIONS = {f"{op.method} {op.path}": op for op in (r.ok() for r in schema.get_all_operations())}
ONE_EACH = {label: schema.include(method=op.method, path=op.path) for label, op in OPERATIONS.items()}
for _label, _one in ONE_EACH.items():
    globals()["test_the_api_keeps_to_its_schema_" + re.sub(r"\W+", "_", _label).strip("_")] = _operation_test(_one)


def test_each_schema_test_covers_its_one_operation() -> None:
    assert len(OPERATIONS) >= 7
    for label, one in ONE_EACH.items():
        assert [f"{r.ok().method} {r.ok().path}" for r in one.get_all_operations()] == [label]


DEEP = 3_000  # levels: past what a JSON decoder's stack holds, in a body under CFG's max_body_bytes


def _deep_bodies() -> list[tuple[str, str, bytes]]:
    """Per operation with a JSON body: the whole body nested deep (arrays, objects), then each field of it."""
    raw = schema.raw_schema
    cases = []
    for path, methods in raw["paths"].items():
        for method, spec in methods.items():
            body = spec.get("requestBody", {}).get("content", {}).get("application/json")
            if body is None:
                continue
            cases += [(path, method, b"[" * DEEP + b"]" * DEEP), (path, method, b'{"a":' * DEEP + b"0" + b"}" * DEEP)]
            fields = raw["components"]["schemas"][body["schema"]["$ref"].rsplit("/", 1)[-1]]["properties"]
            cases += [(path, method, b'{"%s": %s}' % (name.encode(), b"[" * DEEP + b"]" * DEEP)) for name in fields]
            if "messages" in fields:
                nested = b'{"c":' * DEEP + b"0" + b"}" * DEEP
                cases.append((path, method, b'{"messages": [{"role": "user", "content": %s}]}' % nested))
    return cases


@pytest.mark.parametrize(("path", "method", "body"), _deep_bodies(),
                         ids=lambda v: v[:24].decode() if isinstance(v, bytes) else v)
def test_deeply_nested_bodies_are_rejected_by_the_schema_checks(path: str, method: str, body: bytes) -> None:
    case = schema[path][method.upper()].Case(body=body, media_type="application/json")
    response = case.call_and_validate(headers={"Authorization": f"Bearer {KEY}"}, excluded_checks=SEMANTIC)
    assert response.status_code == 400 and "nested" in response.json()["error"]["message"]
