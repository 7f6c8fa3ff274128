#!/usr/bin/env python3
"""Index the real files of ``bench/formats`` with tether and ask each file's questions.

Usage::

    python3 bench/formats/fetch.py                      # once, to get bench/formats/files/
    .venv/bin/python bench/formats/check.py             # lexical retrieval (no model)
    .venv/bin/python bench/formats/check.py --embeddings    # hybrid, the default local model
    .venv/bin/python bench/formats/check.py --json      # everything measured, as JSON

First it checks ``questions.json`` against the files as tether loads them
(``tether.ingest.formats.load_path``, each attachment of a message with ``load_file``):
every answer snippet occurs in the text of its document, and every cite target exists (a
section whose heading path holds ``section``, a section titled ``sheet``, a section on
page ``page``). A question with a ``gap`` (a loader defect that keeps its answer or its
place out of tether's text) may miss both; the checker says when a gap has closed. The
parts of a message are documents ``<file>#<part>``: the attachments tether keeps, and
also, for this check only, the images inside the message's HTML, read with tether's OCR
(tether does not index those) and compared with the hand transcriptions of
``ocr_references`` (word accuracy: 1 - word edit distance / words of the transcription;
words found: the share of the transcription's words that OCR read, in any order).

Then it indexes every file into a fresh store in a temporary folder and, for each
question, runs ``Tether.retrieve(question, scope="global", min_relevance=0.0)`` and
reports whether the answer snippet is in the context and whether the first citation that
holds it cites the right document and section, sheet or page; and, at the default
``rag.min_relevance``, whether the result is grounded. Per file: the seconds to load it
(with its attachments), to index it, its chunks, its characters and how many of them are
in sections that repeat an earlier section word for word. Matching: Unicode NFKC, whitespace
collapsed, case-folded.

Exit status: 0 when measured (misses are results, not failures), 2 when a file is missing
or the questions are malformed or do not match the files.
"""

from __future__ import annotations

import argparse
import email
import json
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass, field
from email import policy
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fetch  # noqa: E402  (this folder's fetch.py, stdlib only)

QUESTIONS = HERE / "questions.json"
CITE_KEYS = {"document", "section", "sheet", "page"}
QUESTION_KEYS = {"id", "file", "question", "answer", "cite"}
OPTIONAL_KEYS = {"note", "gap"}


class BadQuestions(Exception):
    """questions.json is malformed or does not match the files (exit 2)."""


def norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


# --- the questions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Cite:
    document: str  # the file, or <file>#<part>
    section: str | None = None
    sheet: str | None = None
    page: int | None = None


@dataclass(frozen=True)
class Question:
    id: str
    file: str
    question: str
    answer: str
    cite: Cite
    gap: str | None = None
    note: str | None = None


def parse_question(raw: object, names: set[str], problems: list[str]) -> Question | None:
    """One entry of ``questions``, or None with what is wrong added to ``problems``."""
    if not isinstance(raw, dict):
        problems.append(f"a question is not an object: {raw!r:.60}")
        return None
    qid = str(raw.get("id", "?"))
    missing = QUESTION_KEYS - set(raw)
    unknown = set(raw) - QUESTION_KEYS - OPTIONAL_KEYS
    if missing or unknown:
        problems.append(f"{qid}: missing {sorted(missing)}, unknown {sorted(unknown)}")
        return None
    texts = [raw[k] for k in ("id", "file", "question", "answer")]
    texts += [raw[k] for k in OPTIONAL_KEYS if k in raw]
    if not all(isinstance(t, str) and t.strip() for t in texts):
        problems.append(f"{qid}: id, file, question, answer, note and gap must be text")
        return None
    if raw["file"] not in names:
        problems.append(f"{qid}: unknown file {raw['file']!r} (not pinned in fetch.py)")
        return None
    cite = parse_cite(qid, raw["cite"], raw["file"], problems)
    if cite is None:
        return None
    if norm(raw["answer"]) in norm(raw["question"]):
        problems.append(f"{qid}: the answer snippet is pasted into the question")
    return Question(
        qid, raw["file"], raw["question"], raw["answer"], cite, raw.get("gap"), raw.get("note")
    )


