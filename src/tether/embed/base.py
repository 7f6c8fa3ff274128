"""The Embedder base class: one abstract method; batching, validation and retries above it."""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from threading import Lock
from typing import ClassVar

import numpy as np

from tether.errors import EmbeddingError

logger = logging.getLogger("tether.embed")


class Embedder(ABC):
    """Turns texts into vectors. Subclasses implement :meth:`embed_batch` only.

    Class attributes are capabilities: ``batch_size`` (texts per ``embed_batch`` call),
    ``retries`` and ``backoff`` (seconds, doubled per attempt) for errors marked
    retryable, ``max_tokens`` (the model's input window in tokens; None when unknown, and
    chunks are then sized in characters). :meth:`embed` does the batching, retries, shape
    checks and L2 normalization, so stored vectors are unit length and cosine is a dot
    product.
    """

    batch_size: ClassVar[int] = 64
    retries: ClassVar[int] = 2
    backoff: ClassVar[float] = 0.5
    query_cache_size: ClassVar[int] = 256
    # Not a ClassVar: a subclass may know its window per model (an instance attribute, or a
    # property that reads the model's configuration).
    max_tokens: int | None = None

    #: The name stored in ``rag_embeddings.model``: vectors of different models never mix.
    model: str

    @abstractmethod
    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Vectors for ``texts``: a float32 array of shape ``(len(texts), dims)``."""

    def count_tokens(self, text: str) -> int | None:
        """Tokens in ``text`` by this model's tokenizer, or None when it has none locally."""
        return None

    @property
    def loaded(self) -> bool:
        """False while a local model waits to be loaded by the first :meth:`embed` (it
        takes seconds); a remote model is always ready."""
        return True

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors for any number of texts, ``batch_size`` at a time."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        # Longest first, so each batch holds texts of similar length (less padding for
        # models that pad a batch to its longest text); the caller's order is restored.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        parts = [
            self._embed_with_retries([texts[i] for i in order[start : start + self.batch_size]])
            for start in range(0, len(texts), self.batch_size)
        ]
        dims = {p.shape[1] for p in parts}
        if len(dims) != 1:
            raise EmbeddingError(f"{self.model}: batches came back with different sizes {dims}")
        vectors = np.concatenate(parts) if len(parts) > 1 else parts[0]
        restored = np.empty_like(vectors)
        restored[order] = vectors
        return restored

    def warm(self) -> None:
        """Make the first real call fast: load what loads on first use (a local model)
        and run it once. The default embeds one short text."""
        self.embed(["warm up"])

    def embed_query(self, text: str) -> np.ndarray:
        """One unit vector; recent queries are answered from a small in-memory cache."""
        cache = self._query_cache()
        with self._cache_lock:
            hit = cache.get(text)
            if hit is not None:
                cache.move_to_end(text)
                return hit
        vector = self.embed([text])[0]
        vector.setflags(write=False)
        with self._cache_lock:
            cache[text] = vector
            while len(cache) > self.query_cache_size:
                cache.popitem(last=False)
        return vector

    def _query_cache(self) -> OrderedDict[str, np.ndarray]:
        # Created lazily so subclasses need not call super().__init__().
        if "_cache" not in self.__dict__:
            self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
            self._cache_lock = Lock()
        return self._cache

    def _embed_with_retries(self, batch: list[str]) -> np.ndarray:
        attempt = 0
        while True:
            try:
                return _validated(self.model, self.embed_batch(batch), len(batch))
            except EmbeddingError as exc:
                if not exc.retryable or attempt >= self.retries:
                    raise
                delay = self.backoff * (2**attempt)
                attempt += 1
                logger.warning(
                    "embedding batch failed (%s); retry %d of %d in %.1fs",
                    exc,
                    attempt,
                    self.retries,
                    delay,
                    extra={"model": self.model, "attempt": attempt},
                )
                time.sleep(delay)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"


def _validated(model: str, vectors: object, expected: int) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != expected or array.shape[1] == 0:
        raise EmbeddingError(
            f"{model}: expected {expected} vectors, got an array of shape {array.shape}"
        )
    if not np.isfinite(array).all():
        raise EmbeddingError(f"{model}: the provider returned NaN or infinite values")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    np.divide(array, norms, out=array, where=norms > 0)
    return np.ascontiguousarray(array, dtype=np.float32)


def to_blob(vector: np.ndarray) -> bytes:
    """float32 little-endian bytes, as stored in ``rag_embeddings.vector``."""
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes, dims: int) -> np.ndarray:
    if len(blob) != 4 * dims:
        raise EmbeddingError(f"stored vector has {len(blob)} bytes, expected {4 * dims}")
    return np.frombuffer(blob, dtype="<f4")
