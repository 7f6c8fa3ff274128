#!/usr/bin/env python3
"""Validate ``bench/manuals/questions.json`` against the fetched PDF manuals.

Usage::

    python3 bench/manuals/fetch.py                         # once, to get the PDFs
    .venv/bin/python bench/manuals/check_questions.py      # needs pypdf
    .venv/bin/python bench/manuals/check_questions.py --schema-only   # no PDFs needed

Checks:

* schema: top-level ``documents`` and ``questions``; field names and types per kind;
  unique question ids; known document names; pages within the document's page count;
  answers shorter than 120 characters; unanswerable questions carry no pages/answer;
  cross-scope questions name an ``asked_in`` document different from ``document``;
* counts: at least ``--min-answerable`` / ``--min-unanswerable`` / ``--min-cross`` questions,
  and every document has answerable and unanswerable questions;
* the documents match the manifest in ``fetch.py`` (names, page counts) and, unless
  ``--schema-only``, the PDFs in ``--pdf-dir`` have the pinned SHA-256 and page count;
* every answerable / cross-scope ``answer`` occurs on at least one of its listed ``pages``
  in pypdf's ``extract_text()`` output, after NFKC normalization (folds ligatures),
  whitespace collapsing and case folding; as a fallback the comparison ignores whitespace
  altogether (pypdf versions differ in the spaces they put around font changes, e.g.
  "SET OF orSEQUENCE OF"); the answer is not copied verbatim into the question;
* a cross-scope answer does not occur anywhere in the ``asked_in`` document (even ignoring
  whitespace);
* an unanswerable question's optional ``absent_terms`` occur nowhere in its document
  (whitespace-collapsed, case-insensitive substring search over every page).

Exit status 0 when everything passes, 1 on any failure, 2 on bad usage / missing inputs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import unicodedata
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from fetch import MANUALS  # noqa: E402  (stdlib-only sibling module)

KINDS = ("answerable", "unanswerable", "cross_scope")
MAX_ANSWER = 120
COMMON = {"id", "kind", "question", "document", "note"}
FIELDS = {
    "answerable": (
        COMMON | {"pages", "answer"},
        {"id", "kind", "question", "document", "pages", "answer"},
    ),
    "unanswerable": (COMMON | {"absent_terms"}, {"id", "kind", "question", "document"}),
    "cross_scope": (
        COMMON | {"pages", "answer", "asked_in"},
        {"id", "kind", "question", "document", "pages", "answer", "asked_in"},
    ),
}


def norm(text: str) -> str:
    """NFKC (folds ligatures such as U+FB01), collapse whitespace, case-fold."""
    text = unicodedata.normalize("NFKC", text)
    return re.sub(r"\s+", " ", text).strip().casefold()


def squash(normed: str) -> str:
    """Drop all whitespace: text extractors disagree on spaces around font changes."""
    return normed.replace(" ", "")


class Report:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def err(self, msg: str) -> None:
        self.errors.append(msg)


def check_schema(data: object, rep: Report) -> tuple[dict[str, dict], list[dict]]:
    if not isinstance(data, dict):
        rep.err("top level must be an object")
        return {}, []
    for key in ("documents", "questions"):
        if not isinstance(data.get(key), list):
            rep.err(f"top level: '{key}' must be a list")
    docs = check_documents(data.get("documents") or [], rep)
    check_manifest(docs, rep)
    questions: list[dict] = []
    seen: set[str] = set()
    for i, q in enumerate(data.get("questions") or []):
        if check_question(i, q, docs, seen, rep):
            questions.append(q)
    return docs, questions


def check_documents(documents: list, rep: Report) -> dict[str, dict]:
    """The well-formed documents by name; what is wrong with the others goes to ``rep``."""
    docs: dict[str, dict] = {}
    for i, d in enumerate(documents):
        where = f"documents[{i}]"
        if not isinstance(d, dict):
            rep.err(f"{where}: not an object")
            continue
        extra = set(d) - {"name", "title", "pages"}
        if extra:
            rep.err(f"{where}: unknown field(s) {sorted(extra)}")
        name, title, pages = d.get("name"), d.get("title"), d.get("pages")
        if not isinstance(name, str) or not name:
            rep.err(f"{where}: 'name' must be a non-empty string")
            continue
        if not isinstance(title, str) or not title:
            rep.err(f"{where} ({name}): 'title' must be a non-empty string")
        if not isinstance(pages, int) or isinstance(pages, bool) or pages < 1:
            rep.err(f"{where} ({name}): 'pages' must be a positive integer")
        if name in docs:
            rep.err(f"{where}: duplicate document name {name!r}")
        docs[name] = d
    return docs


def check_manifest(docs: dict[str, dict], rep: Report) -> None:
    """The documents are the manuals ``fetch.py`` pins, with their page counts."""
    manifest = {m.name: m for m in MANUALS}
    if set(docs) != set(manifest):
        rep.err(f"documents {sorted(docs)} differ from fetch.py manifest {sorted(manifest)}")
    for name, d in docs.items():
        if name in manifest and d.get("pages") != manifest[name].pages:
            rep.err(
                f"document {name}: pages {d.get('pages')} but fetch.py says {manifest[name].pages}"
            )


def check_question(i: int, q: object, docs: dict[str, dict], seen: set[str], rep: Report) -> bool:
    """Check ``questions[i]``; whether it is whole enough for the later checks (an
    object with an id, a known kind and a known document)."""
    if not isinstance(q, dict):
        rep.err(f"questions[{i}]: not an object")
        return False
    qid = q.get("id")
    if not isinstance(qid, str) or not qid:
        rep.err(f"questions[{i}]: 'id' must be a non-empty string")
        return False
    where = f"{qid}"
    if qid in seen:
        rep.err(f"{where}: duplicate id")
    seen.add(qid)
    kind = q.get("kind")
    if kind not in KINDS:
        rep.err(f"{where}: kind {kind!r} not one of {KINDS}")
        return False
    allowed, required = FIELDS[kind]
    missing = required - set(q)
    if missing:
        rep.err(f"{where}: missing field(s) {sorted(missing)}")
    extra = set(q) - allowed
    if extra:
        rep.err(f"{where}: field(s) {sorted(extra)} not allowed for kind {kind}")
    if not isinstance(q.get("question"), str) or len(q.get("question", "").strip()) < 10:
        rep.err(f"{where}: 'question' must be a real question string")
    doc = q.get("document")
    if doc not in docs:
        rep.err(f"{where}: unknown document {doc!r}")
        return False
    if "note" in q and not isinstance(q["note"], str):
        rep.err(f"{where}: 'note' must be a string")
    if kind in ("answerable", "cross_scope"):
        check_pages(q, where, doc, docs[doc].get("pages") or 0, rep)
        check_answer(q, where, rep)
    if kind == "cross_scope":
        asked = q.get("asked_in")
        if asked not in docs:
            rep.err(f"{where}: unknown asked_in document {asked!r}")
        elif asked == doc:
            rep.err(f"{where}: asked_in must differ from document")
    if kind == "unanswerable" and "absent_terms" in q:
        terms = q["absent_terms"]
        if (
            not isinstance(terms, list)
            or not terms
            or not all(isinstance(t, str) and t for t in terms)
        ):
            rep.err(f"{where}: 'absent_terms' must be a non-empty list of strings")
    return True


def check_pages(q: dict, where: str, doc: str, limit: int, rep: Report) -> None:
    """``pages``: distinct page numbers within the document's ``limit``."""
    pages = q.get("pages")
    if (
        not isinstance(pages, list)
        or not pages
        or not all(isinstance(p, int) and not isinstance(p, bool) for p in pages)
    ):
        rep.err(f"{where}: 'pages' must be a non-empty list of integers")
        return
    bad = [p for p in pages if not 1 <= p <= limit]
    if bad:
        rep.err(f"{where}: page(s) {bad} outside 1..{limit} of {doc}")
    if len(set(pages)) != len(pages):
        rep.err(f"{where}: duplicate pages {pages}")