def parse_cite(qid: str, raw: object, file: str, problems: list[str]) -> Cite | None:
    if not isinstance(raw, dict) or set(raw) - CITE_KEYS:
        problems.append(f"{qid}: cite must be an object with keys among {sorted(CITE_KEYS)}")
        return None
    document = raw.get("document", file)
    if document != file and not str(document).startswith(f"{file}#"):
        problems.append(f"{qid}: cite.document must be {file!r} or {file}#<part>")
        return None
    page = raw.get("page")
    if page is not None and (isinstance(page, bool) or not isinstance(page, int) or page < 1):
        problems.append(f"{qid}: cite.page must be a page number")
        return None
    for key in ("section", "sheet"):
        if key in raw and not (isinstance(raw[key], str) and raw[key].strip()):
            problems.append(f"{qid}: cite.{key} must be text")
            return None
    return Cite(str(document), raw.get("section"), raw.get("sheet"), page)


def load_questions(path: Path) -> tuple[list[Question], list[dict[str, str]]]:
    """The questions and the OCR reference transcriptions; BadQuestions says what is wrong."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BadQuestions(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise BadQuestions(f"{path}: expected an object with a 'questions' list")
    names = {f.name for _, f in fetch.all_files()}
    problems: list[str] = []
    questions = [parse_question(q, names, problems) for q in data["questions"]]
    ids = [q.id for q in questions if q]
    problems += [f"{i}: duplicate id" for i in sorted({i for i in ids if ids.count(i) > 1})]
    references = data.get("ocr_references", [])
    if not isinstance(references, list) or not all(
        isinstance(r, dict) and {"document", "text"} <= set(r) for r in references
    ):
        problems.append("ocr_references must be a list of {document, text, note}")
        references = []
    if problems:
        raise BadQuestions("\n  ".join(["questions.json:", *problems]))
    return [q for q in questions if q], references


# --- the files as tether loads them -------------------------------------------------------


@dataclass
class Part:
    """A document's text and sections as tether loads it (``indexed``: tether indexes it)."""

    text: str
    sections: list[tuple[str | None, int | None]]
    indexed: bool = True


@dataclass
class FileReport:
    name: str
    format: str
    package: str
    load_s: float = 0.0
    index_s: float = 0.0
    chunks: int = 0
    documents: int = 0
    characters: int = 0
    repeated_characters: int = 0  # in sections whose text repeats an earlier section's
    sections: int = 0
    statuses: list[str] = field(default_factory=list)
    error: str | None = None  # why tether could not load it (or an inline image of it)


def part_of(doc: Any, indexed: bool = True) -> Part:
    return Part(doc.text, [(s.title, s.page) for s in doc.sections], indexed)


def load_file_parts(path: Path, report: FileReport) -> dict[str, Part]:
    """The file and its attachments as tether loads them, keyed ``<file>`` and
    ``<file>#<name>``; for a message, its inline images too (OCR'd, not indexed). A file
    tether cannot load is a result: ``report.error`` says why, and it has no parts."""
    from tether.errors import IngestError
    from tether.ingest.formats import load_file, load_path

    started = time.perf_counter()
    try:
        doc = load_path(path)
        parts = {path.name: part_of(doc)}
        for attachment in doc.attachments:
            parts[attachment.path.name] = part_of(load_file(attachment))
    except IngestError as exc:
        report.error = f"{type(exc).__name__}: {exc}"
        return {}
    report.load_s = time.perf_counter() - started
    report.characters = sum(len(p.text) for p in parts.values())
    report.sections = len(doc.sections)
    report.repeated_characters = repeated_characters(doc)
    for name, data in inline_images(path) if path.suffix == ".eml" else []:
        if name in parts:
            continue
        try:
            parts[name] = part_of(load_file(_file_bytes(path.parent / name, data)), False)
        except IngestError as exc:  # no OCR installed, or nothing read: no reference text
            report.error = f"{name}: {type(exc).__name__}: {exc}"
    return parts


def repeated_characters(doc: Any) -> int:
    seen: set[str] = set()
    repeated = 0
    for section in doc.sections:
        body = doc.text[section.start : section.end]
        if body in seen:
            repeated += len(body)
        seen.add(body)
    return repeated


