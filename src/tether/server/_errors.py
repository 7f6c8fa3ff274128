"""One JSON error shape for every failure, and the HTTP status of each library error.

    {"error": {"type": "DocumentNotFound", "message": "no document with id 'x'", "status": 404}}

Bad input is a 4xx, never a 500: a library error maps by its class (the most specific
first), a request that does not fit the schema is 422, and what a key may not see is the
same 404 as what does not exist.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tether.errors import (
    ConfigurationError,
    EmbeddingsUnavailable,
    EmptyDocument,
    GenerationBlocked,
    IndexingFailed,
    IngestError,
    InvalidArgument,
    LoadLimitExceeded,
    NotFound,
    RetrievalTimeout,
    SchemaVersionError,
    ScopeError,
    StorageFull,
    StorageReadOnly,
    StoreCorrupt,
    TetherError,
    UnreadableFile,
    UnsupportedFileType,
)

logger = logging.getLogger("tether.server")

#: Library error classes and their HTTP status, most specific first (the first class in
#: an error's MRO that is listed wins).
STATUS: dict[type[TetherError], int] = {
    NotFound: 404,
    ScopeError: 400,
    InvalidArgument: 400,
    LoadLimitExceeded: 413,
    UnsupportedFileType: 415,
    EmptyDocument: 422,
    UnreadableFile: 422,
    IndexingFailed: 422,
    IngestError: 422,
    GenerationBlocked: 409,
    RetrievalTimeout: 504,
    EmbeddingsUnavailable: 503,
    SchemaVersionError: 503,
    StorageFull: 507,
    StorageReadOnly: 503,
    StoreCorrupt: 503,
    ConfigurationError: 503,
}


_HTTP_KINDS = {
    401: "Unauthorized",
    404: "NotFound",
    405: "MethodNotAllowed",
    413: "RequestTooLarge",
}


class ApiError(Exception):
    """An error the shell itself raises: a status, a type name and a message."""

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.headers = headers
        self.extra = extra


def not_found(what: str, ident: str) -> ApiError:
    """The 404 of something missing, or of something this key may not see: the two
    must read the same, so that a key learns nothing of what it cannot see."""
    return ApiError(404, "NotFound", f"no {what} {ident!r}")


def status_of(exc: TetherError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def error_body(status: int, kind: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, "status": status, **extra}}


def install(app: FastAPI) -> None:
    """Register the handlers that give every error the one shape."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(
            error_body(exc.status, exc.kind, exc.message, **exc.extra),
            status_code=exc.status,
            headers=exc.headers,
        )

    @app.exception_handler(TetherError)
    async def _library_error(_: Request, exc: TetherError) -> JSONResponse:
        status = status_of(exc)
        if status >= 500:
            logger.error("%s: %s", type(exc).__name__, exc)
        extra: dict[str, Any] = {}
        if isinstance(exc, GenerationBlocked):
            extra["advisory"] = exc.advisory
        return JSONResponse(
            error_body(status, type(exc).__name__, str(exc), **extra), status_code=status
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {"loc": [str(p) for p in e.get("loc", ())], "message": str(e.get("msg", ""))}
            for e in exc.errors()
        ]
        message = "; ".join(f"{'.'.join(p['loc'])}: {p['message']}" for p in problems)
        return JSONResponse(
            error_body(422, "ValidationError", message or "invalid request", problems=problems),
            status_code=422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {
            404: "NotFound",
            405: "MethodNotAllowed",
            401: "Unauthorized",
            413: "RequestTooLarge",
        }.get(exc.status_code, "HTTPError")
        return JSONResponse(
            error_body(exc.status_code, kind, str(exc.detail)),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )
