"""The OpenAPI 3.1 schema of the API, generated from the route table (``Endpoint``s) and the
response Structs (``duly._http.models``): nothing written by hand, nothing to drift."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from duly._http.api import Endpoint, Param
from duly._http.models import ErrorBody

__all__ = ["openapi"]

_REF: Final = "#/components/schemas/{name}"
_PATH_PARAM: Final = re.compile(r"{(\w+)(?::\w+)?}")
_REASONS: Final = {
    200: "OK",
    202: "Accepted",
    303: "See Other",
    400: "Malformed input",
    401: "Missing or unknown token",
    403: "The token may not do this (or a missing CSRF header)",
    404: "Not found",
    409: "The job's state forbids it",
    503: "The backend is unavailable",
}


def _param_schema(param: Param) -> dict[str, Any]:
    if param.kind == "int":
        schema: dict[str, Any] = {"type": "integer"}
        if param.minimum is not None:
            schema["minimum"] = param.minimum
        if param.maximum is not None:
            schema["maximum"] = param.maximum
    elif param.kind == "bool":
        schema = {"type": "boolean"}
    else:
        schema = {"type": "string"}
        if param.choices is not None:
            schema["enum"] = list(param.choices)
    if param.default is not None:
        schema["default"] = param.default
    return schema


def _operation(endpoint: Endpoint, schemas: dict[Any, Any]) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _PATH_PARAM.findall(endpoint.path)
    ]
    parameters += [
        {
            "name": p.name,
            "in": "query",
            "required": False,
            "description": p.description,
            "schema": _param_schema(p),
        }
        for p in endpoint.params
    ]
    ok: dict[str, Any] = {"description": _REASONS.get(endpoint.status, "OK")}
    if endpoint.media == "application/json":
        ok["content"] = {"application/json": {"schema": schemas[endpoint.response]}}
    else:
        ok["content"] = {endpoint.media: {"schema": {"type": "string"}}}
    responses: dict[str, Any] = {str(endpoint.status): ok}
    errors = set(endpoint.errors)
    if _PATH_PARAM.search(endpoint.path):
        errors.add(400)  # a path value with control characters, or too long
    if endpoint.access != "public":
        errors |= {401, 403} if endpoint.access == "admin" else {401}
    if endpoint.path.startswith("/api/") or endpoint.path == "/healthz":
        errors.add(503)
    for status in sorted(errors):
        responses[str(status)] = {
            "description": _REASONS[status],
            "content": {"application/json": {"schema": schemas[ErrorBody]}},
        }
    operation: dict[str, Any] = {
        "operationId": endpoint.function.__name__,
        "summary": endpoint.summary,
        "description": (endpoint.function.__doc__ or "").strip(),
        "tags": list(endpoint.tags),
        "parameters": parameters,
        "responses": responses,
    }
    if endpoint.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": schemas[endpoint.body]}},
        }
    operation["security"] = [] if endpoint.access == "public" else [{"bearer": []}]
    return operation


def openapi(endpoints: Sequence[Endpoint], version: str) -> dict[str, Any]:
    """The OpenAPI document of ``endpoints``."""
    types = sorted(
        {e.response for e in endpoints if e.response is not None}
        | {e.body for e in endpoints if e.body is not None}
        | {ErrorBody},
        key=lambda t: t.__name__,
    )
    refs, components = msgspec.json.schema_components(types, ref_template=_REF)
    schemas = dict(zip(types, refs, strict=True))
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        path = _PATH_PARAM.sub(r"{\1}", endpoint.path)
        paths.setdefault(path, {})[endpoint.method.lower()] = _operation(endpoint, schemas)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "duly",
            "version": version,
            "description": "duly's HTTP API: jobs, queues, workers, schedules, freshness, "
            "events. Read tokens may GET; admin tokens may also POST, PUT and DELETE.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