def _file_bytes(path: Path, data: bytes) -> Any:
    from tether.ingest.loaders import FileBytes

    return FileBytes(path, data)


def inline_images(path: Path) -> list[tuple[str, bytes]]:
    """The image parts of a message, named ``<file>#<part file name>``."""
    message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
    found = []
    for number, part in enumerate(message.walk(), start=1):
        if part.get_content_maintype() != "image":
            continue
        data = part.get_payload(decode=True)
        if isinstance(data, bytes) and data:
            found.append((f"{path.name}#{part.get_filename() or f'part-{number}'}", data))
    return found


def cite_exists(cite: Cite, part: Part) -> bool:
    titles = [(title or "", page) for title, page in part.sections]
    if cite.section and not any(norm(cite.section) in norm(t) for t, _ in titles):
        return False
    if cite.sheet and not any(t == cite.sheet for t, _ in titles):
        return False
    return cite.page is None or any(p == cite.page for _, p in titles)


@dataclass(frozen=True)
class Loaded:
    """What tether's loaders give of a question's answer: is the snippet in the text of its
    document, does its cite target exist there, and is that document indexed at all."""

    answer: bool
    place: bool
    indexed: bool


def loaded_state(q: Question, parts: dict[str, Part]) -> Loaded:
    part = parts.get(q.cite.document)
    if part is None:
        return Loaded(False, False, False)
    return Loaded(norm(q.answer) in norm(part.text), cite_exists(q.cite, part), part.indexed)


def validate(
    questions: list[Question], parts: dict[str, Part], unloaded: set[str]
) -> dict[str, Loaded]:
    """Each question's :class:`Loaded`; BadQuestions when a question without a gap does
    not match the loaded files. The questions of a file tether could not load
    (``unloaded``) are not checked: they miss."""
    problems, states = [], {}
    for q in questions:
        state = states[q.id] = loaded_state(q, parts)
        if q.gap or q.file in unloaded:
            continue
        if q.cite.document not in parts:
            problems.append(f"{q.id}: tether loads no document {q.cite.document!r}")
        elif not state.answer:
            problems.append(f"{q.id}: answer not in the text of {q.cite.document}")
        elif not state.place:
            problems.append(f"{q.id}: no section of {q.cite.document} matches {q.cite}")
    if problems:
        raise BadQuestions("\n  ".join(["questions.json does not match the files:", *problems]))
    return states


# --- OCR accuracy -------------------------------------------------------------------------


def word_distance(reference: list[str], hypothesis: list[str]) -> int:
    """Levenshtein distance between two word lists."""
    previous = list(range(len(hypothesis) + 1))
    for i, word in enumerate(reference, start=1):
        current = [i]
        for j, other in enumerate(hypothesis, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != other))
            )
        previous = current
    return previous[-1]


def ocr_accuracy(references: list[dict[str, str]], parts: dict[str, Part]) -> list[dict[str, Any]]:
    rows = []
    for ref in references:
        part = parts.get(ref["document"])
        expected = norm(ref["text"]).split()
        if part is None:
            rows.append(
                {"document": ref["document"], "word_accuracy": None, "words": len(expected)}
            )
            continue
        read = norm(part.text).split()
        errors = word_distance(expected, read)
        accuracy = max(0.0, 1 - errors / len(expected))
        found = sum((Counter(expected) & Counter(read)).values())
        rows.append(
            {
                "document": ref["document"],
                "words": len(expected),
                "word_errors": errors,
                "word_accuracy": round(accuracy, 3),
                "word_recall": round(found / len(expected), 3),
                "indexed_by_tether": part.indexed,
            }
        )
    return rows


# --- retrieval ----------------------------------------------------------------------------


@dataclass
class Outcome:
    id: str
    file: str
    gap: bool
    in_context: bool
    cited_right: bool
    grounded_default: bool
    cited: dict[str, Any] | None  # the first citation holding the answer
    citations: int
    why: str


def open_store(folder: Path, embeddings: bool) -> Any:
    from tether import Tether
    from tether.settings import Settings

    rag = {} if embeddings else {"embeddings": {"enabled": False}}
    return Tether(folder / "formats.db", settings=Settings.load(rag=rag))


