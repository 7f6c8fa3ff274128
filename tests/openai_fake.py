"""A loopback fake of the OpenAI HTTP API, for tests that drive the real ``openai`` SDK.

It speaks the wire protocol (JSON over HTTP/1.1, bearer auth, OpenAI-style error bodies)
on ``127.0.0.1`` with a port chosen by the OS, from a ``ThreadingHTTPServer`` in a
background thread. Nothing is mocked on the client side: point ``base_url`` at
:attr:`FakeOpenAI.base_url` and the SDK does real HTTP.

Endpoints:

* ``POST /v1/embeddings``: deterministic vectors from a hashed bag of words (texts that
  share words are similar). ``dimensions`` sets the vector size (default ``dims``);
  ``encoding_format="base64"`` (the SDK's default when none is given) is honoured.
* ``POST /v1/chat/completions``: the next scripted reply (:meth:`FakeOpenAI.script_chat`),
  else an echo of the last user message. Non-streaming only.

Faults (:class:`Fault`) are queued with :meth:`FakeOpenAI.inject` and consumed one per
request (optionally only by requests to one path); :attr:`FakeOpenAI.outage` is a fault
applied to every request while it is set. Every request is recorded in
:attr:`FakeOpenAI.requests`.

    with FakeOpenAI() as fake:
        fake.inject(Fault.status(500), Fault.delay(1.0))
        client = openai.OpenAI(api_key=fake.api_key, base_url=fake.base_url)
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_API_KEY = "sk-fake-test-key"
DEFAULT_DIMS = 32

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "unknown_url"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", None),
}


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour. Build with the class methods.

    ``kind`` is one of ``status``, ``delay``, ``malformed_json``, ``missing_data``,
    ``wrong_count``, ``null_values``, ``shuffle``. ``path`` limits the fault to requests
    of that path (e.g. ``"/v1/embeddings"``); None matches any request.
    """

    kind: str
    status_code: int = 200
    message: str = ""
    seconds: float = 0.0
    delta: int = 0
    seed: int = 0
    path: str | None = None

    @classmethod
    def status(cls, code: int, message: str | None = None, *, path: str | None = None) -> Fault:
        """An HTTP error with an OpenAI-style ``{"error": {...}}`` body."""
        return cls("status", status_code=code, message=message or f"fake error {code}", path=path)

    @classmethod
    def delay(cls, seconds: float, *, path: str | None = None) -> Fault:
        """Wait ``seconds`` before answering normally (to trigger client timeouts)."""
        return cls("delay", seconds=seconds, path=path)

    @classmethod
    def malformed_json(cls, *, path: str | None = None) -> Fault:
        """A 200 with ``Content-Type: application/json`` whose body is not JSON."""
        return cls("malformed_json", path=path)

    @classmethod
    def missing_data(cls, *, path: str | None = None) -> Fault:
        """A well-formed embeddings answer without its ``data`` field."""
        return cls("missing_data", path=path)

    @classmethod
    def wrong_count(cls, delta: int = -1, *, path: str | None = None) -> Fault:
        """``delta`` vectors too many (positive) or too few (negative)."""
        return cls("wrong_count", delta=delta, path=path)

    @classmethod
    def null_values(cls, *, path: str | None = None) -> Fault:
        """``null`` entries inside the first vector (NaN once parsed as floats)."""
        return cls("null_values", path=path)

    @classmethod
    def shuffle(cls, seed: int = 0, *, path: str | None = None) -> Fault:
        """The ``data`` items in a shuffled order (each keeps its correct ``index``)."""
        return cls("shuffle", seed=seed, path=path)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # parsed JSON, or the raw text when it was not JSON
    fault: Fault | None = None
    at: float = field(default_factory=time.monotonic)  # when it arrived


@dataclass
class _State:
    api_key: str
    dims: int
    model_dims: dict[str, int] = field(default_factory=dict)
    faults: deque[Fault] = field(default_factory=deque)
    chat_replies: deque[str] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    outage: Fault | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def fake_vector(text: str, dims: int) -> list[float]:
    """Hashed bag of words: one count per word in a hashed bucket, plus a small constant
    in bucket 0 so no vector is zero. Deliberately not unit length."""
    out = [0.0] * dims
    for word in words(text):
        digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
        out[int.from_bytes(digest, "little") % dims] += 1.0
    out[0] += 0.01
    return out


class FakeOpenAI:
    """The fake server. Use as a context manager, or call :meth:`start` / :meth:`close`."""

    def __init__(self, *, api_key: str = DEFAULT_API_KEY, dims: int = DEFAULT_DIMS) -> None:
        self._state = _State(api_key=api_key, dims=dims)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        state = self._state
        state.stopping.clear()

        class Handler(_Handler):
            pass

        Handler.state = state
        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._state.stopping.set()  # wakes handlers sleeping in a delay fault
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- configuration ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._server is not None, "the fake is not running"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def api_key(self) -> str:
        return self._state.api_key

    @property
    def dims(self) -> int:
        return self._state.dims

    def set_model_dims(self, model: str, dims: int) -> None:
        """Vectors of ``model`` have ``dims`` entries (others use the default)."""
        with self._state.lock:
            self._state.model_dims[model] = dims

    def inject(self, *faults: Fault) -> None:
        """Queue faults; each request consumes the first queued fault that matches it."""
        with self._state.lock:
            self._state.faults.extend(faults)

    @property
    def pending_faults(self) -> list[Fault]:
        with self._state.lock:
            return list(self._state.faults)

    @property
    def outage(self) -> Fault | None:
        return self._state.outage

    @outage.setter
    def outage(self, fault: Fault | None) -> None:
        """A fault applied to every request (after the queue is empty) until reset to None."""
        with self._state.lock:
            self._state.outage = fault

    def script_chat(self, *replies: str) -> None:
        """Queue assistant replies for the next chat completions, one each."""
        with self._state.lock:
            self._state.chat_replies.extend(replies)

    # -- what happened ---------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        return self.requests_to("/v1/embeddings")

    @property
    def embedded_inputs(self) -> list[str]:
        """Every text sent for embedding, in order, over all requests (failed ones too)."""
        out: list[str] = []
        for request in self.embedding_requests:
            body = request.body if isinstance(request.body, dict) else {}
            value = body.get("input")
            out.extend([value] if isinstance(value, str) else list(value or []))
        return out

    def clear_requests(self) -> None:
        with self._state.lock:
            self._state.requests.clear()


