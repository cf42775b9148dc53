"""Request bodies decoded strictly: each mistake is a 400 that names the field.

Litestar's own decoding of a msgspec Struct converts leniently ("2" for 2, 0 for false), and its
errors name `data`, not the field, for a body that is empty, not an object, or has an unknown or a
missing field. The /v1 POST routes take their body through `StrictBody[T]` instead: a DTO that
checks the decoded JSON, then decodes the raw bytes with msgspec's strict decoder into T:

- not JSON, or not a JSON object: says so;
- fields T does not have: named, each of them (the error's `param` is the first);
- required fields left out: named;
- any other value msgspec refuses: the field at its path (`messages[0].role`).

An empty body never reaches the DTO (Litestar hands the handler None): `present` says what to send.
The OpenAPI schema of the body is T's own, as it is without the DTO.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Generic, TypeVar

import msgspec
from litestar.dto import AbstractDTO
from litestar.exceptions import ValidationException
from litestar.typing import FieldDefinition

T = TypeVar("T")
BODY = "body"  # the error's key when no one field is at fault


def bad_field(name: str, message: str) -> ValidationException:
    """A 400 that names the field, in the shape of Litestar's own validation errors."""
    return ValidationException(f"{name}: {message}", extra=[{"key": name, "message": message, "source": "body"}])


def present(data: T | None, fields: str) -> T:
    """The decoded body; a 400 saying what to send when the request had none."""
    if data is None:
        raise bad_field(BODY, f"the request body is empty: send a JSON object with {fields}")
    return data


def check_fields(value: Any, model: type[Any]) -> None:
    """A 400 naming the first problem of a decoded body that is not an object, or has unknown or missing fields."""
    if not isinstance(value, dict):
        kind = "null" if value is None else "array" if isinstance(value, list) else type(value).__name__
        raise bad_field(BODY, f"the request body must be a JSON object, not {kind}")
    fields = msgspec.structs.fields(model)
    known = {f.encode_name for f in fields}
    unknown = [str(k) for k in value if k not in known]
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise bad_field(unknown[0], f"unknown field{plural} {', '.join(unknown)}: this route does not take "
                                    f"{'them' if plural else 'it'}")
    missing = [f.encode_name for f in fields if f.required and f.encode_name not in value]
    if missing:
        raise bad_field(missing[0], f"required, and missing from the request body ({', '.join(missing)})")


def _invalid(exc: msgspec.ValidationError) -> ValidationException:
    message = str(exc)
    _, _, where = message.rpartition(" - at `$.")  # msgspec says where only in its message
    return bad_field(where.rstrip("`") or BODY, message)


def decode(raw: bytes, model: type[T]) -> T:
    """`raw` as a `model`, strictly (no coercions), or a 400 naming what is wrong."""
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise bad_field(BODY, f"the request body is not valid JSON: {exc}") from None
    check_fields(value, model)
    try:
        return msgspec.json.decode(raw, type=model)
    except msgspec.ValidationError as exc:
        raise _invalid(exc) from None


class StrictBody(AbstractDTO[T], Generic[T]):
    """`dto=StrictBody[Model], return_dto=None` on a handler: its `data` decoded by `decode`."""

    @classmethod
    def create_for_field_definition(cls, field_definition: FieldDefinition, handler_id: str,
                                    backend_cls: Any = None) -> None:
        """Nothing to build: the body is decoded by msgspec into the model itself."""

    @classmethod
    def generate_field_definitions(cls, model_type: type[Any]) -> Generator[Any, None, None]:
        """No transfer model: the model's own fields are the body's."""
        yield from ()

    @classmethod
    def detect_nested_field(cls, field_definition: FieldDefinition) -> bool:
        return False

    @classmethod
    def create_openapi_schema(cls, field_definition: FieldDefinition, handler_id: str, schema_creator: Any) -> Any:
        return schema_creator.for_field_definition(FieldDefinition.from_annotation(cls.model_type))

    def decode_bytes(self, value: bytes) -> T:
        return decode(value, self.model_type)

    def decode_builtins(self, value: dict[str, Any]) -> T:
        check_fields(value, self.model_type)
        try:
            return msgspec.convert(value, self.model_type, strict=True)
        except msgspec.ValidationError as exc:
            raise _invalid(exc) from None