def check_answer(q: dict, where: str, rep: Report) -> None:
    """``answer``: a short snippet, not copied into the question."""
    ans = q.get("answer")
    if not isinstance(ans, str) or not ans.strip():
        rep.err(f"{where}: 'answer' must be a non-empty string")
    elif len(ans) >= MAX_ANSWER:
        rep.err(f"{where}: answer is {len(ans)} characters (limit < {MAX_ANSWER})")
    elif len(norm(ans)) > 20 and norm(ans) in norm(q.get("question", "")):
        rep.err(f"{where}: the answer snippet is copied verbatim into the question")


def check_counts(
    docs: dict, questions: list[dict], args: argparse.Namespace, rep: Report
) -> Counter:
    kinds = Counter(q["kind"] for q in questions)
    for kind, minimum in (
        ("answerable", args.min_answerable),
        ("unanswerable", args.min_unanswerable),
        ("cross_scope", args.min_cross),
    ):
        if kinds[kind] < minimum:
            rep.err(f"only {kinds[kind]} {kind} questions (need at least {minimum})")
    for name in docs:
        for kind in ("answerable", "unanswerable"):
            if not any(q["kind"] == kind and q["document"] == name for q in questions):
                rep.err(f"document {name} has no {kind} question")
    return kinds


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_pages(docs: dict, pdf_dir: Path, rep: Report) -> dict[str, list[str]] | None:
    try:
        from pypdf import PdfReader
    except ImportError:
        print(
            "error: pypdf is not importable; run with the project venv "
            "(.venv/bin/python) or pass --schema-only",
            file=sys.stderr,
        )
        return None
    manifest = {m.name: m for m in MANUALS}
    texts: dict[str, list[str]] = {}
    missing = []
    for name, d in docs.items():
        path = pdf_dir / f"{name}.pdf"
        if not path.exists():
            missing.append(str(path))
            continue
        if name in manifest and sha256_file(path) != manifest[name].pdf_sha256:
            rep.err(f"{path}: sha256 differs from the pin in fetch.py (page numbers may not hold)")
        reader = PdfReader(str(path))
        if len(reader.pages) != d.get("pages"):
            rep.err(f"{path}: {len(reader.pages)} pages, questions.json says {d.get('pages')}")
        texts[name] = [norm(p.extract_text() or "") for p in reader.pages]
    if missing:
        print(
            "error: PDF(s) not found: "
            + ", ".join(missing)
            + "\n  run: python3 bench/manuals/fetch.py"
            + ("" if pdf_dir == HERE / "pdfs" else f" {pdf_dir}"),
            file=sys.stderr,
        )
        return None
    return texts


