"""Grounding on real documents: does tether cite the answer when the answer is in scope,
and say "not grounded" when it is not?

A question set is a folder with ``questions.json``, written by reading the documents, in
one of two layouts:

- **PDF manuals** (version 1): the PDFs in ``pdfs/<name>.pdf``; every manual goes
  to one workspace and gets a chat session holding it alone. An answerable question is
  asked in its manual's session, an unanswerable one in the session of the manual that
  does not answer it, a cross-scope one in the session of another manual (``asked_in``).
  The answer is cited when a citation shows one of its ``pages``.
- **Documentation sets** (``"version": 2``): HTML or Markdown
  files (``file``, relative to the folder) in one workspace, some of them attached to
  one session; each question says whether it is asked in the ``session`` or the
  ``workspace``. The answer is cited when a citation is of its document.

Three kinds of question: ``answerable`` (right when grounded), ``unanswerable`` (the
answer is nowhere: right when not grounded) and ``cross_scope`` (asked in a session whose
workspace holds the answer: right when not grounded and suggesting the workspace).
Balanced grounding accuracy is the mean of the three rates.

Each answerable question that was not grounded on its answer says where it was lost:
``not_retrieved`` (no chunk holding the answer among the reranked candidates),
``ranked_below`` (one was, below the first ``rag.max_chunks``), ``judged_out`` (one was
among them, and the grounding judgment or the relevance threshold left it out). The
report also counts what makes stored text dirty: words broken by a line-end hyphen,
running header and footer lines, chunks over the embedder's window, table-of-contents
chunks, boilerplate lines repeated across documents (menus, banners, footers), and cited
passages that stop inside a sentence.
"""

from __future__ import annotations

import json
import re
import statistics
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether import Citation, InvalidArgument, RetrievalResult, Settings, Tether
from tether.eval.beir import _without_embeddings, embed_missing
from tether.eval.grounding import closer_elsewhere, judged_right
from tether.retrieve.context import ends_a_sentence, is_block_line

WORKSPACE = "manuals"
KINDS = ("answerable", "unanswerable", "cross_scope")
#: Where an answerable question that was not grounded on its answer was lost.
LOSSES = ("not_retrieved", "ranked_below", "judged_out")
#: Thresholds tried on the recorded best relevance of each question.
THRESHOLDS = (0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)

_HYPHEN_BREAK = re.compile(r"[a-z]{2,}-\n[a-z]{2,}")
_DOT_LEADER = re.compile(r"(?:\.\s?){4,}\s*\d+\s*$", re.M)


@dataclass(frozen=True)
class Question:
    """One question, in either layout: where it is asked and what answers it."""

    id: str
    kind: str
    question: str
    #: ``("session", id)`` or ``("workspace", id)``.
    asked_in: tuple[str, str]
    document: str | None = None
    pages: frozenset[int] = frozenset()
    answer: str | None = None


@dataclass(frozen=True)
class QuestionSet:
    """A question set and its documents, whichever layout it came in."""

    name: str
    workspace: str
    #: Document name -> (file, title).
    documents: dict[str, tuple[Path, str | None]]
    #: Session id -> the names of the documents attached to it.
    sessions: dict[str, list[str]]
    questions: list[Question]
    #: Whether answers are cited by page (PDF manuals) or by document.
    by_page: bool


def load_questions(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"cannot read the question set {path}: {exc}") from None
    if not isinstance(data, dict) or "documents" not in data or "questions" not in data:
        raise InvalidArgument(f"{path} is not a question set (documents, questions)")
    return data


def load_question_set(path: Path, documents_dir: Path | None = None) -> QuestionSet:
    """The set in ``path`` (a ``questions.json``); the PDF manuals' files are looked for
    in ``documents_dir`` (default: ``pdfs/`` beside it)."""
    data = load_questions(path)
    try:
        if data.get("version") == 2:
            return _docset(path, data)
        return _manuals(path, data, documents_dir or path.parent / "pdfs")
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidArgument(f"{path} is not a valid question set: {exc!r}") from None


