"""Lexical retrieval in German, French and Spanish: today's English settings against the
matching ``rag.language``, on the same translated text (the Debian Reference 2.100).

    python3 bench/languages/fetch.py            # once: the four books, pinned by checksum
    python bench/languages/measure.py           # every language (about half a minute)
    python bench/languages/measure.py de --json

**What it measures.** Each section of the book (a heading and the text under it, up to
the next heading) is one document. Its heading and its first sentence are held out of
what is indexed, and each is a query whose one right answer is that section: a
known-item search with the author's own words, no paraphrase and no relevance judge.
Headings are short noun phrases ("Paketkonfiguration") whose words the section then uses
in other forms ("konfigurieren", "Pakete"), so they test stemming; first sentences are
longer and share more words with the rest of the section. It measures the lexical side
alone (FTS5 bm25, no vectors, no rerank) as ``Tether.search(mode="lexical")`` runs it:
the query compiled by :func:`tether.retrieve.fts.compile_match` for a language, and
searched in a store made for one. Untranslated sections (the translations are partial:
more of English's commonest words than of the language's) and headings that are not
unique in a book are left out; the output says how many. See README.md beside it.

MRR@10 is the mean of 1 / rank of the right section among the first ten sections found
(0 past ten); recall@10 the share of queries that find it in the first ten.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import re
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import tether.text
from tether import Settings, Tether, TextSource
from tether.models import Scope
from tether.retrieve.fts import compile_match, query_terms
from tether.store import open_store

HERE = Path(__file__).resolve().parent
DOCS = HERE / "docs"
LANGUAGES = {"de": "german", "fr": "french", "es": "spanish", "en": "english"}
_BLOCKS = {"p", "div", "pre", "li", "tr", "td", "th", "dt", "dd", "br", "table", "h1"}
_SKIPPED = {"toc", "navheader", "navfooter"}
_HEADINGS = {"h2", "h3", "h4", "h5"}
_NUMBER = re.compile(r"^\s*[0-9A-Z]+(?:\.\d+)+\.?\s*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Section:
    heading: str
    body: str


class _Sections(HTMLParser):
    """The sections of one DocBook chapter: each heading (h2-h5) and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[list[str]] = []  # [heading, body parts...]
        self._divs: list[bool] = []  # per open div: whether it is skipped
        self._heading: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "div":
            self._divs.append(dict(attrs).get("class") in _SKIPPED)
        if tag in _HEADINGS:
            self._heading = []
        elif tag in _BLOCKS and self.found:
            self.found[-1].append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._divs:
            self._divs.pop()
        if tag in _HEADINGS and self._heading is not None:
            heading = _NUMBER.sub("", " ".join("".join(self._heading).split()))
            self.found.append([heading])
            self._heading = None

    def handle_data(self, data: str) -> None:
        if any(self._divs):
            return
        if self._heading is not None:
            self._heading.append(data)
        elif self.found:
            self.found[-1].append(data)


def book(code: str) -> list[Section]:
    """Every section of the book in language ``code``, in order."""
    sections = []
    for chapter in sorted((DOCS / code).glob("ch*.html")):
        parser = _Sections()
        parser.feed(chapter.read_text(encoding="utf-8"))
        for heading, *parts in parser.found:
            lines = (" ".join(line.split()) for line in "".join(parts).split("\n"))
            sections.append(Section(heading, "\n".join(line for line in lines if line)))
    return sections


@dataclass(frozen=True)
class KnownItems:
    """Documents to index (each a section less its heading and first sentence) and the
    queries that name them: ``(query, document index)`` per query set."""

    documents: list[str]
    queries: dict[str, list[tuple[str, int]]]
    left_out: dict[str, int]


def known_items(sections: list[Section], language: str) -> KnownItems:
    headings: dict[str, int] = {}
    for s in sections:
        headings[s.heading.casefold()] = headings.get(s.heading.casefold(), 0) + 1
    documents: list[str] = []
    queries: dict[str, list[tuple[str, int]]] = {"heading": [], "first sentence": []}
    left_out = {"untranslated": 0, "too short": 0, "heading not unique": 0}
    for s in sections:
        first, rest = _split_first_sentence(s.body)
        if len(rest) < 200 or len(first.split()) < 4:
            left_out["too short"] += 1
        elif language != "english" and _untranslated(s.body, language):
            left_out["untranslated"] += 1
        else:
            documents.append(rest)
            queries["first sentence"].append((first, len(documents) - 1))
            if headings[s.heading.casefold()] > 1:
                left_out["heading not unique"] += 1
            elif query_terms(s.heading):
                queries["heading"].append((s.heading, len(documents) - 1))
    return KnownItems(documents, queries, left_out)


def _split_first_sentence(body: str) -> tuple[str, str]:
    parts = _SENTENCE_END.split(body.strip(), maxsplit=1)
    return (parts[0], parts[1]) if len(parts) == 2 else (parts[0], "")


#: A few of each language's commonest words: a section holding more of English's than of
#: its own language's was left untranslated.
_COMMONEST = {
    "english": {"the", "and", "is", "of", "to", "a", "in", "for"},
    "german": {"der", "die", "das", "und", "ist", "nicht", "mit", "ein"},
    "french": {"le", "la", "les", "et", "est", "des", "une", "pour"},
    "spanish": {"el", "la", "los", "y", "es", "las", "una", "para"},
}


def _untranslated(text: str, language: str) -> bool:
    words = [w.casefold() for w in _WORD.findall(text)]
    english = sum(w in _COMMONEST["english"] for w in words)
    return english > sum(w in _COMMONEST[language] for w in words)


