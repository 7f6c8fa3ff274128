"""Scope isolation in every search mode (lexical, vector, hybrid), with vectors present.

The stores hold multi-chunk documents spread over workspaces, sessions (attached,
re-attached, detached) and the global library. The expected results are computed in
Python from what each test added, attached and detached; nothing is read back from the
store's tables. Lexical matching is judged by a scratch FTS5 table that holds only the
corpus vocabulary, one word a row, with the store's documented tokenizer (porter
unicode61 remove_diacritics 2): it says which corpus words a query term matches, the
way FTS5 does, including stemming ("turbines" finds "turbine") and diacritics.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import string
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from test_scope import (
    add_and_attach,
    draw_workspaces_and_sessions,
    sessions_that_may_attach,
    without_fts_syntax,
)

from helpers import make_settings
from tether import GLOBAL_WORKSPACE, Hit, Scope, Tether, TextSource
from tether.errors import ScopeError
from tether.retrieve.fts import MAX_QUERY_CHARS, MAX_TERMS, STOPWORDS
from tether.testing import HashEmbedder

MODES = ("lexical", "vector", "hybrid")

# Topic words: what queries look for. Filler: padding that makes paragraphs chunk-sized.
# Every word is its own porter stem and no two share one (checked below).
VOCAB = (
    "apple", "river", "stone", "cloud", "tiger", "lemon", "piano", "robot",
    "turbine", "battery", "falcon", "garden", "marble", "copper", "violin", "canyon",
    "harbor", "pepper", "meadow", "walnut", "glacier", "rocket", "saddle", "lantern",
)  # fmt: skip
FILLER = (
    "lorem", "ipsum", "dolor", "amet", "elit", "tempor",
    "magna", "aliqua", "veniam", "nostrud", "ullamco", "laboris",
)  # fmt: skip
CORPUS_WORDS = VOCAB + FILLER
# Frequent topics (among them the words of the hostile queries), so that queries often
# match more chunks in a scope than k, and match in some scopes and not in others.
HOT = ("turbine", "battery", "tiger", "lemon", "apple", "river")
TOPICS = st.one_of(st.sampled_from(HOT), st.sampled_from(VOCAB))

# The spec's hostile queries; each one is searched in every mode and scope by
# test_every_hostile_query_in_every_scope_and_mode, and they are mixed into the property.
HOSTILE = (
    '"',
    "*",
    "NEAR(",
    "col:term",
    "multi-agent",
    "@nasa",
    "",
    "turbine " * 12500,  # 100 kB
    "🔥🚀",
    "مرحبا بالعالم",
    "שלום",
    "title:battery",
    "apple:river",  # a column filter named like a corpus word: only "river" is a term
    "NEAR(tiger lemon, 2)",
    "') OR 1=1 --",
)

# Chunking: paragraphs of 100-190 characters separated by blank lines, chunk_size 200
# and no overlap, so every paragraph is exactly one chunk (checked on the hits' text).
CHUNK_SIZE = 200
PARAGRAPH_MIN = 100
PARAGRAPH_MAX = 190


def open_store(path: Path) -> Tether:
    settings = make_settings(chunk_size=CHUNK_SIZE, chunk_overlap=0)
    return Tether(db=path, settings=settings, embedder=HashEmbedder())


# -- the lexical oracle -------------------------------------------------------------------

_TERM = re.compile(r"[^\W_]+")


@functools.cache
def _vocabulary_fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.execute(
        "CREATE VIRTUAL TABLE words USING fts5("
        "word, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    words = dict.fromkeys([*CORPUS_WORDS, *title_words()])
    conn.executemany("INSERT INTO words (word) VALUES (?)", [(w,) for w in words])
    return conn


def title_words() -> tuple[str, ...]:
    """The words of the documents' titles (each is titled by its id), which FTS5 indexes
    with every chunk of it, as no chunk here has a section title. A stopword among them
    is left out: no query here is that stopword alone, the one case it would match."""
    ids = [d.id for d in FIXED.docs] + [f"doc{i}" for i in range(12)]
    words = (w for i in ids for w in _TERM.findall(i.lower()))
    return tuple(w for w in dict.fromkeys(words) if w not in STOPWORDS)


@functools.lru_cache(maxsize=4096)
def corpus_words_matched_by(term: str) -> frozenset[str]:
    """The corpus words an FTS5 query for the single term ``term`` finds."""
    rows = _vocabulary_fts().execute(
        "SELECT word FROM words WHERE words MATCH ?", ('"' + term.replace('"', '""') + '"',)
    )
    return frozenset(r[0] for r in rows)


def query_words(query: str) -> frozenset[str]:
    """The corpus words a search for ``query`` may find: those matched by any of its terms.

    As specified for the query compiler: only the first MAX_QUERY_CHARS characters are
    read, FTS5 syntax (column filters, NEAR groups) is dropped, terms are runs of letters
    and digits, any one of them matching is enough (OR).
    Stopwords need no special case here: none of them matches a corpus word (checked in
    test_the_vocabulary_is_what_the_oracle_assumes)."""
    terms = _TERM.findall(without_fts_syntax(query[:MAX_QUERY_CHARS]))
    assert len({t.casefold() for t in terms}) <= MAX_TERMS, "keep generated queries short"
    found: set[str] = set()
    for term in terms:
        found |= corpus_words_matched_by(term)
    return frozenset(found)


def test_the_vocabulary_is_what_the_oracle_assumes() -> None:
    for word in CORPUS_WORDS:
        assert corpus_words_matched_by(word) == {word}
        assert corpus_words_matched_by(word.upper()) == {word}
        assert word not in STOPWORDS
    for stopword in STOPWORDS:
        assert corpus_words_matched_by(stopword) == frozenset()
    assert corpus_words_matched_by("turbines") == {"turbine"}
    assert corpus_words_matched_by("ápple") == {"apple"}
    assert query_words("turbine " * 12500) == {"turbine"}
    assert query_words("title:battery") == {"battery"}
    assert query_words("apple:river") == {"river"}
    assert query_words("NEAR(tiger lemon, 2)") == {"tiger", "lemon"}
    for query in ('"', "*", "NEAR(", "col:term", "multi-agent", "", "🔥🚀", "שלום"):
        assert query_words(query) == frozenset()
    assert query_words("@nasa") == {"nasa"}  # the title of document "b-nasa"


# -- the world model ----------------------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    id: str
    workspace_id: str
    paragraphs: tuple[str, ...]  # each one chunk
    sessions: tuple[str, ...]  # attached when added: the first by add(), the rest by attach()

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs)


@dataclass(frozen=True)
class Chunk:
    document_id: str
    text: str
    words: frozenset[str]  # what FTS5 indexes: the title (the id here) as header, and the text
    embedded: str  # what the store embeds: the title as header, then the text


@dataclass
class World:
    """What the test put in the store: the expected scopes, kept without asking it."""

    workspaces: tuple[str, ...]  # GLOBAL included
    sessions: dict[str, str]  # session -> workspace
    docs: dict[str, Doc]
    attached: dict[str, set[str]] = field(default_factory=dict)  # session -> documents

    def in_scope(self, scope: Scope) -> set[str]:
        if scope.kind == "session":
            return set(self.attached.get(scope.id, ()))
        return {d.id for d in self.docs.values() if d.workspace_id == scope.id}

    def chunks(self, scope: Scope) -> list[Chunk]:
        return [
            Chunk(
                doc_id, p, frozenset(re.findall(r"[a-z0-9]+", f"{doc_id} {p}")), f"{doc_id}\n\n{p}"
            )
            for doc_id in sorted(self.in_scope(scope))
            for p in self.docs[doc_id].paragraphs
        ]

    def scopes(self) -> list[Scope]:
        return [
            *(Scope.session(s) for s in self.sessions),
            *(Scope.workspace(w) for w in self.workspaces),
            Scope.global_(),
            Scope.session("ghost-session"),
            Scope.workspace("ghost-workspace"),
        ]

    def may_attach(self, doc_id: str, session: str) -> bool:
        return self.docs[doc_id].workspace_id in (self.sessions[session], GLOBAL_WORKSPACE)


@st.composite
def paragraphs(draw: st.DrawFn) -> str:
    """100-190 characters: filler and up to three topic words, ending with a full stop."""
    topics = draw(st.lists(TOPICS, max_size=3, unique=True))
    pool = list(topics) * 3 + list(FILLER)  # topic words are frequent where present
    words: list[str] = []
    while len(" ".join(words)) + 1 < PARAGRAPH_MIN:
        words.append(draw(st.sampled_from(pool)))
    text = " ".join(words) + "."
    assert PARAGRAPH_MIN <= len(text) <= PARAGRAPH_MAX
    return text


@dataclass(frozen=True)
class Layout:
    workspaces: tuple[str, ...]
    sessions: dict[str, str]
    docs: tuple[Doc, ...]
    # ("attach" | "detach", document, session), applied after a first round of searches;
    # some pairs cross workspaces, where attach must raise ScopeError and change nothing.
    ops: tuple[tuple[str, str, str], ...]


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    workspaces, sessions = draw_workspaces_and_sessions(draw)
    docs = []
    for i in range(draw(st.integers(1, 12))):
        ws = draw(st.sampled_from(workspaces))
        eligible = sessions_that_may_attach(sessions, ws)
        attached = (
            draw(st.lists(st.sampled_from(eligible), max_size=3, unique=True)) if eligible else []
        )
        texts = draw(st.lists(paragraphs(), min_size=1, max_size=5))
        docs.append(Doc(f"doc{i}", ws, tuple(texts), tuple(attached)))
    pairs = [(d.id, s) for d in docs for s in sessions]
    ops = (
        draw(
            st.lists(
                st.tuples(st.sampled_from(("attach", "detach")), st.sampled_from(pairs)).map(
                    lambda op: (op[0], *op[1])
                ),
                max_size=12,
            )
        )
        if pairs
        else []
    )
    return Layout(workspaces, sessions, tuple(docs), tuple(ops))


def build(t: Tether, layout: Layout) -> World:
    world = World(layout.workspaces, dict(layout.sessions), {d.id: d for d in layout.docs})
    for session, ws in layout.sessions.items():
        t.create_session(session, workspace_id=ws)
        world.attached[session] = set()
    for ws in layout.workspaces:
        t.create_workspace(ws)
    for doc in layout.docs:
        add_and_attach(t, doc)
        for session in doc.sessions:
            world.attached[session].add(doc.id)
    return world


def apply_ops(t: Tether, world: World, ops: tuple[tuple[str, str, str], ...]) -> None:
    for op, doc_id, session in ops:
        attached = doc_id in world.attached[session]
        if not world.may_attach(doc_id, session):
            if op == "attach":
                with pytest.raises(ScopeError):
                    t.attach(doc_id, session)
            else:
                assert t.detach(doc_id, session) is False
        elif op == "attach":
            assert t.attach(doc_id, session) is (not attached)
            world.attached[session].add(doc_id)
        else:
            assert t.detach(doc_id, session) is attached
            world.attached[session].discard(doc_id)


# -- the check ----------------------------------------------------------------------------

_ORACLE_EMBEDDER = HashEmbedder()


@functools.lru_cache(maxsize=8192)
def _unit_vector(text: str) -> np.ndarray:
    return _ORACLE_EMBEDDER.embed([text])[0].astype(np.float64)


def check_search(t: Tether, world: World, query: str, scope: Scope, k: int, mode: str) -> list[Hit]:
    hits = t.search(query, scope=scope, k=k, mode=mode)  # type: ignore[arg-type]
    chunks = world.chunks(scope)
    where = (mode, scope, query[:60], k)
    known = {(c.document_id, c.text): c for c in chunks}
    in_scope = world.in_scope(scope)

    # 1. Every hit is a chunk of an in-scope document, and no chunk comes twice.
    for h in hits:
        assert h.document_id in in_scope, ("hit out of scope", h.document_id, where)
        assert h.workspace_id == world.docs[h.document_id].workspace_id, where
        assert (h.document_id, h.text) in known, ("not one of the document's chunks", where)
    assert len({h.chunk_id for h in hits}) == len(hits), ("duplicate chunk ids", where)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True), where

    # 2. Top-k is filled from the scope: as many hits as the scope can supply.
    wanted = query_words(query)
    lexical = [c for c in chunks if c.words & wanted]
    blank = not query.strip()  # a blank query has no terms and is not embedded
    if mode == "lexical":
        for h in hits:
            assert known[(h.document_id, h.text)].words & wanted, ("hit does not match", where)
        assert len(hits) == min(k, len(lexical)), (len(hits), len(lexical), where)
    elif mode == "vector":
        # Every in-scope chunk has a vector, so every one is a candidate.
        assert len(hits) == (0 if blank else min(k, len(chunks))), (len(hits), where)
        if hits:
            # ... and the hits are the k nearest in scope: same cosines as the k best.
            q = _unit_vector(query)
            cosines = sorted((float(_unit_vector(c.embedded) @ q) for c in chunks), reverse=True)
            np.testing.assert_allclose(scores, cosines[:k], atol=1e-5, err_msg=str(where))
            for h in hits:
                expected = _unit_vector(f"{h.document_id}\n\n{h.text}") @ q
                assert abs(h.score - expected) < 1e-5, where
    else:
        # Hybrid fuses the scope's top lexical_depth (100) lexical and top k_vector (300)
        # vector candidates; a scope here holds fewer than 300 chunks, so every in-scope
        # chunk is a vector candidate whenever the query is embedded.
        assert len(chunks) < 300
        assert len(hits) >= min(k, len(lexical)), (len(hits), len(lexical), where)
        assert len(hits) == (min(k, len(lexical)) if blank else min(k, len(chunks))), where
    return hits


# -- the property -------------------------------------------------------------------------

ALPHABET = (
    string.ascii_letters + string.digits + string.punctuation + "  \t" + "éüßÀ🔥🚀مرحبשלום中文"
)
FRAGMENTS = st.one_of(
    TOPICS,
    TOPICS.map(str.upper),
    st.sampled_from([h for h in HOSTILE if len(h) < 100]),
    st.text(alphabet=ALPHABET, max_size=12),
)
QUERIES = st.one_of(
    st.sampled_from(HOT),  # a plain single word, often matching
    TOPICS,
    st.sampled_from(HOSTILE),
    st.lists(FRAGMENTS, min_size=1, max_size=4).map(" ".join),
    st.lists(FRAGMENTS, min_size=1, max_size=4).map("".join),
)


def search_round(t: Tether, world: World, data: st.DataObject, label: str) -> None:
    queries = data.draw(st.lists(QUERIES, min_size=1, max_size=3), label=f"{label} queries")
    queries.append(data.draw(st.sampled_from(HOSTILE), label=f"{label} hostile"))
    for query in queries:
        for scope in world.scopes():
            k = data.draw(st.one_of(st.integers(1, 3), st.integers(1, 12)), label=f"{label} k")
            for mode in MODES:
                check_search(t, world, query, scope, k, mode)


@pytest.mark.slow
@given(layout=layouts(), data=st.data())
@hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
def test_every_mode_sees_exactly_its_scope_and_fills_top_k(
    layout: Layout, data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp) / "scope.db") as t:
        world = build(t, layout)
        search_round(t, world, data, "before")
        apply_ops(t, world, layout.ops)
        search_round(t, world, data, "after")


# -- every hostile query, on a fixed layout ----------------------------------------------


def _para(*topics: str, seed: int = 0) -> str:
    words = [*topics]
    i = seed
    while len(" ".join(words)) + 1 < PARAGRAPH_MIN:
        words.append(FILLER[i % len(FILLER)] if i % 3 else topics[i % len(topics)])
        i += 1
    return " ".join(words) + "."


FIXED = Layout(
    workspaces=("alpha", "beta", GLOBAL_WORKSPACE),
    sessions={"sa": "alpha", "sa2": "alpha", "sb": "beta", "sg": GLOBAL_WORKSPACE},
    docs=(
        Doc(
            "a-turbine",
            "alpha",
            (_para("turbine"), _para("battery", "tiger"), _para("lemon")),
            ("sa",),
        ),
        Doc("a-quiet", "alpha", (_para("piano", seed=1), _para("robot", seed=2)), ()),
        Doc("b-nasa", "beta", (_para("turbine", seed=3), _para("tiger", "lemon")), ("sb",)),
        Doc("b-more", "beta", tuple(_para("battery", seed=i) for i in range(4)), ()),
        Doc(
            "g-lib",
            GLOBAL_WORKSPACE,
            (_para("lemon", seed=4), _para("turbine", seed=5)),
            ("sa", "sb", "sg"),
        ),
        Doc("g-other", GLOBAL_WORKSPACE, (_para("apple"), _para("river")), ("sa2",)),
    ),
    ops=(("detach", "g-lib", "sb"), ("attach", "a-quiet", "sa2"), ("attach", "b-nasa", "sa")),
)


@pytest.fixture
def fixed_store(tmp_path: Path) -> Iterator[tuple[Tether, World]]:
    with open_store(tmp_path / "fixed.db") as t:
        world = build(t, FIXED)
        apply_ops(t, world, FIXED.ops)
        yield t, world


@pytest.mark.parametrize("query", HOSTILE, ids=lambda q: repr(q[:20]))
def test_every_hostile_query_in_every_scope_and_mode(
    fixed_store: tuple[Tether, World], query: str
) -> None:
    t, world = fixed_store
    assert world.attached["sb"] == {"b-nasa"}
    for scope in world.scopes():
        for k in (1, 3, 25):
            for mode in MODES:
                check_search(t, world, query, scope, k, mode)


def test_chunks_are_the_paragraphs(fixed_store: tuple[Tether, World]) -> None:
    t, world = fixed_store
    for doc in world.docs.values():
        assert t.get_document(doc.id).chunk_count == len(doc.paragraphs)


# -- scope before the top-k cut -----------------------------------------------------------


def test_scope_is_applied_before_the_top_k_cut_in_every_mode(tmp_path: Path) -> None:
    """450 chunks outside the scope match 'beacon' better (more often, in shorter text,
    nearer in vector space): 300 in two other workspaces, 150 in the global library. The
    7 in scope match weakly. A top-10 in scope is exactly those 7, in every mode."""
    strong = " ".join(["beacon"] * 15) + "."
    filler = " ".join(FILLER * 2)
    weak = [f"beacon {filler} {w}." for w in VOCAB[:7]]
    assert all(PARAGRAPH_MIN <= len(p) <= PARAGRAPH_MAX for p in [strong, *weak])
    weak_docs = {"t0": weak[:2], "t2": weak[2:4], "t4": weak[4:], "g": weak[4:]}
    noise_titles = [f"n{i}" for i in range(0, 300, 2)]
    # The noise is nearer the query in vector space than any in-scope chunk (as stored:
    # title as header), so a search that cut the top k before the scope would find none.
    q = _unit_vector("beacon")
    nearest_weak = max(
        float(_unit_vector(f"{d}\n\n{p}") @ q) for d, ps in weak_docs.items() for p in ps
    )
    assert min(float(_unit_vector(f"{n}\n\n{strong}") @ q) for n in noise_titles) > nearest_weak

    with open_store(tmp_path / "buried.db") as t:
        t.create_session("ts", workspace_id="target")
        t.create_session("other", workspace_id="noise-a")
        # 3 strong chunks per document, 50 documents in each of noise-a (attached to a
        # session there), noise-b and the global library.
        for n, ws in enumerate(("noise-a", "noise-b", GLOBAL_WORKSPACE)):
            t.add(
                [
                    TextSource("\n\n".join([strong] * 3), title, document_id=f"{ws}-{title}")
                    for title in noise_titles[50 * n : 50 * n + 50]
                ],
                workspace_id=ws,
                session_id="other" if ws == "noise-a" else None,
            )
        # 7 weak chunks in workspace "target": 4 attached to session "ts" ...
        for doc_id in ("t0", "t2", "t4"):
            t.add(
                text="\n\n".join(weak_docs[doc_id]),
                title=doc_id,
                document_id=doc_id,
                workspace_id="target",
                session_id=None if doc_id == "t4" else "ts",
            )
        # ... and 3 global ones attached to "ts" too (detached from "other" on the way).
        t.add(
            text="\n\n".join(weak_docs["g"]),
            title="g",
            document_id="g",
            workspace_id=GLOBAL_WORKSPACE,
            session_id="other",
        )
        assert t.detach("g", "other") is True
        assert t.attach("g", "ts") is True
        # A draft in the scope is never searched.
        t.add(text=strong, title="d", document_id="d", workspace_id="target", status="draft")

        expected = {
            Scope.workspace("target"): ("t0", "t2", "t4"),
            Scope.session("ts"): ("t0", "t2", "g"),
        }
        for scope, doc_ids in expected.items():
            chunks = {(d, p) for d in doc_ids for p in weak_docs[d]}
            assert len(chunks) == 7
            for mode in MODES:
                hits = t.search("beacon", scope=scope, k=10, mode=mode)  # type: ignore[arg-type]
                assert len(hits) == 7, (scope, mode, [h.document_id for h in hits])
                assert len({h.chunk_id for h in hits}) == 7
                assert {(h.document_id, h.text) for h in hits} == chunks, (scope, mode)
        # The global library: 150 strong chunks and 3 weak; a top-10 is all strong.
        for mode in MODES:
            hits = t.search("beacon", scope="global", k=10, mode=mode)  # type: ignore[arg-type]
            assert len(hits) == 10
            assert {h.workspace_id for h in hits} == {GLOBAL_WORKSPACE}
            assert {h.text for h in hits} == {strong}, mode
