"""A model that reads the question and a passage together, as the rerank and the
grounding judgment (``rag.rerank.model_path``).

A bi-encoder compares two vectors made apart; a cross-encoder (or an NLI model) reads
the pair at once and can tell "answers it" from "is about its topic". No package on the
index ships such weights, so none is the default: point ``rag.rerank.model_path`` at a
folder you have, and it is loaded from there, offline:

- a sentence-transformers ``CrossEncoder`` folder (``config.json``, weights, tokenizer),
  run with torch (``tether[local]``);
- or a folder holding an ONNX export (``model.onnx``, or any one ``*.onnx``, also under
  ``onnx/``) and its ``tokenizer.json``, run with onnxruntime (``tether[onnx]``).

A model with one output is read as a relevance logit (``sigmoid``); a model with several
(NLI: contradiction, entailment, neutral) as class logits, and the probability of the
class whose label says "entail" (else the last class) is its score. That probability is
each candidate's relevance: it orders the rerank and is what ``rag.min_relevance`` is a
threshold on. Scorers have one abstract method, :meth:`PassageScorer.score_pairs`.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tether.errors import ConfigurationError

#: Passages are read up to this many tokens with their question.
MAX_PAIR_TOKENS = 512


class PassageScorer(ABC):
    """Scores (question, passage) pairs: the probability that the passage answers."""

    @abstractmethod
    def score_pairs(self, question: str, passages: Sequence[str]) -> list[float]:
        """One probability (0..1) per passage, in order."""


def probabilities(logits: np.ndarray, entail: int | None) -> list[float]:
    """Scores from a model's logits: ``sigmoid`` of a single output, else the softmax
    probability of class ``entail`` (the last class when None)."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim == 1 or logits.shape[-1] == 1:
        return [float(p) for p in 1.0 / (1.0 + np.exp(-logits.reshape(-1)))]
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    soft = shifted / shifted.sum(axis=-1, keepdims=True)
    return [float(p) for p in soft[:, logits.shape[-1] - 1 if entail is None else entail]]


def entailment_class(config: dict[str, Any]) -> int | None:
    """The index of the class whose label says "entail", from a model's ``config.json``."""
    for index, label in (config.get("id2label") or {}).items():
        if "entail" in str(label).lower():
            return int(index)
    return None


class CrossEncoderScorer(PassageScorer):
    """A cross-encoder or NLI model from a local folder (see the module docstring);
    loaded on first use, once, and shared by threads."""

    def __init__(self, model_path: str | Path) -> None:
        self.path = Path(model_path).expanduser()
        if not self.path.is_dir():
            raise ConfigurationError(
                f"rag.rerank.model_path {str(self.path)!r} is not a folder: point it at a"
                " sentence-transformers CrossEncoder folder or a folder with an ONNX export"
                " and its tokenizer.json, or leave it unset"
            )
        self._runner: _Runner | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CrossEncoderScorer({str(self.path)!r})"

    def score_pairs(self, question: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        return self._load().score(question, list(passages))

    def _load(self) -> _Runner:
        with self._lock:
            if self._runner is None:
                onnx = _onnx_file(self.path)
                self._runner = _OnnxRunner(self.path, onnx) if onnx else _TorchRunner(self.path)
            return self._runner


class _Runner(ABC):
    @abstractmethod
    def score(self, question: str, passages: list[str]) -> list[float]: ...


def _onnx_file(folder: Path) -> Path | None:
    for place in (folder, folder / "onnx"):
        preferred = place / "model.onnx"
        if preferred.is_file():
            return preferred
        found = sorted(place.glob("*.onnx")) if place.is_dir() else []
        if found:
            return found[0]
    return None


def _config(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


class _TorchRunner(_Runner):
    def __init__(self, folder: Path) -> None:
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:
            raise ConfigurationError(
                f"rag.rerank.model_path {str(folder)!r} needs sentence-transformers: install"
                " it with `pip install 'tether[local]'`, or point it at an ONNX export"
            ) from None
        try:
            self.model = CrossEncoder(
                str(folder), device="cpu", max_length=MAX_PAIR_TOKENS, local_files_only=True
            )
        except (OSError, ValueError) as exc:
            raise ConfigurationError(
                f"rag.rerank.model_path {str(folder)!r} is not a cross-encoder folder"
                f" sentence-transformers can load offline: {exc}"
            ) from None
        self.entail = entailment_class(_config(folder))

    def score(self, question: str, passages: list[str]) -> list[float]:
        # Raw logits (no activation): ``probabilities`` reads one output or several.
        import torch

        pairs = [(question, passage) for passage in passages]
        identity = torch.nn.Identity()
        logits = self.model.predict(
            pairs, activation_fn=identity, convert_to_numpy=True, show_progress_bar=False
        )
        return probabilities(np.asarray(logits), self.entail)


class _OnnxRunner(_Runner):
    def __init__(self, folder: Path, model: Path) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError:
            raise ConfigurationError(
                f"rag.rerank.model_path {str(folder)!r} holds an ONNX model: install"
                " onnxruntime and tokenizers with `pip install 'tether[onnx]'`"
            ) from None
        tokenizer_file = next(
            (
                p
                for p in (folder / "tokenizer.json", model.parent / "tokenizer.json")
                if p.is_file()
            ),
            None,
        )
        if tokenizer_file is None:
            raise ConfigurationError(
                f"rag.rerank.model_path {str(folder)!r}: no tokenizer.json beside {model.name}"
            )
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(MAX_PAIR_TOKENS)
        self.tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.entail = entailment_class(_config(folder))

    def score(self, question: str, passages: list[str]) -> list[float]:
        encodings = self.tokenizer.encode_batch([(question, passage) for passage in passages])
        feed = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        (logits, *_) = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})
        return probabilities(np.asarray(logits), self.entail)