def _manuals(path: Path, data: dict[str, Any], pdfs: Path) -> QuestionSet:
    names = [d["name"] for d in data["documents"]]
    questions = []
    for q in data["questions"]:
        where = q.get("asked_in") if q["kind"] == "cross_scope" else q["document"]
        questions.append(
            Question(
                q["id"],
                q["kind"],
                q["question"],
                ("session", f"manual-{where}"),
                q.get("document"),
                frozenset(q.get("pages", ())),
                q.get("answer"),
            )
        )
    return QuestionSet(
        name=path.parent.name,
        workspace=WORKSPACE,
        documents={n: (pdfs / f"{n}.pdf", None) for n in names},
        sessions={f"manual-{n}": [n] for n in names},
        questions=questions,
        by_page=True,
    )


def _docset(path: Path, data: dict[str, Any]) -> QuestionSet:
    workspace = str(data["workspace"])
    session = data.get("session") or {}
    session_id = session.get("id")
    questions = []
    for q in data["questions"]:
        scope = q.get("scope", "session" if session_id else "workspace")
        if scope == "session" and not session_id:
            raise ValueError(f"question {q['id']} is asked in a session the set does not have")
        where = ("session", session_id) if scope == "session" else ("workspace", workspace)
        questions.append(
            Question(
                q["id"],
                q["kind"],
                q["question"],
                where,
                q.get("document"),
                frozenset(q.get("pages", ())),
                q.get("answer"),
            )
        )
    return QuestionSet(
        name=path.parent.name,
        workspace=workspace,
        documents={d["name"]: (path.parent / d["file"], d.get("title")) for d in data["documents"]},
        sessions={session_id: list(session["documents"])} if session_id else {},
        questions=questions,
        by_page=False,
    )


@dataclass(frozen=True)
class QuestionOutcome:
    id: str
    kind: str
    grounded: bool
    suggested_scope: str | None
    best_relevance: float
    closer_elsewhere: bool
    #: Answerable only: a citation shows the answer's page (manuals) or document.
    answer_page_in_context: bool | None
    answer_page_first: bool | None
    #: Whether an answer chunk is among the first ``rag.max_chunks`` reranked candidates,
    #: grounded or not: retrieval apart from the grounding judgment.
    answer_page_ranked: bool | None
    ms: float
    #: Answerable only: a cited passage holds the answer's words themselves.
    answer_text_cited: bool | None = None
    #: Answerable and not cited: where it was lost (one of :data:`LOSSES`).
    lost: str | None = None
    #: Cited passages that stop inside a sentence (:func:`stops_inside_a_sentence`).
    open_passages: int = 0
    #: Cited passages that start inside a sentence (:func:`starts_inside_a_sentence`).
    open_starts: int = 0

    @property
    def right(self) -> bool:
        wider = self.suggested_scope in ("workspace", "global")
        return judged_right(self.kind, self.grounded, suggests_wider=wider)


@dataclass
class DocumentsReport:
    """What :func:`grounding_on_documents` measured."""

    outcomes: list[QuestionOutcome]
    quality: dict[str, int]
    documents: int
    chunks: int
    settings: dict[str, Any] = field(default_factory=dict)
    name: str = ""

    def rate(self, kind: str) -> float:
        group = [o for o in self.outcomes if o.kind == kind]
        return round(sum(o.right for o in group) / len(group), 4) if group else 0.0

    def balanced_accuracy(self) -> float:
        return round(statistics.fmean(self.rate(kind) for kind in KINDS), 4)

    def answer_page_rate(self, first: bool = False, *, ranked: bool = False) -> float:
        found = [
            o.answer_page_ranked
            if ranked
            else (o.answer_page_first if first else o.answer_page_in_context)
            for o in self.outcomes
            if o.kind == "answerable"
        ]
        return round(sum(bool(f) for f in found) / len(found), 4) if found else 0.0

    def losses(self) -> dict[str, int]:
        counted = Counter(o.lost for o in self.outcomes if o.lost)
        return {loss: counted.get(loss, 0) for loss in LOSSES}

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
            rows.append(
                {
                    "threshold": t,
                    **dict(zip(KINDS, (round(r, 4) for r in rates), strict=True)),
                    "balanced": round(statistics.fmean(rates), 4),
                }
            )
        return rows

    def to_dict(self) -> dict[str, Any]:
        by_kind = Counter(o.kind for o in self.outcomes)
        answerable = [o for o in self.outcomes if o.kind == "answerable"]
        text_cited = [o.answer_text_cited for o in answerable if o.answer_text_cited is not None]
        return {
            "name": self.name,
            "documents": self.documents,
            "chunks": self.chunks,
            "questions": dict(by_kind),
            "balanced_accuracy": self.balanced_accuracy(),
            "rates": {kind: self.rate(kind) for kind in KINDS},
            "answer_page_in_context": self.answer_page_rate(),
            "hit_at_1": self.answer_page_rate(first=True),
            "answer_page_ranked": self.answer_page_rate(ranked=True),
            "answer_text_cited": round(sum(text_cited) / len(text_cited), 4)
            if text_cited
            else None,
            "lost": self.losses(),
            "best_relevance": {
                kind: _quartiles([o.best_relevance for o in self.outcomes if o.kind == kind])
                for kind in KINDS
            },
            "thresholds": self.threshold_table(),
            "quality": {
                **self.quality,
                "open_passages": sum(o.open_passages for o in self.outcomes),
                "open_starts": sum(o.open_starts for o in self.outcomes),
            },
            "latency_ms_p50": round(statistics.median(o.ms for o in self.outcomes), 1)
            if self.outcomes
            else None,
            "settings": self.settings,
            "wrong": [o.id for o in self.outcomes if not o.right],
            "lost_ids": {o.id: o.lost for o in self.outcomes if o.lost},
        }


