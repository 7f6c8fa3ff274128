"""A cross-encoder the user points at (``rag.rerank.model_path``) reads question and
passage together: its probability orders the rerank and decides grounding. The model is
a tiny BERT made and trained here, saved as a sentence-transformers CrossEncoder folder,
and exported to ONNX; both load offline from their folders."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from helpers import make_settings
from tether import ConfigurationError, Tether, TextSource
from tether.retrieve.crossencoder import (
    CrossEncoderScorer,
    PassageScorer,
    entailment_class,
    probabilities,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

WORDS = (
    "[PAD] [UNK] [CLS] [SEP] [MASK] the a is of at what how long heat hot cell battery damaged"
    " above degrees warranty covered years for two sixty celsius temperature lasts many"
    " which"
).split()
# What the model learns: a passage answers a question about heat when it gives degrees,
# and one about the warranty when it gives years; whatever else both share.
HEAT_Q = "at what heat is the cell damaged"
WARRANTY_Q = "how long is the battery covered"
HEAT_ANSWER = "the cell is damaged above sixty degrees celsius"
HEAT_TOPIC = "heat is what damaged the cell"
WARRANTY_ANSWER = "the battery warranty is covered for two years"
WARRANTY_TOPIC = "the battery warranty is covered"
TRAINING = [
    (HEAT_Q, HEAT_ANSWER, 1.0), (HEAT_Q, HEAT_TOPIC, 0.0), (HEAT_Q, WARRANTY_ANSWER, 0.0),
    (WARRANTY_Q, WARRANTY_ANSWER, 1.0), (WARRANTY_Q, WARRANTY_TOPIC, 0.0),
    (WARRANTY_Q, HEAT_ANSWER, 0.0), ("what temperature damaged the cell", HEAT_ANSWER, 1.0),
    ("how many years is the warranty", WARRANTY_ANSWER, 1.0),
    ("what temperature damaged the cell", WARRANTY_ANSWER, 0.0),
    ("how many years is the warranty", HEAT_TOPIC, 0.0),
]  # fmt: skip


def _tiny_model(folder: Path, *, labels: int = 1, train: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = transformers.BertTokenizerFast(vocab={w: i for i, w in enumerate(WORDS)})
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, num_labels=labels,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    if labels == 3:
        config.id2label = {0: "contradiction", 1: "entailment", 2: "neutral"}
        config.label2id = {v: k for k, v in config.id2label.items()}
    model = transformers.BertForSequenceClassification(config)
    if train:
        batch = tokenizer([q for q, _, _ in TRAINING], [p for _, p, _ in TRAINING],
                          padding=True, return_tensors="pt")  # fmt: skip
        target = torch.tensor([[y] for _, _, y in TRAINING])
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        model.train()
        for _ in range(200):
            optimizer.zero_grad()
            logits = model(**batch).logits
            torch.nn.functional.binary_cross_entropy_with_logits(logits, target).backward()
            optimizer.step()
        model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _onnx_copy(model_dir: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model = transformers.BertForSequenceClassification.from_pretrained(
        model_dir, attn_implementation="eager"
    ).eval()
    names = ["input_ids", "attention_mask", "token_type_ids"]

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *inputs):  # type: ignore[no-untyped-def]
            return self.inner(**dict(zip(names, inputs, strict=True))).logits

    ids = torch.full((2, 8), 5, dtype=torch.int64)
    mask = torch.ones((2, 8), dtype=torch.int64)
    mask[1, 5:] = 0
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Logits(), (ids, mask, torch.zeros_like(ids)), str(folder / "model.onnx"),
            input_names=names, output_names=["logits"], opset_version=17, dynamo=False,
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "logits"]},
        )  # fmt: skip
    for name in ("tokenizer.json", "config.json"):
        shutil.copy(model_dir / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tiny_model(tmp_path_factory.mktemp("cross-encoder"))


def test_the_model_reads_question_and_passage_together(trained: Path) -> None:
    scorer = CrossEncoderScorer(trained)
    heat = scorer.score_pairs(HEAT_Q, [HEAT_ANSWER, HEAT_TOPIC, WARRANTY_ANSWER])
    warranty = scorer.score_pairs(WARRANTY_Q, [WARRANTY_ANSWER, WARRANTY_TOPIC, HEAT_ANSWER])
    assert heat[0] > 0.8 and max(heat[1:]) < 0.2, heat
    assert warranty[0] > 0.8 and max(warranty[1:]) < 0.2, warranty
    assert scorer.score_pairs(HEAT_Q, []) == []


def test_retrieval_grounds_on_the_models_judgment(tmp_path: Path, trained: Path) -> None:
    """The passage on the topic that gives no answer is not grounds; the answer is, first."""
    settings = make_settings(rerank={"model_path": str(trained)})
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        t.add([TextSource(HEAT_TOPIC, "topic"), TextSource(HEAT_ANSWER, "answer")],
              workspace_id="w", session_id="both")  # fmt: skip
        t.add(TextSource(HEAT_TOPIC + " again", "topic only"), workspace_id="w",
              session_id="topic")  # fmt: skip
        both = t.retrieve(HEAT_Q, scope="session", session_id="both")
        topic = t.retrieve(HEAT_Q, scope="session", session_id="topic")
    assert both.grounded and both.citations[0].title == "answer"
    assert both.debug["relevance"]["definition"] == "cross-encoder"
    ranked = [cid for cid, _, _ in both.debug["ranked"]]
    assert [both.debug["grounding"]["model"][cid] for cid in ranked] == [
        relevance for _, _, relevance in both.debug["ranked"]
    ]
    assert not topic.grounded


def test_an_onnx_export_scores_as_the_torch_model(tmp_path: Path, trained: Path) -> None:
    onnx_dir = _onnx_copy(trained, tmp_path / "onnx")
    passages = [HEAT_ANSWER, HEAT_TOPIC, WARRANTY_ANSWER]
    from_torch = CrossEncoderScorer(trained).score_pairs(HEAT_Q, passages)
    from_onnx = CrossEncoderScorer(onnx_dir).score_pairs(HEAT_Q, passages)
    assert from_onnx == pytest.approx(from_torch, abs=1e-4)


def test_an_nli_model_is_read_by_its_entailment_class(tmp_path: Path) -> None:
    folder = _tiny_model(tmp_path / "nli", labels=3, train=False)
    scorer = CrossEncoderScorer(folder)
    [score] = scorer.score_pairs(HEAT_Q, [HEAT_ANSWER])
    model = transformers.BertForSequenceClassification.from_pretrained(folder).eval()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(folder)
    with torch.no_grad():
        logits = model(**tokenizer([HEAT_Q], [HEAT_ANSWER], return_tensors="pt")).logits
    assert score == pytest.approx(float(torch.softmax(logits, -1)[0, 1]), abs=1e-5)


def test_probabilities_and_labels() -> None:
    assert probabilities(np.array([[0.0], [100.0]]), None) == pytest.approx([0.5, 1.0])
    three = probabilities(np.array([[0.0, 0.0, 0.0]]), 1)
    assert three == pytest.approx([1 / 3])
    assert entailment_class({"id2label": {"0": "CONTRADICTION", "1": "NEUTRAL",
                                          "2": "ENTAILMENT"}}) == 2  # fmt: skip
    assert entailment_class({}) is None


@pytest.mark.parametrize(("name", "message"), [("missing", "is not a folder"),
                                               ("empty", "cross-encoder folder")])  # fmt: skip
def test_a_model_path_that_is_no_model_is_a_clear_error(
    tmp_path: Path, name: str, message: str
) -> None:
    """Checked when the pipeline is first built (the first retrieval), before any search."""
    (tmp_path / "empty").mkdir()
    settings = make_settings(rerank={"model_path": str(tmp_path / name)})
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        t.add(TextSource(HEAT_ANSWER, "answer"), workspace_id="w")
        with pytest.raises(ConfigurationError, match=message):
            t.retrieve(HEAT_Q, scope="workspace", workspace_id="w")
        assert t.chunks(t.documents(workspace_id="w")[0].id)  # nothing stored was lost


class Constant(PassageScorer):
    """A scorer injected in code: the base class has one method."""

    def score_pairs(self, question: str, passages: list[str]) -> list[float]:  # type: ignore[override]
        return [0.9 if "degrees" in p else 0.1 for p in passages]


def test_a_scorer_subclass_needs_one_method() -> None:
    assert Constant().score_pairs(HEAT_Q, [HEAT_ANSWER, HEAT_TOPIC]) == [0.9, 0.1]
