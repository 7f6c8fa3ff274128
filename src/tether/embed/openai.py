"""Embeddings from any OpenAI-compatible endpoint: OpenAI, Ollama, vLLM, llama.cpp."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from tether.embed.base import Embedder
from tether.errors import EmbeddingError, EmbeddingsUnavailable

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
#: OpenAI's documented input limit of its embedding models, in tokens.
_OPENAI_WINDOW = 8191


class OpenAIEmbedder(Embedder):
    """``POST {base_url}/embeddings`` through the ``openai`` SDK.

    The SDK's own retries are off: the :class:`Embedder` base class retries timeouts,
    connection errors, rate limits and 5xx answers with exponential backoff, the same way
    for every provider. ``batch_size`` bounds the inputs of one request (OpenAI accepts
    2048; smaller batches keep one request under the token limit with long chunks).
    """

    batch_size: ClassVar[int] = 128
    retries: ClassVar[int] = 3
    backoff: ClassVar[float] = 0.5

    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        api_key: str | None,
        base_url: str | None = None,
        timeout: float = 30.0,
        dimensions: int | None = None,
        client: Any = None,
    ) -> None:
        if client is None and not api_key:
            raise EmbeddingsUnavailable(
                f"no API key for embedding model {model!r}; set TETHER_LLM__API_KEY (any"
                " non-empty value for Ollama or vLLM) or use provider 'local'"
            )
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        self.dimensions = dimensions
        self.max_tokens = _known_window(model)
        self._client = client if client is not None else _make_client(api_key, base_url, timeout)

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        import openai

        kwargs: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        try:
            response = self._client.embeddings.create(**kwargs)
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise EmbeddingError(f"{self._where()}: {exc}", retryable=True) from exc
        except openai.RateLimitError as exc:
            raise EmbeddingError(f"{self._where()}: rate limited ({exc})", retryable=True) from exc
        except openai.AuthenticationError as exc:
            raise EmbeddingsUnavailable(
                f"{self._where()} refused the API key ({exc}); check TETHER_LLM__API_KEY"
            ) from exc
        except openai.APIStatusError as exc:
            raise EmbeddingError(
                f"{self._where()}: HTTP {exc.status_code}: {exc.message}",
                retryable=exc.status_code >= 500 or exc.status_code in (408, 409),
            ) from exc
        except openai.OpenAIError as exc:  # malformed answers and the like
            raise EmbeddingError(f"{self._where()}: {exc}") from exc
        except ValueError as exc:  # a 200 whose JSON body does not parse (JSONDecodeError)
            raise EmbeddingError(f"{self._where()}: malformed embeddings response ({exc})") from exc
        try:
            rows = sorted(response.data, key=lambda item: item.index)
            return np.array([row.embedding for row in rows], dtype=np.float32)
        except (AttributeError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"{self._where()}: malformed embeddings response ({exc})") from exc

    def _where(self) -> str:
        return f"embeddings {self.model!r} at {self.base_url or 'the OpenAI API'}"


def _known_window(model: str) -> int | None:
    """OpenAI's models' input window; None for others (an Ollama or vLLM model's is not
    known here)."""
    if model.startswith("text-embedding-3-") or model == "text-embedding-ada-002":
        return _OPENAI_WINDOW
    return None


def _make_client(api_key: str | None, base_url: str | None, timeout: float) -> Any:
    try:
        import openai
    except ImportError as exc:
        raise EmbeddingsUnavailable(
            "the openai package is missing; install it with `pip install 'tether[openai]'`"
        ) from exc
    return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)