def _quartiles(values: list[float]) -> list[float]:
    if len(values) < 2:
        return [round(v, 3) for v in values]
    return [round(v, 3) for v in statistics.quantiles(values, n=4, method="inclusive")]


def index_documents(t: Tether, qset: QuestionSet) -> dict[str, str]:
    """Every document into the set's workspace, attached to its sessions; their ids."""
    attached = {name: sid for sid, names in qset.sessions.items() for name in names}
    ids = {}
    for name, (path, _) in qset.documents.items():
        if not path.exists():
            raise InvalidArgument(
                f"{path} is missing: fetch the question set's documents first (with the"
                " fetch script that comes with it)"
            )
        (result,) = t.add(path, workspace_id=qset.workspace, session_id=attached.get(name))
        ids[name] = result.document_id or ""
    embed_missing(t)
    return ids


#: Inline markup a snippet copied from a document's source may keep and its indexed text
#: may not (reStructuredText's ``code`` and **bold**, a Markdown table's cell bars), or
#: the other way round: dropped on both sides before comparing.
_MARKUP = str.maketrans("", "", "*`|")


def normalized(text: str) -> str:
    """Text as answers are compared: NFKC, case-folded, without any whitespace (text
    extractors differ in the spaces they put around markup and font changes) or inline
    markup characters (:data:`_MARKUP`)."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().translate(_MARKUP).split())


def holds_answer(text: str, answer: str) -> bool:
    """Whether a chunk holds the answer snippet, or (a snippet split by a chunk boundary)
    its first or last 40 characters."""
    chunk, snippet = normalized(text), normalized(answer)
    if snippet in chunk:
        return True
    return len(snippet) > 60 and (snippet[:40] in chunk or snippet[-40:] in chunk)


def ask(
    t: Tether,
    qset: QuestionSet,
    q: Question,
    ids: dict[str, str],
    texts: dict[str, str] | None = None,
) -> QuestionOutcome:
    """Ask ``q`` and judge the answer; ``texts`` keeps documents' text between questions."""
    level, where = q.asked_in
    started = time.perf_counter()
    if level == "session":
        result = t.retrieve(q.question, scope="session", session_id=where)
    else:
        result = t.retrieve(q.question, scope="workspace", workspace_id=where)
    ms = (time.perf_counter() - started) * 1000
    texts = {} if texts is None else texts
    answer = _AnswerFound()
    if q.kind == "answerable":
        answer = _answer_found(t, qset, q, ids[q.document or ""], result)
    return QuestionOutcome(
        id=q.id,
        kind=q.kind,
        grounded=result.grounded,
        suggested_scope=result.suggested_scope,
        best_relevance=_best(result),
        closer_elsewhere=closer_elsewhere(result),
        answer_page_in_context=answer.in_context,
        answer_page_first=answer.first,
        answer_page_ranked=answer.ranked,
        ms=round(ms, 1),
        answer_text_cited=answer.text_cited,
        lost=answer.lost,
        open_passages=sum(1 for c in result.citations if stops_inside_a_sentence(t, c)),
        open_starts=sum(1 for c in result.citations if starts_inside_a_sentence(t, c, texts)),
    )


@dataclass(frozen=True)
class _AnswerFound:
    """Where an answerable question's answer was (see :class:`QuestionOutcome`)."""

    in_context: bool | None = None
    first: bool | None = None
    ranked: bool | None = None
    text_cited: bool | None = None
    lost: str | None = None


