"""A local model through ONNX Runtime with int8 weights: exported from the installed
model once, checked against it, cached on disk, never downloaded.

The export needs torch and transformers (``tether[local]``); running a cached export
needs only onnxruntime and tokenizers. Vectors are close to the float model's but not
the same (a cosine of about 0.99), so they are stored under their own model name
(``all-MiniLM-L6-v2@onnx-int8``) and never mixed with the float model's: switching
runtimes re-embeds (``tether reembed``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tether.embed.base import Embedder
from tether.embed.local import (
    DEFAULT_LOCAL_MODEL,
    TokenCounter,
    _configured_max_seq_length,
    _quiet_transformers,
    resolve_model_path,
)
from tether.errors import EmbeddingsUnavailable, InvalidArgument

logger = logging.getLogger("tether.embed")

#: The suffix of the stored model name: int8 vectors never mix with the float model's.
RUNTIME_SUFFIX = "@onnx-int8"
#: Bumped whenever the export or the quantization changes, so that old caches are redone.
RECIPE = 2
#: The smallest cosine between the float model's and the export's vectors, over the
#: probe sentences, that lets an export be used; all-MiniLM-L6-v2 gives about 0.99.
MIN_PROBE_COSINE = 0.98
_PROBES = (
    "What is the capital of France?",
    "Paris is the capital and largest city of France.",
    "Reset the device by holding the power button for ten seconds.",
    "Vitamin D deficiency is associated with an increased risk of fractures in older adults.",
    "def add(a, b): return a + b",
    "Die Katze schläft auf dem Sofa.",
)
_MODEL_FILE = "model.int8.onnx"
_INSTALL_HINT = (
    "install it with `pip install 'tether[onnx]'`, or set rag.embeddings.runtime = \"torch\""
)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tether`` (``~/.cache/tether`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tether"


class OnnxEmbedder(Embedder):
    """A mean- or CLS-pooled sentence-transformers model run by ONNX Runtime with int8
    weights (per-channel, dynamic activations). The export happens on first use, or on
    :meth:`prepare`, and lands in ``cache_dir``; later runs load it in well under a second.
    Each text runs alone, unpadded, so its vector depends on it only (see
    :meth:`_Runner.embed`). ``threads`` texts run at once, each on one core (default: one
    per core this process may use); that is about a quarter faster here than one text
    at a time on ONNX Runtime's own threads, whose per-operator hand-offs cost more than
    the small matrices of one text gain.
    """

    batch_size: ClassVar[int] = 256
    retries: ClassVar[int] = 0  # a local model does not fail transiently

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        *,
        model_path: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        threads: int | None = None,
    ) -> None:
        if threads is not None and threads < 1:
            raise InvalidArgument(f"threads must be at least 1, not {threads}")
        self.base_model = model
        #: The stored name: the float model's vectors and these never mix.
        self.model = model + RUNTIME_SUFFIX
        self.model_path = resolve_model_path(model, model_path)
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        #: How many texts run at once, each on one core.
        self.threads = threads or _usable_cores()
        _pooling_mode(self.model_path)  # refuse a pooling it cannot do, before any export
        self._tokens = TokenCounter(self.model_path)
        self._runner: _Runner | None = None
        self._lock = threading.Lock()
        #: Whether this instance exported the model (False when it came from the cache).
        self.exported = False

    @functools.cached_property
    def max_tokens(self) -> int:  # type: ignore[override]
        """The model's window (``max_seq_length``, read once): texts are truncated to it."""
        return _configured_max_seq_length(self.model_path) or 512

    @property
    def token_counter(self) -> TokenCounter:
        return self._tokens

    def count_tokens(self, text: str) -> int | None:
        return self._tokens(text)

    @functools.cached_property
    def cached_model(self) -> Path:
        """Where this model's export lives (it may not exist yet); the model's files are
        hashed for it once per instance."""
        return self.cache_dir / _cache_key(self.model_path) / _MODEL_FILE

    def prepare(self) -> Path:
        """Export and quantize now (or find the cached export) and load it; returns its
        path. What the first :meth:`embed` would otherwise do."""
        self._load()
        return self.cached_model

    @property
    def loaded(self) -> bool:
        return self._runner is not None

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        return self._load().embed(texts, self.threads)

    def _load(self) -> _Runner:
        if self._runner is not None:
            return self._runner
        with self._lock:
            if self._runner is None:
                path = self.cached_model
                runner = _Runner.open(self.model_path, path)
                if runner is None:
                    export_int8(self.model_path, path)
                    self.exported = True
                    runner = _Runner.open(self.model_path, path)
                    if runner is None:
                        raise EmbeddingsUnavailable(f"the fresh export {path} does not load")
                self._runner = runner
            return self._runner

    def __repr__(self) -> str:
        return f"OnnxEmbedder(model={self.model!r}, cache_dir={str(self.cache_dir)!r})"


