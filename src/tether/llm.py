"""Chat models for the small judgements retrieval asks of an LLM: decide, rewrite, rerank.

:class:`ChatModel` has one abstract method, :meth:`ChatModel.complete` (messages in, the
reply text out); :meth:`ChatModel.acomplete` defaults to running it in a thread.
:class:`OpenAIChat` speaks the chat-completions API through the ``openai`` SDK to any
compatible server (OpenAI, Ollama, vLLM, llama.cpp), with a timeout on every attempt and
the SDK's retries with backoff. Every failure is an :class:`~tether.errors.LLMError`; a
timeout says how long the call really waited, retries included. (Retrieval bounds all
its model calls together as well: see ``[llm] retrieval_budget``.)

:func:`parse_json_reply` turns a reply into a pydantic model, tolerating the code fences
and prose that small models wrap JSON in.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import weakref
from abc import ABC, abstractmethod
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tether.errors import ConfigurationError, LLMError
from tether.settings import LLMSettings

logger = logging.getLogger("tether.llm")

Message = dict[str, str]
M = TypeVar("M", bound=BaseModel)


class ChatModel(ABC):
    """A chat model: a list of ``{"role", "content"}`` messages in, reply text out."""

    model: str = "chat"

    @abstractmethod
    def complete(self, messages: list[Message], *, max_tokens: int = 512) -> str:
        """The assistant's reply. Raises :class:`LLMError` on any failure."""

    async def acomplete(self, messages: list[Message], *, max_tokens: int = 512) -> str:
        """:meth:`complete` without blocking the event loop (a thread, by default)."""
        return await asyncio.to_thread(self.complete, messages, max_tokens=max_tokens)


class OpenAIChat(ChatModel):
    """Any OpenAI-compatible chat-completions endpoint.

    ``timeout`` bounds each attempt (seconds); ``max_retries`` are the SDK's retries with
    exponential backoff on connection errors, 408/409/429 and 5xx, so one call can wait
    up to ``(1 + max_retries) * timeout`` plus the backoff. Temperature is 0: tether asks
    for judgements, not prose.
    """

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 10.0,
        max_retries: int = 1,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ConfigurationError(
                "the chat model needs the openai package: pip install 'tether[openai]'"
            ) from exc
        if not model:
            raise ConfigurationError("a chat model needs [llm] model")
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        options: dict[str, Any] = {
            "api_key": api_key or "not-needed",
            "base_url": base_url,
            "timeout": timeout,
            "max_retries": max_retries,
        }
        self._client = openai.OpenAI(**options)
        self._options = options
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"OpenAIChat(model={self.model!r}, base_url={self.base_url!r})"

    def complete(self, messages: list[Message], *, max_tokens: int = 512) -> str:
        import openai

        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=messages, temperature=0, max_tokens=max_tokens
            )
        except (openai.OpenAIError, ValueError) as exc:  # ValueError: a 200 that is not JSON
            raise self._error(exc, time.perf_counter() - started) from exc
        return self._text(response)

    async def acomplete(self, messages: list[Message], *, max_tokens: int = 512) -> str:
        import openai

        started = time.perf_counter()
        try:
            response = await self._async_client().chat.completions.create(
                model=self.model, messages=messages, temperature=0, max_tokens=max_tokens
            )
        except (openai.OpenAIError, ValueError) as exc:  # ValueError: a 200 that is not JSON
            raise self._error(exc, time.perf_counter() - started) from exc
        return self._text(response)

    def _async_client(self) -> Any:
        # An async HTTP client belongs to the event loop it was first used on.
        import openai

        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            client = self._async_clients[loop] = openai.AsyncOpenAI(**self._options)
        return client

    def _error(self, exc: Exception, elapsed: float) -> LLMError:
        import openai

        where = f"chat model {self.model!r} at {self.base_url or 'api.openai.com'}"
        if isinstance(exc, openai.APITimeoutError):
            # The timeout is per attempt: with retries the call waited longer, so say both.
            return LLMError(
                f"{where}: no answer within {self.timeout:g}s per attempt; gave up after"
                f" {elapsed:.2f} s",
                timeout=True,
            )
        if isinstance(exc, openai.APIStatusError):
            return LLMError(f"{where}: HTTP {exc.status_code}: {exc.message}")
        if isinstance(exc, ValueError):
            return LLMError(f"{where}: malformed response ({exc})")
        return LLMError(f"{where}: {exc}")

    def _text(self, response: Any) -> str:
        try:
            text = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise LLMError(f"chat model {self.model!r}: malformed response ({exc})") from exc
        if not isinstance(text, str):
            raise LLMError(f"chat model {self.model!r}: the reply has no text")
        return text


def chat_from_settings(llm: LLMSettings) -> tuple[ChatModel | None, str | None]:
    """The configured chat model, or ``None`` and why there is none."""
    if not llm.model:
        return None, "no chat model configured ([llm] model)"
    if llm.api_key is None and not llm.base_url:
        return None, "no API key for the chat model ([llm] api_key; or a local base_url)"
    try:
        chat = OpenAIChat(
            model=llm.model,
            api_key=llm.api_key.get_secret_value() if llm.api_key else None,
            base_url=llm.base_url,
            timeout=llm.timeout,
            max_retries=llm.max_retries,
        )
    except ConfigurationError as exc:
        return None, str(exc)
    return chat, None


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


def parse_json_reply(text: str, model: type[M]) -> M:
    """The first JSON value in ``text`` (bare, fenced or inside prose) that is a valid
    ``model``; prose around it, and other JSON before it (``see [1]: {...}``), are
    skipped. Raises :class:`LLMError` naming what was wrong: no JSON, or the shape of
    the first JSON value when none fits."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    first_error: ValidationError | None = None
    for candidate in candidates:
        for start, char in enumerate(candidate):
            if char not in "{[":
                continue
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                continue
            try:
                return model.model_validate(value)
            except ValidationError as exc:
                first_error = first_error or exc
    if first_error is not None:
        raise LLMError(
            f"the chat model's JSON does not match {model.__name__}:"
            f" {first_error.errors()[0]['msg']} at {_loc(first_error)}"
        )
    raise LLMError(f"the chat model's reply holds no JSON: {text[:120]!r}")


def _loc(exc: ValidationError) -> str:
    loc = exc.errors()[0]["loc"]
    return ".".join(str(p) for p in loc) or "the top level"
