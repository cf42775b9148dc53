"""JSON from outside the process: nothing but ValueError, however deep it nests."""

import json

import pytest

from kernelwright import jsontext


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a":' * 100_000, b"[" * 100_000])
def test_deep_nesting_is_a_decode_error_not_a_recursion_error(text) -> None:
    with pytest.raises(json.JSONDecodeError, match="nested more than"):
        jsontext.loads(text)


def test_ordinary_json_and_the_ordinary_errors() -> None:
    assert jsontext.loads(b'{"a": [1, 2]}') == {"a": [1, 2]}
    nested = jsontext.loads("[" * 50 + "]" * 50)  # deep, but within the parser's reach
    for _ in range(49):
        assert isinstance(nested, list) and len(nested) == 1
        nested = nested[0]
    assert nested == []
    with pytest.raises(ValueError):
        jsontext.loads("{not json")
    with pytest.raises(ValueError):
        jsontext.loads(b"\xff\xfe\x00")


def test_a_number_is_a_json_number_and_never_a_bool() -> None:
    assert jsontext.number(3) == 3.0 and isinstance(jsontext.number(3), float) and jsontext.number(0.5) == 0.5
    assert [jsontext.number(v) for v in (True, False, "1.5", None, [1], {"a": 1})] == [None] * 6