def _probe_cosine(reference: Any, model_path: str, quantized: Path) -> float:
    """The lowest cosine between the float model's vectors of the probe sentences and
    the int8 export's."""
    expected = reference.encode(list(_PROBES), normalize_embeddings=True, show_progress_bar=False)
    runner = _Runner.open(model_path, quantized)
    if runner is None:
        raise EmbeddingsUnavailable(f"the export {quantized} does not load")
    got = runner.embed(list(_PROBES), _usable_cores())
    got /= np.linalg.norm(got, axis=1, keepdims=True)
    return float((np.asarray(expected, dtype=np.float32) * got).sum(axis=1).min())


def export_int8(model_path: str, destination: Path) -> None:
    """Export the model at ``model_path`` to ONNX, quantize its weights to int8, check it
    against the float model on the probe sentences and move it to ``destination``
    (atomically: a concurrent export by another process leaves one whole file), with
    what was checked recorded beside it (``meta.json``). Raises :class:`EmbeddingsUnavailable`
    when torch, transformers or onnx are missing or when the int8 model strays from the
    float one (cosine below :data:`MIN_PROBE_COSINE`)."""
    try:
        import torch
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbeddingsUnavailable(
            f"exporting the model for the onnx-int8 runtime needs torch, sentence-transformers"
            f" and onnx ({exc.name} is missing); {_INSTALL_HINT}"
        ) from exc
    _quiet_transformers()
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".export-", dir=destination.parent))
    except OSError as exc:
        raise EmbeddingsUnavailable(
            f"cannot write the onnx-int8 export under {destination.parent} ({exc}); set"
            " rag.embeddings.cache_dir to a writable folder"
        ) from exc
    logger.info("exporting %s to ONNX int8 (once; cached in %s)", model_path, destination.parent)
    try:
        reference = SentenceTransformer(model_path, device="cpu", local_files_only=True)
        transformer = reference[0].auto_model.eval()
        float_path = work / "model.onnx"
        _export_float(torch, transformer, float_path)
        quantized = work / _MODEL_FILE
        with _quiet_quantizer():
            quantize_dynamic(
                str(float_path),
                str(quantized),
                per_channel=True,
                weight_type=QuantType.QInt8,
                op_types_to_quantize=["MatMul"],
                nodes_to_exclude=_float_matmuls(float_path),
            )
        cosine = _probe_cosine(reference, model_path, quantized)
        if cosine < MIN_PROBE_COSINE:
            raise EmbeddingsUnavailable(
                f"int8 weights change this model's vectors too much (cosine {cosine:.3f} to the"
                f" float model's, below {MIN_PROBE_COSINE}); use rag.embeddings.runtime ="
                ' "torch" for it'
            )
        meta = {
            "recipe": RECIPE,
            "model_path": str(model_path),
            "probe_cosine": round(cosine, 5),
            "torch": torch.__version__,
        }
        (work / "meta.json").write_text(json.dumps(meta, indent=2), "utf-8")
        os.replace(work / "meta.json", destination.parent / "meta.json")
        os.replace(quantized, destination)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _export_float(torch: Any, transformer: Any, path: Path) -> None:
    import inspect

    takes_types = "token_type_ids" in inspect.signature(transformer.forward).parameters
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if takes_types else [])

    class LastHiddenState(torch.nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.inner = transformer

        def forward(self, *inputs: Any) -> Any:
            return self.inner(**dict(zip(names, inputs, strict=True))).last_hidden_state

    # A padded sample: traced with a mask of ones, transformers may drop the mask as
    # needless, and padded batches would then attend to their padding.
    ids = torch.full((2, 8), 1000, dtype=torch.int64)
    mask = torch.ones((2, 8), dtype=torch.int64)
    mask[1, 5:] = 0
    sample = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    args = tuple(sample[n] for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]}
    # The tracer warns about every Python branch it freezes; those it freezes here are
    # shape checks that hold for every input the runner feeds (one unpadded text).
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(),
            args,
            str(path),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """onnxruntime's quantizer logs advice and per-tensor notes on the root logger; they
    are about its tooling, not about this export, so they stay out of the user's log."""

    def not_from_quantizer(record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname

    root = logging.getLogger()
    root.addFilter(not_from_quantizer)
    try:
        yield
    finally:
        root.removeFilter(not_from_quantizer)


def _float_matmuls(path: Path) -> list[str]:
    """The MatMuls that stay in float32:

    - those of two activations (attention's scores and mix): dynamic quantization of
      these costs accuracy for no speed, so only weight matrices become int8;
    - the first layer's feed-forward output (the first weight matrix with more rows than
      columns). Its input, the widened activations of the first layer, has a few values
      far larger than the rest, and one int8 scale for all of them rounds the rest away.
      Kept in float, all-MiniLM-L6-v2's SciFact hybrid nDCG@10 went from 0.0051 below the
      float model's to 0.0007 above it (``bench/int8_quality.py``), for 1/18 of the
      weights' work; the other layers' gained less each."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path), load_external_data=True).graph
    weights = {init.name: init for init in graph.initializer}
    kept: list[str] = []
    down = None
    for node in graph.node:
        if node.op_type != "MatMul":
            continue
        matrices = [weights[i] for i in node.input if i in weights]
        if not matrices:
            kept.append(node.name)
        elif down is None:
            shape = numpy_helper.to_array(matrices[0]).shape
            if len(shape) == 2 and shape[0] > shape[1]:
                down = node.name
    return kept + ([down] if down else [])


class _Runner:
    """An inference session with its tokenizer and pooling: texts in, pooled vectors out."""

    def __init__(self, session: Any, tokenizer: Any, pooling: str) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.input_names = {i.name for i in session.get_inputs()}

    @classmethod
    def open(cls, model_path: str, onnx_path: Path) -> _Runner | None:
        """A runner on ``onnx_path``, or None when that file is missing or does not load."""
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingsUnavailable(
                f"the onnx-int8 runtime needs onnxruntime; {_INSTALL_HINT}"
            ) from exc
        if not onnx_path.is_file():
            return None
        session = _open_session(onnxruntime, onnx_path)
        if session is None:
            return None
        tokenizer = Tokenizer.from_file(str(Path(model_path) / "tokenizer.json"))
        tokenizer.enable_truncation(_configured_max_seq_length(model_path) or 512)
        tokenizer.no_padding()
        return cls(session, tokenizer, _pooling_mode(model_path))

    def embed(self, texts: list[str], workers: int) -> np.ndarray:
        """One forward pass per text, unpadded. Activations are quantized per pass (their
        scale is the pass's largest value), so a text batched with others would get a
        vector that depends on its companions; alone, its vector depends on it only.
        Batching gained about 3% on full-length chunks here, not worth that.

        Up to ``workers`` passes run at once (the session runs one operator at a time,
        on one thread, and releases the GIL), so a text's vector is the same whatever
        ran beside it."""
        encodings = [encoding.ids for encoding in self.tokenizer.encode_batch(texts)]
        if workers < 2 or len(encodings) < 2:
            return np.asarray([self._pass(ids) for ids in encodings], dtype=np.float32)
        with ThreadPoolExecutor(min(workers, len(encodings)), "tether-onnx") as pool:
            return np.asarray(list(pool.map(self._pass, encodings)), dtype=np.float32)

    def _pass(self, token_ids: list[int]) -> np.ndarray:
        ids = np.asarray([token_ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feeds)[0][0]
        return hidden[0] if self.pooling == "cls" else hidden.mean(axis=0)


def _open_session(onnxruntime: Any, path: Path) -> Any:
    """A one-thread inference session on ``path`` (callers run texts side by side), or
    None when the file is not a loadable model (a torn or corrupted cache: the caller
    exports again)."""
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
        if path.is_file():
            logger.warning("the cached export %s does not load (%s); exporting again", path, exc)
        return None


def _usable_cores() -> int:
    """The cores this process may run on (its affinity where the platform says)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def _cache_key(model_path: str) -> str:
    """The export's folder name: the model's weights, configuration and tokenizer, and
    the recipe. A changed model (or recipe) gets a new export, never a stale one."""
    digest = hashlib.sha256(f"recipe {RECIPE}".encode())
    folder = Path(model_path)
    for name in sorted(os.listdir(folder)):
        if name.endswith((".safetensors", ".bin", ".json")):
            digest.update(name.encode())
            with open(folder / name, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()[:24]


def _pooling_mode(model_path: str) -> str:
    """``mean`` or ``cls``, from the model's ``modules.json`` and pooling configuration.
    Other poolings (max, weighted, last token) are refused rather than approximated."""
    folder = Path(model_path)
    try:
        modules = json.loads((folder / "modules.json").read_text("utf-8"))
    except (OSError, ValueError):
        return "mean"  # a plain transformers folder: sentence-transformers pools by mean
    for module in modules:
        if str(module.get("type", "")).endswith("Pooling"):
            config_file = folder / module.get("path", "") / "config.json"
            try:
                config = json.loads(config_file.read_text("utf-8"))
            except (OSError, ValueError):
                return "mean"
            if config.get("pooling_mode_mean_tokens"):
                return "mean"
            if config.get("pooling_mode_cls_token"):
                return "cls"
            raise EmbeddingsUnavailable(
                f"the onnx-int8 runtime pools by mean or CLS token; {model_path} pools"
                ' otherwise; use rag.embeddings.runtime = "torch" for it'
            )
    return "mean"
