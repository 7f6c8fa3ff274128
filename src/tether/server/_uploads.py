"""Uploads: the body of ``POST /v1/documents`` read from the stream after the key is
checked, each file written straight into a private folder and held to
``rag.max_file_bytes`` as it arrives; the names the client gave kept apart from the
server's own, so no response shows a temporary path."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import pydantic
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.concurrency import run_in_threadpool

from tether import IndexResult
from tether.ingest.loaders import byte_size
from tether.server._errors import ApiError

#: The most files one upload may carry, and the most bytes of each of its other fields.
MAX_UPLOAD_FILES = 1000
MAX_FIELD_BYTES = 64 << 10
_UNSAFE = re.compile(r"[^\w.\- ]+")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UploadForm(_Strict):
    """The fields of an upload besides its files."""

    workspace_id: str | None = Field(
        default=None,
        max_length=512,
        description="Default: the session's, else the key's only"
        " workspace, else the global library",
    )
    session_id: str | None = Field(default=None, max_length=512, description="Attach to it")
    tags: str | None = Field(default=None, description="Tags as a JSON object")
    wait: bool = Field(default=False, description="Index before answering (200, the results)")


def upload_body() -> dict[str, Any]:
    """The OpenAPI request body of an upload (the route reads the stream itself, after
    the key is checked, so FastAPI cannot derive it): the files and :class:`UploadForm`,
    each field a plain string as multipart sends it."""
    fields = UploadForm.model_fields
    text = {"type": "string", "maxLength": 512}
    properties = {
        "files": {
            "type": "array",
            "items": {"type": "string", "format": "binary"},
            "minItems": 1,
            "description": "One or more files (pdf, md, txt, html)",
        },
        "workspace_id": {**text, "description": fields["workspace_id"].description},
        "session_id": {**text, "description": fields["session_id"].description},
        "tags": {"type": "string", "description": fields["tags"].description},
        "wait": {"type": "boolean", "default": False, "description": fields["wait"].description},
    }
    schema = {
        "type": "object",
        "properties": properties,
        "required": ["files"],
        "additionalProperties": False,
    }
    return {"required": True, "content": {"multipart/form-data": {"schema": schema}}}


def parse_tags(raw: str | None) -> dict[str, Any] | None:
    if raw is None or not raw.strip():
        return None
    try:
        tags = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ApiError(422, "ValidationError", f"tags must be a JSON object: {exc}") from None
    if not isinstance(tags, dict):
        raise ApiError(422, "ValidationError", "tags must be a JSON object")
    return tags


def safe_name(name: str | None, used: set[str]) -> str:
    """A file name of our own for an upload: its base name, plain characters only, its
    suffix kept (it picks the loader), unique in the folder."""
    base = Path((name or "").replace("\\", "/")).name
    stem, suffix = Path(base).stem, Path(base).suffix.lower()
    stem = _UNSAFE.sub("_", stem).strip(" .")[:100] or "upload"
    suffix = _UNSAFE.sub("", suffix)[:10]
    candidate, n = f"{stem}{suffix}", 1
    while candidate in used:
        n += 1
        candidate = f"{stem}-{n}{suffix}"
    used.add(candidate)
    return candidate


def too_large(name: str, max_bytes: int) -> ApiError:
    return ApiError(
        413,
        "LoadLimitExceeded",
        f"{name}: is over rag.max_file_bytes ({byte_size(max_bytes)}); raise it or split the file",
    )


@dataclasses.dataclass
class Part:
    name: str = ""
    disposition: bytes = b""
    file: BinaryIO | None = None
    size: int = 0
    data: bytearray = dataclasses.field(default_factory=bytearray)


class Upload:
    """One multipart upload, read from the request stream: each ``files`` part written
    straight to a file of ``folder`` (a 413 as soon as one passes ``max_file_bytes``),
    the other fields (small) kept in memory."""

    def __init__(
        self, folder: Path, max_file_bytes: int, *, reserve: Callable[[int], bool] | None = None
    ) -> None:
        self.folder = folder
        self.max_file_bytes = max_file_bytes
        #: Asked before each piece of a file is kept: False refuses the upload (429).
        self.reserve = reserve
        #: The file bytes reserved so far.
        self.received = 0
        #: The saved files, each with the name the client gave it.
        self.files: dict[Path, str] = {}
        self.fields: dict[str, str] = {}
        self._used: set[str] = set()
        self._part = Part()
        self._header: tuple[bytearray, bytearray] = (bytearray(), bytearray())
        self._writes: list[tuple[BinaryIO, bytes]] = []
        self._ended = False

    async def receive(self, request: Request) -> None:
        kind, options = parse_options_header(request.headers.get("content-type"))
        if kind != b"multipart/form-data" or not options.get(b"boundary"):
            raise ApiError(
                422, "ValidationError", "send the files as multipart/form-data, field 'files'"
            )
        parser = MultipartParser(
            options[b"boundary"],
            {
                "on_part_begin": self._begin,
                "on_header_field": self._header_field,
                "on_header_value": self._header_value,
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": self._data,
                "on_part_end": self._end,
                "on_end": self._finished,
            },
        )
        try:
            async for chunk in request.stream():
                parser.write(chunk)
                if self._writes:  # file writes off the event loop, one hop per chunk read
                    writes, self._writes = self._writes, []
                    await run_in_threadpool(write_all, writes)
        except FormParserError as exc:
            raise ApiError(400, "BadRequest", f"malformed multipart body: {exc}") from None
        finally:  # after an error, files still open (the current one, one queued) close
            for file in {self._part.file, *(f for f, _ in self._writes)}:
                if file is not None:
                    file.close()
        if not self._ended:
            raise ApiError(400, "BadRequest", "the multipart body ended before its last boundary")

    def form(self) -> UploadForm:
        """The upload's other fields, checked (a 422 like any request body's)."""
        if not self.files:
            raise ApiError(422, "ValidationError", "no files in the upload (field 'files')")
        try:
            return UploadForm.model_validate(self.fields)
        except pydantic.ValidationError as exc:
            errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
            raise RequestValidationError(errors) from None

    # -- the parser's callbacks --

    def _begin(self) -> None:
        self._part = Part()

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header[0].extend(data[start:end])

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._header[1].extend(data[start:end])

    def _header_end(self) -> None:
        name, value = self._header
        if bytes(name).lower() == b"content-disposition":
            self._part.disposition = bytes(value)
        self._header = (bytearray(), bytearray())

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._part.disposition)
        if b"name" not in options:
            raise ApiError(400, "BadRequest", "a multipart part has no name")
        self._part.name = options[b"name"].decode("utf-8", "replace")
        if self._part.name != "files":
            if len(self.fields) >= len(UploadForm.model_fields):
                raise ApiError(422, "ValidationError", "too many fields in the upload")
            return
        if len(self.files) >= MAX_UPLOAD_FILES:
            raise ApiError(
                422, "ValidationError", f"at most {MAX_UPLOAD_FILES} files in one upload"
            )
        given = options[b"filename"].decode("utf-8", "replace") if b"filename" in options else ""
        path = self.folder / safe_name(given, self._used)
        self._part.file = path.open("xb")
        self.files[path] = given or path.name

    def _data(self, data: bytes, start: int, end: int) -> None:
        part = self._part
        part.size += end - start
        if part.file is None:
            if part.size > MAX_FIELD_BYTES:
                limit = byte_size(MAX_FIELD_BYTES)
                raise ApiError(422, "ValidationError", f"the field {part.name!r} is over {limit}")
            part.data.extend(data[start:end])
        elif part.size > self.max_file_bytes:
            raise too_large(self.files[Path(part.file.name)], self.max_file_bytes)
        else:
            if self.reserve is not None:
                if not self.reserve(end - start):
                    raise ApiError(
                        429,
                        "TooManyRequests",
                        "the server's queue of uploads waiting to be indexed is full"
                        " (server.max_queued_upload_bytes); retry later",
                        headers={"Retry-After": "10"},
                    )
                self.received += end - start
            self._writes.append((part.file, data[start:end]))

    def _end(self) -> None:
        part = self._part
        if part.file is not None:
            file, part.file = part.file, None
            self._writes.append((file, b""))  # closed after its last bytes are written
        else:
            try:
                self.fields[part.name] = part.data.decode("utf-8")
            except UnicodeDecodeError:
                raise ApiError(
                    422, "ValidationError", f"the field {part.name!r} is not UTF-8"
                ) from None

    def _finished(self) -> None:
        self._ended = True


def write_all(writes: list[tuple[BinaryIO, bytes]]) -> None:
    for file, data in writes:
        if data:
            file.write(data)
        else:
            file.close()


def named(result: IndexResult, names: dict[Path, str]) -> dict[str, Any]:
    """A result under the name the client uploaded, never the server's temporary path."""
    out = result.to_dict()
    name = next((n for p, n in names.items() if str(p) == result.source), None)
    if name is not None:
        out["source"] = name
        if out["error"]:
            out["error"] = out["error"].replace(result.source, name)
    return out
