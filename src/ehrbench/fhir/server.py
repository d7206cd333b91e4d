"""A read-only FHIR R4 REST endpoint (JSON) over one build's `fhir/resources.duckdb`: capabilities, read and search
(parameters, date semantics and bounds in ehrbench.fhir.search). Every error is an OperationOutcome: a bad or
oversized search 400, a search that runs past the timeout 503; nothing answers with a traceback."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from ehrbench.fhir.search import SearchIndex
from ehrbench.fhir.search_params import (
    DEFAULT_TIMEOUT_S,
    SearchError,
    SearchTimeout,
    check_format,
    parse_search,
    query_string,
    search_parameters,
)

FHIR_JSON = "application/fhir+json"
_ISSUE_CODES = {400: "invalid", 404: "not-found", 405: "not-supported", 503: "timeout"}


def fhir_response(body: dict, status_code: int = 200) -> Response:
    return Response(json.dumps(body), status_code=status_code, media_type=FHIR_JSON)


def operation_outcome(status_code: int, diagnostics: str) -> Response:
    response = fhir_response({"resourceType": "OperationOutcome", "issue": [{
        "severity": "error", "code": _ISSUE_CODES.get(status_code, "processing"), "diagnostics": diagnostics}]},
        status_code)
    if status_code == 405:
        response.headers["Allow"] = "GET"
    return response


def capability_statement(types: list[str], date: str) -> dict:
    return {
        "resourceType": "CapabilityStatement", "status": "active", "date": date, "kind": "instance",
        "fhirVersion": "4.0.1", "format": ["json"],
        "software": {"name": "ehrbench FHIR server"},
        "implementation": {"description": "Read-only FHIR R4 view of an ehrbench build"},
        "rest": [{"mode": "server", "resource": [{
            "type": resource_type,
            "interaction": [{"code": "read"}, {"code": "search-type"}],
            "searchParam": [{"name": name, "type": _PARAMETER_TYPES[name]}
                            for name in search_parameters(resource_type)],
        } for resource_type in types]}],
    }


_PARAMETER_TYPES = {"patient": "reference", "subject": "reference", "code": "token", "date": "date", "_id": "token",
                    "_count": "number"}


def create_app(resources_db: Path, *, search_timeout_s: float = DEFAULT_TIMEOUT_S,
               handling: str = "strict") -> FastAPI:
    """The app over one resources file; its search index is built here, before the app serves. A statement of a
    search or read is stopped after `search_timeout_s` (a 503); other requests are served meanwhile. `handling`: of
    a search parameter the type does not support, when the request's `Prefer: handling=` does not say — strict (a
    400) or lenient (ignored, as Google's FHIR store does by default)."""
    if handling not in ("strict", "lenient"):
        raise ValueError(f"handling {handling!r}: expected strict or lenient")
    index = SearchIndex(resources_db, timeout_s=search_timeout_s)
    # R4 requires a date; the build's is when its resources were written.
    built = datetime.fromtimestamp(resources_db.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        index.close()

    app = FastAPI(title="ehrbench FHIR R4 (read-only)", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.index = index

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:  # unknown paths too: OperationOutcome
        if exc.status_code == 404 and exc.detail == "Not Found":
            return operation_outcome(404, f"no FHIR interaction at {request.url.path}; this server answers "
                                          "/metadata, /<type>?<search> and /<type>/<id>")
        return operation_outcome(exc.status_code, str(exc.detail))

    @app.exception_handler(SearchError)
    async def search_error(_: Request, exc: SearchError) -> Response:
        return operation_outcome(503 if isinstance(exc, SearchTimeout) else 400, str(exc))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, _: Exception) -> Response:  # Starlette still logs the traceback
        return operation_outcome(500, f"internal error answering {request.url.path}; the server log has the details")

    @app.middleware("http")
    async def read_only(request: Request, call_next):  # before routing, so that any path answers 405, not 404
        if request.method not in ("GET", "HEAD"):
            return operation_outcome(405, f"{request.method} is not supported: this server is read-only")
        return await call_next(request)

    @app.get("/metadata")
    def metadata(request: Request) -> Response:
        _check_params(request, ())
        return fhir_response(capability_statement(list(index.types), built))

    @app.get("/{resource_type}")
    def search(resource_type: str, request: Request) -> Response:
        _check_type(resource_type)
        params = list(request.query_params.multi_items())
        query = parse_search(resource_type, params, lenient=_lenient(request, handling))
        result = index.search(query)
        base = str(request.base_url)
        links = [{"relation": "self", "url": f"{base}{resource_type}?{query_string(query, params, query.offset)}"}]
        if query.count and query.offset + query.count < result.total:
            next_offset = query.offset + query.count
            links.append({"relation": "next",
                          "url": f"{base}{resource_type}?{query_string(query, params, next_offset)}"})
        bundle = {"resourceType": "Bundle", "type": "searchset", "total": result.total, "link": links}
        if result.ids:  # FHIR JSON has no empty arrays
            bundle["entry"] = [{"fullUrl": f"{base}{resource_type}/{resource_id}", "resource": json.loads(text),
                                "search": {"mode": "match"}}
                               for resource_id, text in zip(result.ids, index.resources(resource_type, result.ids),
                                                            strict=True)]
        return fhir_response(bundle)

    @app.get("/{resource_type}/{resource_id}")
    def read(resource_type: str, resource_id: str, request: Request) -> Response:
        _check_type(resource_type)
        _check_params(request, ())
        text = index.read(resource_type, resource_id)
        if text is None:
            raise HTTPException(404, f"{resource_type}/{resource_id} not found")
        return Response(text, media_type=FHIR_JSON)

    def _check_type(resource_type: str) -> None:
        if resource_type not in index.types:
            raise HTTPException(404, f"unknown resource type '{resource_type}'; this server has: "
                                     f"{', '.join(index.types)}")

    return app


def _lenient(request: Request, default: str) -> bool:
    """FHIR's `Prefer: handling=strict|lenient` of the request, else the server's default."""
    for part in request.headers.get("prefer", "").split(","):
        name, _, value = part.strip().partition("=")
        if name.strip().lower() == "handling" and value.strip().lower() in ("strict", "lenient"):
            return value.strip().lower() == "lenient"
    return default == "lenient"


def _check_params(request: Request, allowed: tuple[str, ...]) -> None:
    params = list(request.query_params.multi_items())
    check_format(params)
    for name, _ in params:
        if name != "_format" and name not in allowed:
            raise SearchError(f"unknown parameter '{name}' for {request.url.path} (only _format is accepted)")