class _Handler(BaseHTTPRequestHandler):
    state: _State
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- plumbing --------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        state = self.state

        if headers.get("authorization") != f"Bearer {state.api_key}":
            self._record(method, path, headers, body, None)
            self._error(401, "Incorrect API key provided. You can find your API key in settings.")
            return
        with state.lock:
            fault = _take_fault(state, path)
        self._record(method, path, headers, body, fault)

        if fault is not None and fault.kind == "status":
            self._error(fault.status_code, fault.message)
            return
        if fault is not None and fault.kind == "delay":
            state.stopping.wait(fault.seconds)
        if fault is not None and fault.kind == "malformed_json":
            self._send(200, b'{"object": "list", "data": [{"object": "embedding", "ind')
            return

        routes = {
            ("POST", "/v1/embeddings"): self._embeddings,
            ("POST", "/v1/chat/completions"): self._chat,
        }
        route = routes.get((method, path))
        if route is None:
            self._error(404, f"Invalid URL ({method} {path})")
            return
        if not isinstance(body, dict):
            self._error(400, "We could not parse the JSON body of your request.")
            return
        route(body, fault)

    def _record(
        self, method: str, path: str, headers: dict[str, str], body: Any, fault: Fault | None
    ) -> None:
        with self.state.lock:
            self.state.requests.append(RecordedRequest(method, path, headers, body, fault))

    def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout): nothing to do

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode())

    def _error(self, status: int, message: str) -> None:
        kind, code = _ERROR_TYPES.get(status, ("invalid_request_error", None))
        self._json(
            status, {"error": {"message": message, "type": kind, "param": None, "code": code}}
        )

    # -- endpoints -------------------------------------------------------------------------

    def _embeddings(self, body: dict[str, Any], fault: Fault | None) -> None:
        model = body.get("model")
        value = body.get("input")
        if not isinstance(model, str) or not model:
            self._error(400, "you must provide a model parameter")
            return
        texts = [value] if isinstance(value, str) else value
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            self._error(400, "'input' must be a non-empty string or array of strings")
            return
        if any(not t for t in texts):
            self._error(400, "'input' cannot contain empty strings")
            return
        with self.state.lock:
            dims = self.state.model_dims.get(model, self.state.dims)
        if "dimensions" in body:
            dims = body["dimensions"]
            if not isinstance(dims, int) or dims < 1:
                self._error(400, "'dimensions' must be a positive integer")
                return
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            self._error(400, f"'encoding_format' must be 'float' or 'base64', not {encoding!r}")
            return

        vectors: list[list[float | None]] = [list(fake_vector(t, dims)) for t in texts]
        if fault is not None and fault.kind == "null_values":
            vectors[0][0] = None
            if len(vectors[0]) > 1:
                vectors[0][-1] = None
        data = [
            {"object": "embedding", "index": i, "embedding": _encode(v, encoding)}
            for i, v in enumerate(vectors)
        ]
        if fault is not None and fault.kind == "wrong_count":
            if fault.delta < 0:
                data = data[: len(data) + fault.delta]
            else:
                extra = _encode(fake_vector("extra", dims), encoding)
                data += [
                    {"object": "embedding", "index": len(data) + j, "embedding": extra}
                    for j in range(fault.delta)
                ]
        if fault is not None and fault.kind == "shuffle":
            rng = random.Random(fault.seed)
            original = list(data)
            while len(data) > 1 and data == original:
                rng.shuffle(data)
        tokens = sum(len(words(t)) for t in texts)
        answer: dict[str, Any] = {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        if fault is not None and fault.kind == "missing_data":
            del answer["data"]
        self._json(200, answer)

    def _chat(self, body: dict[str, Any], fault: Fault | None) -> None:
        model = body.get("model")
        messages = body.get("messages")
        if not isinstance(model, str) or not model:
            self._error(400, "you must provide a model parameter")
            return
        if not isinstance(messages, list) or not messages:
            self._error(400, "'messages' must be a non-empty array")
            return
        if body.get("stream"):
            self._error(400, "the fake does not stream")
            return
        with self.state.lock:
            scripted = self.state.chat_replies.popleft() if self.state.chat_replies else None
        if scripted is None:
            users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
            content = users[-1].get("content") if users else ""
            scripted = content if isinstance(content, str) else json.dumps(content)
        prompt_tokens = sum(
            len(words(m.get("content") or "")) for m in messages if isinstance(m, dict)
        )
        completion_tokens = len(words(scripted))
        self._json(
            200,
            {
                "id": f"chatcmpl-fake{len(self.state.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": scripted},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )


def _take_fault(state: _State, path: str) -> Fault | None:
    for i, fault in enumerate(state.faults):
        if fault.path is None or fault.path == path:
            del state.faults[i]
            return fault
    if state.outage is not None and state.outage.path in (None, path):
        return state.outage
    return None


def _encode(vector: list[float | None], encoding: str) -> list[float | None] | str:
    if encoding == "float" or any(x is None for x in vector):
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
