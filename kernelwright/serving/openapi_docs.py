"""What the OpenAPI schema at /schema says beyond what Litestar infers from the handlers.

- the bearer key the /v1 routes take (a security scheme);
- the statuses every /v1 route may answer (401 without a key, 404 for another model, 413, 429, 503;
  with the openai backend, 502 and 504 when the remote engine fails or is too slow);
- the streaming routes' two bodies: JSON, or Server-Sent Events with `stream: true`;
- `/metrics` in the Prometheus text format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar import Response, get
from litestar.exceptions import (
    HTTPException,
    NotAuthorizedException,
    NotFoundException,
    ServiceUnavailableException,
    TooManyRequestsException,
)
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.openapi.spec import Components, OpenAPIMediaType, Operation, Schema, SecurityScheme
from litestar.openapi.spec.enums import OpenAPIType
from litestar.plugins.prometheus import PrometheusController

BEARER = "bearer"
SECURITY: list[dict[str, list[str]]] = [{BEARER: []}]
COMPONENTS = Components(security_schemes={BEARER: SecurityScheme(type="http", scheme="bearer",
                                                                   description="an API key of the server")})


class BadGateway(HTTPException):
    """The remote engine (openai backend) answered an error or something unreadable."""

    status_code = 502


class GatewayTimeout(HTTPException):
    """The remote engine (openai backend) did not answer within backend_timeout_s."""

    status_code = 504


READ_ERRORS = [NotAuthorizedException, TooManyRequestsException, ServiceUnavailableException]
WRITE_ERRORS = [*READ_ERRORS, NotFoundException, RequestEntityTooLarge, BadGateway, GatewayTimeout]


# one event of the stream (before OpenAPI 3.2 the schema of an event-stream describes each event)
EVENT = Schema(type=OpenAPIType.OBJECT, required=["data"], properties={
    "data": Schema(type=OpenAPIType.STRING, description="a JSON chunk (a completion chunk, or an `error` "
                   "object), then `[DONE]`"),
    "event": Schema(type=OpenAPIType.STRING)})


@dataclass
class JSONOrEventStream(Operation):
    """A 200 that is one JSON object, or an event stream (`stream: true`): both media types documented."""

    def __post_init__(self) -> None:
        ok = (self.responses or {}).get("200")
        content = getattr(ok, "content", None)
        if not content or "application/json" not in content:
            return
        schema: Any = content["application/json"].schema
        if isinstance(schema, Schema) and schema.one_of:  # Litestar's union with the SSE class: keep the JSON one
            content["application/json"] = OpenAPIMediaType(schema=schema.one_of[0])
        content["text/event-stream"] = OpenAPIMediaType(schema=EVENT)


class MetricsController(PrometheusController):
    """Litestar's Prometheus controller, documented as the text format it answers."""

    @get(media_type="text/plain", summary="Prometheus metrics (text format)")
    async def get(self) -> Response:  # type: ignore[override]
        response: Response = await PrometheusController.get.fn(self)
        return response
