"""Grounding on real documents: does tether cite the answer page when the answer is in
scope, and say "not grounded" when it is not?

The question set (``bench/manuals/questions.json``, written by reading the manuals) has
three kinds of question. All manuals go to one workspace; each manual also gets a chat
session holding it alone:

- ``answerable``: asked in the session of the manual that answers it; right when the
  result is grounded (and better when a cited page is an answer page);
- ``unanswerable``: asked in the session of its manual, which does not answer it;
  right when the result is not grounded;
- ``cross_scope``: asked in the session of another manual (``asked_in``), while the
  workspace holds the answer; right when the result is not grounded and suggests the
  workspace.

Balanced grounding accuracy is the mean of the three rates. The report also counts what
makes PDF text dirty in the stored chunks: words broken by a line-end hyphen, running
header and footer lines, chunks over the embedder's window, and table-of-contents
chunks.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether import InvalidArgument, RetrievalResult, Settings, Tether
from tether.eval import _without_embeddings, embed_missing
from tether.eval_grounding import closer_elsewhere, judged_right

WORKSPACE = "manuals"
KINDS = ("answerable", "unanswerable", "cross_scope")
#: Thresholds tried on the recorded best relevance of each question.
THRESHOLDS = (0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)

_HYPHEN_BREAK = re.compile(r"[a-z]{2,}-\n[a-z]{2,}")
_DOT_LEADER = re.compile(r"(?:\.\s?){4,}\s*\d+\s*$", re.M)


@dataclass(frozen=True)
class QuestionOutcome:
    id: str
    kind: str
    grounded: bool
    suggested_scope: str | None
    best_relevance: float
    closer_elsewhere: bool
    answer_page_in_context: bool | None
    answer_page_first: bool | None
    #: Whether an answer page is among the first ``rag.max_chunks`` reranked candidates,
    #: grounded or not: retrieval apart from the grounding judgment.
    answer_page_ranked: bool | None
    ms: float

    @property
    def right(self) -> bool:
        wider = self.suggested_scope == "workspace"
        return judged_right(self.kind, self.grounded, suggests_wider=wider)


@dataclass
class DocumentsReport:
    """What :func:`grounding_on_documents` measured."""

    outcomes: list[QuestionOutcome]
    quality: dict[str, int]
    documents: int
    chunks: int
    settings: dict[str, Any] = field(default_factory=dict)

    def rate(self, kind: str) -> float:
        group = [o for o in self.outcomes if o.kind == kind]
        return round(sum(o.right for o in group) / len(group), 4) if group else 0.0

    def balanced_accuracy(self) -> float:
        return round(statistics.fmean(self.rate(kind) for kind in KINDS), 4)

    def answer_page_rate(self, first: bool = False, *, ranked: bool = False) -> float:
        found = [
            o.answer_page_ranked if ranked
            else (o.answer_page_first if first else o.answer_page_in_context)
            for o in self.outcomes
            if o.kind == "answerable"
        ]  # fmt: skip
        return round(sum(bool(f) for f in found) / len(found), 4) if found else 0.0

    def threshold_table(self) -> list[dict[str, float]]:
        """The balanced accuracy if "grounded" meant best relevance >= t (the result's
        own suggestion kept for cross-scope questions)."""
        rows = []
        for t in THRESHOLDS:
            rates = []
            for kind in KINDS:
                group = [o for o in self.outcomes if o.kind == kind]
                grounded = [o.best_relevance >= t and not o.closer_elsewhere for o in group]
                right = grounded if kind == "answerable" else [not g for g in grounded]
                rates.append(sum(right) / len(right) if right else 0.0)
            rows.append({"threshold": t, **dict(zip(KINDS, (round(r, 4) for r in rates),
                         strict=True)), "balanced": round(statistics.fmean(rates), 4)})  # fmt: skip
        return rows

    def to_dict(self) -> dict[str, Any]:
        by_kind = Counter(o.kind for o in self.outcomes)
        return {
            "documents": self.documents,
            "chunks": self.chunks,
            "questions": dict(by_kind),
            "balanced_accuracy": self.balanced_accuracy(),
            "rates": {kind: self.rate(kind) for kind in KINDS},
            "answer_page_in_context": self.answer_page_rate(),
            "hit_at_1": self.answer_page_rate(first=True),
            "answer_page_ranked": self.answer_page_rate(ranked=True),
            "best_relevance": {
                kind: _quartiles([o.best_relevance for o in self.outcomes if o.kind == kind])
                for kind in KINDS
            },
            "thresholds": self.threshold_table(),
            "quality": self.quality,
            "latency_ms_p50": round(statistics.median(o.ms for o in self.outcomes), 1)
            if self.outcomes
            else None,
            "settings": self.settings,
            "wrong": [o.id for o in self.outcomes if not o.right],
        }


def _quartiles(values: list[float]) -> list[float]:
    if len(values) < 2:
        return [round(v, 3) for v in values]
    return [round(v, 3) for v in statistics.quantiles(values, n=4, method="inclusive")]


def load_questions(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"cannot read the question set {path}: {exc}") from None
    if not isinstance(data, dict) or "documents" not in data or "questions" not in data:
        raise InvalidArgument(f"{path} is not a question set (documents, questions)")
    return data


def index_documents(t: Tether, data: dict[str, Any], pdfs: Path) -> dict[str, str]:
    """Each manual into the workspace, attached to a session of its own; their ids."""
    ids = {}
    for document in data["documents"]:
        name = document["name"]
        path = pdfs / f"{name}.pdf"
        if not path.exists():
            raise InvalidArgument(
                f"{path} is missing: fetch the manuals first (python3 bench/manuals/fetch.py)"
            )
        (result,) = t.add(path, workspace_id=WORKSPACE, session_id=f"manual-{name}")
        ids[name] = result.document_id or ""
    embed_missing(t)
    return ids


def ask(t: Tether, question: dict[str, Any], ids: dict[str, str]) -> QuestionOutcome:
    kind = question["kind"]
    asked_in = question.get("asked_in") if kind == "cross_scope" else question["document"]
    started = time.perf_counter()
    result = t.retrieve(question["question"], scope="session", session_id=f"manual-{asked_in}")
    ms = (time.perf_counter() - started) * 1000
    in_context = first = ranked = None
    if kind == "answerable":
        answer_pages = set(question["pages"])
        cited = [c for c in result.citations if c.document_id == ids[question["document"]]]
        in_context = any(answer_pages & set(c.pages) for c in cited)
        first = bool(result.citations) and bool(answer_pages & set(result.citations[0].pages))
        top = [cid for cid, _, _ in result.debug.get("ranked", [])][: t.settings.rag.max_chunks]
        hits = t.store.hits_for_chunks(top)
        ranked = any(
            hits[cid].page in answer_pages and hits[cid].document_id == ids[question["document"]]
            for cid in top
            if cid in hits
        )
    return QuestionOutcome(
        id=question["id"],
        kind=kind,
        grounded=result.grounded,
        suggested_scope=result.suggested_scope,
        best_relevance=_best(result),
        closer_elsewhere=closer_elsewhere(result),
        answer_page_in_context=in_context,
        answer_page_first=first,
        answer_page_ranked=ranked,
        ms=round(ms, 1),
    )


def _best(result: RetrievalResult) -> float:
    return float(result.debug.get("relevance", {}).get("best", 0.0) or 0.0)


def text_quality(t: Tether, ids: dict[str, str], window: int | None) -> dict[str, int]:
    """Counts of what makes PDF text dirty, over the stored chunks."""
    counts = Counter(hyphen_breaks=0, header_footer_lines=0, over_window=0, toc_chunks=0)
    for document_id in ids.values():
        chunks = t.chunks(document_id)
        pages = {c.page for c in chunks if c.page is not None}
        lines_on: dict[str, set[int]] = {}
        for c in chunks:
            counts["hyphen_breaks"] += len(_HYPHEN_BREAK.findall(c.content))
            if len(_DOT_LEADER.findall(c.content)) >= 3:
                counts["toc_chunks"] += 1
            if window is not None and c.token_count is not None and c.token_count > window:
                counts["over_window"] += 1
            for line in {_shape(x) for x in c.content.splitlines() if x.strip()}:
                lines_on.setdefault(line, set()).add(c.page or 0)
        repeated = [
            line for line, on in lines_on.items() if len(pages) >= 4 and len(on) >= len(pages) / 2
        ]
        counts["header_footer_lines"] += len(repeated)
    return dict(counts)


def _shape(line: str) -> str:
    return re.sub(r"\d+", "#", " ".join(line.split()).lower())


def grounding_on_documents(
    questions: Path,
    pdfs: Path,
    *,
    db: str | Path = ":memory:",
    settings: Settings | None = None,
    lexical_only: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> DocumentsReport:
    """Index the manuals of ``questions`` (PDFs in ``pdfs``) and ask every question;
    ``lexical_only`` turns embeddings off."""
    data = load_questions(questions)
    settings = settings if settings is not None else Settings.load()
    if lexical_only:
        settings = _without_embeddings(settings)
    with Tether(db=db, settings=settings) as t:
        ids = index_documents(t, data, pdfs)
        outcomes = []
        for done, question in enumerate(data["questions"], start=1):
            outcomes.append(ask(t, question, ids))
            if progress:
                progress(done, len(data["questions"]))
        window = getattr(t.embedder, "max_tokens", None) or 256
        chunks = sum(len(t.chunks(i)) for i in ids.values())
        return DocumentsReport(outcomes, text_quality(t, ids, window), len(ids), chunks)