def check_text(questions: list[dict], texts: dict[str, list[str]], rep: Report) -> dict[str, int]:
    stats: Counter = Counter()
    squashed = {name: [squash(t) for t in pages] for name, pages in texts.items()}
    for q in questions:
        doc = q["document"]
        pages = texts.get(doc)
        if pages is None:
            continue
        if q["kind"] in ("answerable", "cross_scope") and isinstance(q.get("answer"), str):
            snippet = norm(q["answer"])
            loose = squash(snippet)
            listed = [p for p in q.get("pages", []) if isinstance(p, int) and 1 <= p <= len(pages)]
            if any(snippet in pages[p - 1] for p in listed):
                stats["answer snippets found on a listed page"] += 1
            elif any(loose in squashed[doc][p - 1] for p in listed):
                stats["answer snippets found on a listed page"] += 1
                stats["  of which only when ignoring whitespace"] += 1
            else:
                found = [i + 1 for i, t in enumerate(squashed[doc]) if loose in t]
                rep.err(
                    f"{q['id']}: answer not on listed page(s) {q.get('pages')} of {doc}"
                    + (f" (it is on {found})" if found else " (nowhere in the document)")
                )
            if q["kind"] == "cross_scope" and q.get("asked_in") in texts:
                hits = [i + 1 for i, t in enumerate(squashed[q["asked_in"]]) if loose in t]
                if hits:
                    rep.err(
                        f"{q['id']}: answer also occurs in asked_in document "
                        f"{q['asked_in']} on page(s) {hits}"
                    )
                else:
                    stats["cross-scope answers absent from the asked_in document"] += 1
        if q["kind"] == "unanswerable":
            for term in q.get("absent_terms", []):
                t = norm(term)  # whitespace-collapsed: squashing would match across words
                hits = [i + 1 for i, x in enumerate(pages) if t in x]
                if hits:
                    rep.err(f"{q['id']}: absent term {term!r} occurs in {doc} on page(s) {hits}")
                else:
                    stats["absent_terms verified absent"] += 1
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Validate bench/manuals/questions.json.")
    ap.add_argument("--questions", default=str(HERE / "questions.json"))
    ap.add_argument("--pdf-dir", default=str(HERE / "pdfs"))
    ap.add_argument(
        "--schema-only",
        action="store_true",
        help="skip the PDF checks (no pypdf or downloaded PDFs needed)",
    )
    ap.add_argument("--min-answerable", type=int, default=45)
    ap.add_argument("--min-unanswerable", type=int, default=25)
    ap.add_argument("--min-cross", type=int, default=12)
    args = ap.parse_args(argv)

    try:
        data = json.loads(Path(args.questions).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        print(f"error: cannot read {args.questions}: {e}", file=sys.stderr)
        return 2

    rep = Report()
    docs, questions = check_schema(data, rep)
    kinds = check_counts(docs, questions, args, rep)
    stats: dict[str, int] = {}
    if not args.schema_only:
        texts = load_pages(docs, Path(args.pdf_dir), rep)
        if texts is None:
            return 2
        stats = check_text(questions, texts, rep)

    print(f"{args.questions}: {len(docs)} documents, {len(questions)} questions")
    for name, d in docs.items():
        per = Counter(q["kind"] for q in questions if q["document"] == name)
        asked = sum(1 for q in questions if q.get("asked_in") == name)
        print(
            f"  {name:18s} {d.get('pages'):4d} pages  answerable {per['answerable']:3d}  "
            f"unanswerable {per['unanswerable']:3d}  "
            f"cross_scope answer-in {per['cross_scope']:2d} asked-in {asked:2d}"
        )
    print("  totals: " + ", ".join(f"{k} {kinds[k]}" for k in KINDS))
    for key, value in stats.items():
        print(f"  {key}: {value}")
    if rep.errors:
        print(f"FAILED: {len(rep.errors)} problem(s)")
        for e in rep.errors:
            print(f"  - {e}")
        return 1
    print("OK" + (" (schema only)" if args.schema_only else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