def build_store(path: Path, language: str, documents: list[str]) -> None:
    """A store of ``language`` at ``path`` holding ``documents`` (their ids: their index)."""
    open_store(path, language=language).close()
    settings = Settings.load(rag={"language": language, "embeddings": {"enabled": False}})
    with Tether(db=path, settings=settings) as t:
        t.add([TextSource(d, f"section {i}", document_id=str(i)) for i, d in enumerate(documents)])


@contextlib.contextmanager
def accented_stems(on: bool) -> Iterator[None]:
    """An ablation, not a setting: Snowball stems the words with their diacritics (FTS5
    folds the stems afterwards), where tether folds diacritics first."""
    folding = tether.text._without_diacritics
    if on:
        tether.text._without_diacritics = lambda text: text
    try:
        yield
    finally:
        tether.text._without_diacritics = folding


Compile = Callable[[str], str | None]


def score(path: Path, queries: list[tuple[str, int]], compile_query: Compile) -> dict[str, float]:
    """MRR@10 and recall@10 of ``queries`` on the store at ``path``."""
    reciprocal, found = 0.0, 0
    store = open_store(path)  # (opened for the language it was made for)
    try:
        for query, answer in queries:
            match = compile_query(query)
            hits = store.search_lexical(Scope.global_(), match, 50) if match else []
            ranked = list(dict.fromkeys(int(h.document_id) for h in hits))[:10]
            if answer in ranked:
                reciprocal += 1 / (ranked.index(answer) + 1)
                found += 1
    finally:
        store.close()
    n = max(len(queries), 1)
    return {"mrr@10": round(reciprocal / n, 4), "recall@10": round(found / n, 4)}


def without_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@dataclass(frozen=True)
class Variant:
    """One row: the store's language and folding, and how queries are compiled."""

    name: str
    store: str  # "english" or "native": the store's language
    compile: Callable[[str, str], str | None]  # (query, book language) -> MATCH
    accented: bool = False  # stem the words with their diacritics (accented_stems)


def _no_stopwords(query: str, language: str) -> str | None:
    """Every term of the query, none dropped as a stopword (an ablation)."""
    terms = [term for term in _WORD.findall(query) if len(term) <= 128]
    return " OR ".join(f'"{t}"' for t in dict.fromkeys(terms)) or None


VARIANTS = (
    Variant("English settings (today)", "english", lambda q, language: compile_match(q)),
    Variant("rag.language", "native", compile_match),
    Variant("rag.language, no stopwords", "native", _no_stopwords),
    Variant("rag.language, accented words stemmed", "native", compile_match, accented=True),
    Variant(
        "rag.language, accented words stemmed, queries without accents",
        "native",
        lambda q, language: compile_match(without_accents(q), language),
        accented=True,
    ),
    Variant(
        "English settings, queries without accents",
        "english",
        lambda q, language: compile_match(without_accents(q)),
    ),
    Variant(
        "rag.language, queries without accents",
        "native",
        lambda q, language: compile_match(without_accents(q), language),
    ),
)


def measure(code: str, folder: Path) -> dict[str, Any]:
    """Every variant's scores on the book in language ``code``."""
    language = LANGUAGES[code]
    items = known_items(book(code), language)
    rows = []
    variants = VARIANTS if language != "english" else VARIANTS[:1]
    for variant in variants:
        store = language if variant.store == "native" else "english"
        path = folder / f"{code}-{store}{'-accented' if variant.accented else ''}.db"
        row: dict[str, Any] = {"variant": variant.name}
        with accented_stems(variant.accented):
            if not path.exists():
                build_store(path, store, items.documents)
            compiled = functools.partial(variant.compile, language=language)
            for kind, queries in items.queries.items():
                row[kind] = score(path, queries, compiled)
        rows.append(row)
    counts = {kind: len(queries) for kind, queries in items.queries.items()}
    return {
        "language": language,
        "sections": len(items.documents),
        "queries": counts,
        "left_out": items.left_out,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("codes", nargs="*", metavar="LANG", help="de, fr, es, en (default: all)")
    parser.add_argument("--json", action="store_true", help="print JSON, not tables")
    args = parser.parse_args(argv)
    args.codes = args.codes or list(LANGUAGES)
    if set(args.codes) - set(LANGUAGES):
        parser.error(f"languages are {', '.join(LANGUAGES)}")
    if not all((DOCS / code).is_dir() for code in args.codes):
        print("the books are not there: run python3 bench/languages/fetch.py", file=sys.stderr)
        return 2
    started, results = time.perf_counter(), []
    with tempfile.TemporaryDirectory(prefix="tether-languages-") as tmp:
        for code in args.codes:
            results.append(measure(code, Path(tmp)))
            if not args.json:
                print_table(results[-1])
    if args.json:
        print(json.dumps(results, indent=2, ensure_ascii=False))
    print(f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


def print_table(result: dict[str, Any]) -> None:
    queries = result["queries"]
    print(
        f"\n{result['language']}: {result['sections']} sections, {queries['heading']} heading"
        f" and {queries['first sentence']} first-sentence queries; left out {result['left_out']}"
    )
    print("| variant | heading MRR@10 | heading R@10 | sentence MRR@10 | sentence R@10 |")
    print("| --- | --- | --- | --- | --- |")
    for row in result["rows"]:
        h, f = row["heading"], row["first sentence"]
        print(
            f"| {row['variant']} | {h['mrr@10']:.3f} | {h['recall@10']:.3f}"
            f" | {f['mrr@10']:.3f} | {f['recall@10']:.3f} |"
        )


if __name__ == "__main__":
    sys.exit(main())