def _answer_found(
    t: Tether, qset: QuestionSet, q: Question, answer_doc: str, result: RetrievalResult
) -> _AnswerFound:
    def answers(document_id: str, page: int | None, text: str) -> bool:
        if document_id != answer_doc:
            return False
        if qset.by_page:
            return page in q.pages
        return q.answer is None or holds_answer(text, q.answer)

    def cites(c: Any) -> bool:
        if c.document_id != answer_doc:
            return False
        return bool(q.pages & set(c.pages)) if qset.by_page else True

    in_context = any(cites(c) for c in result.citations)
    first = bool(result.citations) and cites(result.citations[0])
    text_cited = None
    if q.answer is not None:
        text_cited = any(
            c.document_id == answer_doc and holds_answer(c.text, q.answer) for c in result.citations
        )
    order = [cid for cid, _, _ in result.debug.get("ranked", [])]
    hits = t.store.hits_for_chunks(order)
    holding = [
        i
        for i, cid in enumerate(order)
        if cid in hits and answers(hits[cid].document_id, hits[cid].page, hits[cid].text)
    ]
    ranked = bool(holding) and holding[0] < t.settings.rag.max_chunks
    lost = None
    if not (result.grounded and in_context):
        lost = "not_retrieved" if not holding else "judged_out" if ranked else "ranked_below"
    return _AnswerFound(in_context, first, ranked, text_cited, lost)


def stops_inside_a_sentence(t: Tether, citation: Citation) -> bool:
    """Whether a cited passage stops inside a sentence: its text does not end a sentence
    or a block (:func:`~tether.retrieve.context.ends_a_sentence`), and its document goes
    on in the same paragraph after it. A passage that ends where its section, its
    document or its paragraph does (a man page's "NAME" line, a paragraph the page leaves
    without a full stop) is whole, as the context builder takes it."""
    if not citation.text or ends_a_sentence(citation.text) or not citation.chunk_ids:
        return False
    last = citation.chunk_ids[-1]
    hits = t.store.hits_for_chunks([last, last + 1])
    here, after = hits.get(last), hits.get(last + 1)
    if here is None:
        return True
    if (
        after is None
        or after.document_id != here.document_id
        or after.ordinal != here.ordinal + 1
        or after.section_title != here.section_title
    ):
        return False  # its section or its document ends there
    if after.char_start >= here.char_end:
        return after.char_start - here.char_end <= 2  # (more: a blank line between)
    following = after.text[here.char_end - after.char_start :]
    return not following.lstrip(" \t").startswith("\n\n")


def starts_inside_a_sentence(t: Tether, citation: Citation, texts: dict[str, str]) -> bool:
    """Whether a cited passage starts inside a sentence: inside a line, after words that
    do not end a sentence; or at a line's start with a lowercase word that goes on from
    the line before (wrapped prose, as PDF text is), where that line is not a block of
    its own (``texts``: documents' text, kept between calls). A start inside a fenced code
    block (one longer than a chunk) is inside no sentence."""
    if not citation.text:
        return False
    if citation.document_id not in texts:
        texts[citation.document_id] = t.document_text(citation.document_id)
    document = texts[citation.document_id]
    at = document.find(citation.text)
    if at <= 0 or len(_FENCE_LINE.findall(document, 0, at)) % 2:
        return False  # (a start inside fenced code, longer than a chunk, is no sentence's)
    paragraph = document[:at].rsplit("\n\n", 1)[-1]
    before = paragraph.rstrip()
    if not before or before[-1] in _CLOSES:
        return False
    if paragraph.rstrip(" \t").endswith("\n") and not citation.text[:1].islower():
        return False  # a line that starts a heading, a name or a sentence
    return not is_block_line(before.rsplit("\n", 1)[-1])


#: A fence line of a code block (Markdown's, and every format tether reads code from).
_FENCE_LINE = re.compile(r"^ {0,3}(?:`{3,}|~{3,})", re.MULTILINE)
#: What a sentence (or a label: "Options:") ends with, closing quotes and brackets included.
_CLOSES = frozenset(".!?…:;\"')]”’")


def _best(result: RetrievalResult) -> float:
    return float(result.debug.get("relevance", {}).get("best", 0.0) or 0.0)


