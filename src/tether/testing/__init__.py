"""Deterministic doubles of tether's two backends, for your tests and ours.

:class:`HashEmbedder` is an :class:`~tether.embed.base.Embedder` with real arithmetic and
no model: each text becomes its hashed word counts, so texts that share words are close.
:class:`ScriptedChat` is a :class:`~tether.llm.ChatModel` that answers from a script (a
list of replies, or a function of the messages) and records every call. Neither needs a
network, a download or a GPU, and both give the same answers on every run.

    >>> from tether import Tether
    >>> from tether.testing import HashEmbedder, ScriptedChat
    >>> chat = ScriptedChat(['{"queries": ["reset the sensor"]}'])
    >>> t = Tether(db=":memory:", embedder=HashEmbedder(), chat=chat)
    >>> [r.status for r in t.add(text="Reset the sensor with the pin.", title="Guide")]
    ['indexed']
    >>> t.search("sensor pin", mode="hybrid", scope="global")[0].title
    'Guide'
    >>> chat.complete([{"role": "user", "content": "rewrite this"}])
    '{"queries": ["reset the sensor"]}'
    >>> len(chat.calls)
    1
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Iterable

import numpy as np

from tether.embed.base import Embedder
from tether.errors import LLMError
from tether.llm import ChatModel, Message

__all__ = ["HashEmbedder", "ScriptedChat"]


class HashEmbedder(Embedder):
    """A deterministic bag-of-words embedder (hashed word counts): texts that share words
    are close. Real arithmetic, no model: for tests of storage, scope and fusion.

    ``calls`` holds the texts of every :meth:`embed_batch` call, in order;
    :attr:`embedded_texts` flattens them.
    """

    batch_size = 16

    def __init__(self, dims: int = 64, model: str = "hash-64") -> None:
        self.dims = dims
        self.model = model
        self.calls: list[list[str]] = []

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "little") % self.dims] += 1.0
            out[row, 0] += 0.01  # no all-zero vectors
        return out

    @property
    def embedded_texts(self) -> list[str]:
        return [t for call in self.calls for t in call]


class ScriptedChat(ChatModel):
    """A chat model that answers from a script instead of a server.

    ``replies`` is either an iterable of reply texts, returned one per call in order (a
    call past the last one raises :class:`~tether.errors.LLMError`), or a function of
    the messages that returns the reply. ``fail_with``, when given, is raised by every
    call instead (an ``LLMError(..., timeout=True)`` plays a timeout). Every call's
    messages are recorded in ``calls``, failed calls included.
    """

    def __init__(
        self,
        replies: Iterable[str] | Callable[[list[Message]], str] = (),
        *,
        fail_with: Exception | None = None,
        model: str = "scripted",
    ) -> None:
        self._script = [] if callable(replies) else list(replies)
        self._reply = replies if callable(replies) else self._next_scripted_reply
        self._answered = 0
        self.fail_with = fail_with
        self.model = model
        self.calls: list[list[Message]] = []
        # Retrieval may call from several threads at once (aretrieve, parallel rewrites).
        self._lock = threading.Lock()

    def complete(self, messages: list[Message], *, max_tokens: int = 512) -> str:
        with self._lock:
            self.calls.append([dict(m) for m in messages])
        if self.fail_with is not None:
            raise self.fail_with
        return self._reply(messages)

    def _next_scripted_reply(self, messages: list[Message]) -> str:
        with self._lock:
            if self._answered >= len(self._script):
                raise LLMError(
                    f"ScriptedChat has no reply left: all {len(self._script)} scripted"
                    " replies were used; pass more replies, or a function of the messages"
                )
            self._answered += 1
            return self._script[self._answered - 1]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, calls={len(self.calls)})"