def index_file(tether: Any, path: Path, report: FileReport) -> None:
    started = time.perf_counter()
    results = tether.add(str(path), on_error="collect")
    report.index_s = time.perf_counter() - started
    report.chunks = sum(r.chunk_count for r in results)
    report.documents = len(results)
    report.statuses = [
        f"{Path(r.source).name}: {r.status}" + (f" ({r.error})" if r.error else "") for r in results
    ]


def citation_place(cite: Cite, citation: Any) -> str:
    """ "" when ``citation`` points where ``cite`` says, else what differs."""
    name = Path(citation.source_path or citation.title).name
    if name != cite.document:
        return f"cites document {name!r}, not {cite.document!r}"
    title = citation.section_title or ""
    if cite.section and norm(cite.section) not in norm(title):
        return f"cites section {title!r}, not one holding {cite.section!r}"
    if cite.sheet and title != cite.sheet:
        return f"cites sheet {title!r}, not {cite.sheet!r}"
    if cite.page is not None and cite.page not in (citation.page, *citation.pages):
        return f"cites page {citation.page}, not {cite.page}"
    return ""


def merged(citation: Any) -> str:
    """What a citation of several chunks carries of them, said for a wrong section."""
    count = len(citation.chunk_ids)
    return f" (it merges {count} chunks and names the first one's section)" if count > 1 else ""


def ask(tether: Any, q: Question) -> Outcome:
    result = tether.retrieve(q.question, scope="global", min_relevance=0.0)
    answer = norm(q.answer)
    holding = [c for c in result.citations if answer in norm(c.text)]
    cited = holding[0] if holding else None
    why = "answer not in the context"
    if cited is not None:
        why = citation_place(q.cite, cited)
        why += merged(cited) if why.startswith("cites section") else ""
    grounded = tether.retrieve(q.question, scope="global").grounded
    return Outcome(
        id=q.id,
        file=q.file,
        gap=q.gap is not None,
        in_context=answer in norm(result.context),
        cited_right=cited is not None and not why,
        grounded_default=grounded,
        cited=None if cited is None else describe(cited),
        citations=len(result.citations),
        why=why,
    )


def describe(citation: Any) -> dict[str, Any]:
    return {
        "number": citation.number,
        "document": Path(citation.source_path or citation.title).name,
        "section_title": citation.section_title,
        "page": citation.page,
        "page_label": citation.page_label,
        "pages": list(citation.pages),
        "chunk_ids": list(citation.chunk_ids),
    }


# --- the run ------------------------------------------------------------------------------


def measure(
    questions: list[Question], references: list[dict[str, str]], files_dir: Path, embeddings: bool
) -> dict[str, Any]:
    """Load, validate, index and ask; everything measured. BadQuestions on a mismatch."""
    reports: list[FileReport] = []
    parts: dict[str, Part] = {}
    for package, f in fetch.all_files():
        report = FileReport(f.name, f.format, package.pin.apt_spec)
        parts.update(load_file_parts(files_dir / f.name, report))
        reports.append(report)
    states = validate(questions, parts, {r.name for r in reports if r.name not in parts})
    with tempfile.TemporaryDirectory(prefix="tether-formats-") as tmp:
        tether = open_store(Path(tmp), embeddings)
        try:
            for report in reports:
                index_file(tether, files_dir / report.name, report)
            outcomes = [ask(tether, q) for q in questions]
            degraded = tether.embeddings_unavailable
        finally:
            tether.close()
    rows = [asdict(o) | {"loaded": asdict(states[o.id])} for o in outcomes]
    return {
        "mode": "hybrid (local embeddings)" if embeddings else "lexical (embeddings off)",
        "embeddings_unavailable": degraded,
        "files": [asdict(r) for r in reports],
        "questions": rows,
        "gap_notices": [
            f"{q.id}: answer and place now in what tether indexes"
            for q in questions
            if q.gap and all(asdict(states[q.id]).values())
        ],
        "totals": totals(outcomes),
        "ocr": ocr_accuracy(references, parts),
    }