def text_quality(t: Tether, ids: dict[str, str], window: int | None) -> dict[str, int]:
    """Counts of what makes stored text dirty, over the stored chunks."""
    counts = Counter(
        hyphen_breaks=0, header_footer_lines=0, over_window=0, toc_chunks=0, repeated_ends=0
    )
    documents_with: Counter[str] = Counter()
    chunk_lines: list[set[str]] = []
    for document_id in ids.values():
        chunks = t.chunks(document_id)
        pages = {c.page for c in chunks if c.page is not None}
        lines_on: dict[str, set[int]] = {}
        seen_here: set[str] = set()
        prose = {_shape(x) for x in prose_lines(_joined(chunks))}
        for before, c in zip([None, *chunks], chunks, strict=False):
            # A chunk that ends where the one before it did repeats its overlap, no more.
            counts["repeated_ends"] += before is not None and c.char_end <= before.char_end
            counts["hyphen_breaks"] += len(_HYPHEN_BREAK.findall(c.content))
            if len(_DOT_LEADER.findall(c.content)) >= 3:
                counts["toc_chunks"] += 1
            if window is not None and c.token_count is not None and c.token_count > window:
                counts["over_window"] += 1
            lines = {_shape(x) for x in c.content.splitlines() if x.strip()}
            chunk_lines.append(lines & prose)
            seen_here |= lines
            for line in lines:
                lines_on.setdefault(line, set()).add(c.page or 0)
        documents_with.update(seen_here)
        repeated = [
            line for line, on in lines_on.items() if len(pages) >= 4 and len(on) >= len(pages) / 2
        ]
        counts["header_footer_lines"] += len(repeated)
    counts["boilerplate_chunks"] = _boilerplate_chunks(chunk_lines, documents_with, len(ids))
    return dict(counts)


def _boilerplate_chunks(
    chunk_lines: list[set[str]], documents_with: Counter[str], documents: int
) -> int:
    """Chunks holding a line of three words or more, outside code and headings, that a
    third of the documents (at least four) repeat word for word: a site's menu, banner,
    breadcrumb or footer."""
    if documents < 4:
        return 0
    common = {
        line
        for line, n in documents_with.items()
        if n >= max(4, documents / 3) and words(line) >= 3
    }
    return sum(1 for lines in chunk_lines if lines & common)


def words(line: str) -> int:
    """How many words a line holds (a table row's "|" between its cells is none)."""
    return sum(1 for token in line.split() if any(c.isalnum() for c in token))


def _joined(chunks: list[Any]) -> str:
    """A document's text from its chunks in order, each overlap taken once (so that a
    code fence split between two chunks is still seen whole)."""
    parts: list[str] = []
    end = 0
    for c in chunks:
        skip = max(0, end - c.char_start)
        if skip == 0 and parts:
            parts.append("\n")
        parts.append(c.content[skip:])
        end = max(end, c.char_end)
    return "".join(parts)


def prose_lines(text: str) -> list[str]:
    """The lines of ``text`` that could be a site's menu, banner or footer: not blank, not
    a heading (``#``) and not inside a code fence (a usage block repeats ``--help``
    on every page of a command reference)."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        elif stripped and not fenced and not stripped.startswith("#"):
            out.append(line)
    return out


def _shape(line: str) -> str:
    return re.sub(r"\d+", "#", " ".join(line.split()).lower())


def grounding_on_documents(
    questions: Path,
    documents_dir: Path | None = None,
    *,
    db: str | Path = ":memory:",
    settings: Settings | None = None,
    lexical_only: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> DocumentsReport:
    """Index the documents of the set in ``questions`` and ask every question;
    ``documents_dir`` is where the PDF manuals are (default: ``pdfs/`` beside the set);
    ``lexical_only`` turns embeddings off."""
    qset = load_question_set(Path(questions), documents_dir)
    settings = settings if settings is not None else Settings.load()
    if lexical_only:
        settings = _without_embeddings(settings)
    with Tether(db=db, settings=settings) as t:
        ids = index_documents(t, qset)
        outcomes, texts = [], {}
        for done, question in enumerate(qset.questions, start=1):
            outcomes.append(ask(t, qset, question, ids, texts))
            if progress:
                progress(done, len(qset.questions))
        window = getattr(t.embedder, "max_tokens", None) or 256
        chunks = sum(len(t.chunks(i)) for i in ids.values())
        quality = text_quality(t, ids, window)
        return DocumentsReport(outcomes, quality, len(ids), chunks, name=qset.name)
