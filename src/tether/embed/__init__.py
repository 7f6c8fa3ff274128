"""Embedders: the base class (one abstract method) and the local and OpenAI-compatible ones."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable, Mapping
from typing import Literal

from tether.embed.base import Embedder, from_blob, to_blob
from tether.embed.local import (
    DEFAULT_LOCAL_MODEL,
    LocalEmbedder,
    TokenCounter,
    packaged_token_counter,
    resolve_model_path,
)
from tether.embed.onnx import RUNTIME_SUFFIX, OnnxEmbedder, default_cache_dir
from tether.embed.openai import DEFAULT_OPENAI_MODEL, OpenAIEmbedder
from tether.errors import EmbeddingsUnavailable, TetherError
from tether.settings import Settings

logger = logging.getLogger("tether.embed")

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "Embedder",
    "LocalEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "TokenCounter",
    "default_cache_dir",
    "default_token_counter",
    "embedder_from_settings",
    "from_blob",
    "local_runtime",
    "resolve_model_path",
    "sizing_embedder",
    "to_blob",
]


Runtime = Literal["torch", "onnx-int8"]


def local_runtime(settings: Settings, stored: Mapping[str, int] | None = None) -> Runtime:
    """What runs the local model: ``rag.embeddings.runtime``, or for ``auto`` the runtime
    whose vectors the store holds (``stored``: vectors per model name), so that an
    existing store keeps its vectors until ``tether reembed``; for a store without
    either, ``onnx-int8`` when ONNX Runtime is installed and the model runs on the CPU
    in float32, else ``torch``."""
    config = settings.rag.embeddings
    if config.runtime != "auto":
        return config.runtime
    model = config.model or DEFAULT_LOCAL_MODEL
    stored = stored or {}
    float_vectors, int8_vectors = stored.get(model, 0), stored.get(model + RUNTIME_SUFFIX, 0)
    if float_vectors > int8_vectors:
        logger.info(
            "the store's vectors come from the torch runtime, which keeps running %s; for"
            ' the faster onnx-int8 runtime, set rag.embeddings.runtime = "onnx-int8" and run'
            " tether reembed",
            model,
        )
        return "torch"
    if int8_vectors:
        return "onnx-int8"
    on_cpu = config.device in ("auto", "cpu") and config.precision in ("auto", "float32")
    if on_cpu and importlib.util.find_spec("onnxruntime") is not None:
        return "onnx-int8"
    return "torch"


def embedder_from_settings(
    settings: Settings, stored: Mapping[str, int] | None = None
) -> tuple[Embedder | None, str | None]:
    """The configured embedder, or ``(None, reason)`` when embeddings are off or cannot run;
    ``stored`` (vectors per model name in the store) settles ``runtime = "auto"``.

    Never raises for a missing model or key: retrieval then runs lexical-only, and the
    reason is logged once here and reported in every search's ``debug``.
    """
    config = settings.rag.embeddings
    if not config.enabled:
        reason = "embeddings disabled (rag.embeddings.enabled = false): lexical-only retrieval"
        logger.info(reason)
        return None, reason
    try:
        if config.provider == "local" and local_runtime(settings, stored) == "onnx-int8":
            embedder: Embedder = OnnxEmbedder(
                config.model or DEFAULT_LOCAL_MODEL,
                model_path=config.model_path,
                cache_dir=config.cache_dir,
            )
        elif config.provider == "local":
            embedder = LocalEmbedder(
                config.model or DEFAULT_LOCAL_MODEL,
                model_path=config.model_path,
                device=config.device,
                precision=config.precision,
            )
        else:
            key = config.api_key or settings.llm.api_key
            embedder = OpenAIEmbedder(
                config.model or DEFAULT_OPENAI_MODEL,
                api_key=key.get_secret_value() if key else None,
                base_url=config.base_url or settings.llm.base_url,
                timeout=config.timeout,
            )
    except EmbeddingsUnavailable as exc:
        reason = f"no embeddings, lexical-only retrieval: {exc}"
        logger.warning(reason)
        return None, reason
    return embedder, None


def sizing_embedder(settings: Settings) -> Embedder | None:
    """The configured embedder as a ruler for chunks (its window and tokenizer), made
    whether or not embeddings are enabled, and never asked to embed: turning embeddings
    off (``tether eval --lexical-only``) or on again must not chunk a store anew. A local
    model is not loaded for this (its window is read from its folder). None when it
    cannot be made here (not installed, no key): chunks are then sized in characters."""
    config = settings.rag.embeddings
    try:
        if config.provider == "local":
            return LocalEmbedder(config.model or DEFAULT_LOCAL_MODEL, model_path=config.model_path)
        key = config.api_key or settings.llm.api_key
        return OpenAIEmbedder(
            config.model or DEFAULT_OPENAI_MODEL,
            api_key=key.get_secret_value() if key else None,
            base_url=config.base_url or settings.llm.base_url,
            timeout=config.timeout,
        )
    except TetherError:
        return None


def default_token_counter(embedder: Embedder | None) -> Callable[[str], int | None] | None:
    """What chunk token counts come from: the embedder's own tokenizer when it has one
    here, else the packaged all-MiniLM-L6-v2 tokenizer when installed, else nothing (the
    context budget then estimates 4 characters per token)."""
    if isinstance(embedder, LocalEmbedder | OnnxEmbedder):
        return embedder.token_counter
    if embedder is not None and type(embedder).count_tokens is not Embedder.count_tokens:
        return embedder.count_tokens
    return packaged_token_counter()