def totals(outcomes: list[Outcome]) -> dict[str, Any]:
    def count(rows: list[Outcome]) -> dict[str, int]:
        return {
            "questions": len(rows),
            "in_context": sum(o.in_context for o in rows),
            "cited_right": sum(o.cited_right for o in rows),
            "grounded_default": sum(o.grounded_default for o in rows),
        }

    return {
        "all": count(outcomes),
        "without_gaps": count([o for o in outcomes if not o.gap]),
        "gaps": count([o for o in outcomes if o.gap]),
    }


def print_report(run: dict[str, Any]) -> None:
    print(f"bench/formats: {run['mode']}")
    if run["embeddings_unavailable"]:
        print(f"  embeddings unavailable: {run['embeddings_unavailable']}")
    by_file: dict[str, list[dict[str, Any]]] = {}
    for o in run["questions"]:
        by_file.setdefault(o["file"], []).append(o)
    head = f"{'file':20s} {'format':18s} {'load s':>7s} {'index s':>7s} {'chunks':>6s}"
    head += f" {'chars':>9s} {'repeated':>9s} {'qs':>3s} {'in ctx':>6s} {'cited':>5s} {'grnd':>4s}"
    print(f"\n{head}")
    for f in run["files"]:
        rows = by_file.get(f["name"], [])
        print(
            f"{f['name']:20s} {f['format']:18s} {f['load_s']:7.2f} {f['index_s']:7.2f} "
            f"{f['chunks']:6d} {f['characters']:9,d} {f['repeated_characters']:9,d} {len(rows):3d} "
            f"{sum(o['in_context'] for o in rows):6d} {sum(o['cited_right'] for o in rows):5d} "
            f"{sum(o['grounded_default'] for o in rows):4d}"
        )
    print()
    for f in run["files"]:
        if f["error"]:
            print(f"  {f['name']}: {f['error']}")
    for o in run["questions"]:
        if o["in_context"] and o["cited_right"]:
            continue
        print(f"  miss {o['id']:8s}{gap_label(o)}: {o['why']}")
    for name, t in run["totals"].items():
        n = t["questions"] or 1
        print(
            f"{name:13s} {t['questions']:3d} questions: answer in context {t['in_context']} "
            f"({t['in_context'] / n:.0%}), cited right {t['cited_right']} "
            f"({t['cited_right'] / n:.0%}), grounded at default {t['grounded_default']}"
        )
    for row in run["ocr"]:
        print(
            f"OCR {row['document']}: word accuracy {row['word_accuracy']}, words found "
            f"{row.get('word_recall')} of {row['words']} (indexed by tether: "
            f"{row.get('indexed_by_tether')})"
        )
    for notice in run["gap_notices"]:
        print(f"gap closed? {notice}")


def gap_label(row: dict[str, Any]) -> str:
    """`` [gap: ...]``: what tether's loaders give of a gap question's answer."""
    if not row["gap"]:
        return ""
    loaded = row["loaded"]
    if not loaded["indexed"]:
        where = "its part is not indexed" + ("; OCR reads it" if loaded["answer"] else "")
    else:
        where = f"answer {'in' if loaded['answer'] else 'not in'} the loaded text"
        where += "" if loaded["place"] else ", no such section"
    return f" [gap: {where}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Ask bench/formats' questions of tether.")
    ap.add_argument("--embeddings", action="store_true", help="hybrid, with the local model")
    ap.add_argument("--json", action="store_true", help="print everything measured as JSON")
    ap.add_argument("--files", default=str(fetch.DEFAULT_DEST), help="the fetched files")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    files_dir = Path(args.files)
    missing = [
        f.name
        for _, f in fetch.all_files()
        if not fetch.verify_file(files_dir / f.name, f.sha256)[0]
    ]
    if missing:
        print(
            f"error: missing or not as pinned: {', '.join(missing)}; "
            f"run: python3 {HERE / 'fetch.py'}",
            file=sys.stderr,
        )
        return 2
    try:
        questions, references = load_questions(QUESTIONS)
        run = measure(questions, references, files_dir, args.embeddings)
    except BadQuestions as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(run, indent=2, default=str))
    else:
        print_report(run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
