"""The FTS5 query compiler and lexical search through ``Tether.search``.

Every query a user can type must come back as a list of hits (possibly empty): FTS5 syntax
in the input is plain text, never an operator, and never an error.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tether import Settings, Tether
from tether.errors import InvalidArgument
from tether.models import Hit
from tether.retrieve import compile_match, query_terms
from tether.retrieve.fts import (
    MAX_QUERY_CHARS,
    MAX_TERMS,
    STOPWORDS,
    compounds,
    joined,
    spellings,
)

# -- a small corpus ----------------------------------------------------------------------

CORPUS = {
    "multi": "Multi-agent systems coordinate several agents that plan together.",
    "nasa": "NASA launched the rocket from the coast at dawn.",
    "near": "The depot is near the railway station, close to the river.",
    "colterm": "Each col of the matrix holds exactly one term of the series.",
    "secret": "The secret password is stored in the vault downstairs.",
    "arabic": "مرحبا بالعالم من المكتبة",
    "hebrew": "שלום עולם מהספרייה",
    "cafe": "Le Café du Coin serves crème brûlée every Sunday.",
    "lorem": "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
    "start": "Press start to begin the calibration of the sensor.",
    "battery": "The battery lasts twelve hours on a single charge.",
    "unbalanced": "An unbalanced wheel makes the whole carriage wobble.",
    "path": "Windows keeps the file under C:\\Users\\guest\\Documents somewhere.",
    "drop": "Drop the anchor before you table the motion.",
}


def _add_corpus(t: Tether) -> None:
    for doc_id, text in CORPUS.items():
        t.add(text=text, title=doc_id.title(), document_id=doc_id)


@pytest.fixture
def store(tether: Tether) -> Tether:
    _add_corpus(tether)
    return tether


def _doc_ids(hits: list[Hit]) -> list[str]:
    return [h.document_id for h in hits]


# -- the compiler ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("battery life", ["battery", "life"]),
        ("what is the battery life", ["battery", "life"]),
        ("What does the guide say about resetting?", ["guide", "say", "resetting"]),
        ("Battery BATTERY battery", ["battery"]),
        ("Life battery LIFE", ["life", "battery"]),
        ("multi-agent", ["multi", "agent"]),
        ("col:term", ["term"]),  # a column filter: only its term is searched
        ("Note: col:term", ["note", "term"]),  # prose keeps its words
        ("snake_case_name", ["snake", "case", "name"]),
        ("version 2 of 3", ["version", "2", "3"]),
    ],
)
def test_query_terms(query: str, terms: list[str]) -> None:
    assert query_terms(query) == terms


@pytest.mark.parametrize("query", ["the who", "What is it?", "to be or not to be", "AND OR NOT"])
def test_a_query_of_only_stopwords_still_searches_them(query: str) -> None:
    terms = query_terms(query)
    assert terms
    assert all(t in STOPWORDS for t in terms)
    assert terms == list(dict.fromkeys(query.casefold().replace("?", "").split()))


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("I'm sure it doesn't start", ["sure", "start"]),
        ("We’ve tried; you'll see it won't, can't or shouldn't", ["tried", "see"]),
        ("Python's API and the user’s guide", ["python", "api", "user", "guide"]),
    ],
)
def test_contractions_are_read_whole(query: str, terms: list[str]) -> None:
    assert query_terms(query) == terms


def test_stopwords_are_removed_when_something_else_remains() -> None:
    assert query_terms("the who and the battery") == ["battery"]


@pytest.mark.parametrize(
    ("query", "match"),
    [
        ("battery", '"battery"'),
        ("Battery Life", '"battery" OR "life"'),
        ("what is the battery life", '"battery" OR "life"'),
        (
            'say "hello" NEAR(a b) col:term foo*',
            '"say" OR "hello" OR "b" OR "term" OR "foo"',  # NEAR and col: are syntax
        ),
        ("AND OR NOT", '"and" OR "or" OR "not"'),
        # A compound (terms joined by . - / : without space) is also a phrase of its terms.
        ("magnitude 6.4", '"magnitude" OR "6" OR "4" OR "6 4"'),
        ("ZX-9047 at 10:30", '"zx" OR "9047" OR "10" OR "30" OR "zx 9047" OR "10 30"'),
        ("v2.1.3 or V2.1.3, col:term", '"v2" OR "1" OR "3" OR "term" OR "v2 1 3"'),
        ("end. Next", '"end" OR "next"'),
        # Words joined by hyphens are also searched as one word.
        (
            "e-mail set-up",
            '"e" OR "mail" OR "set" OR "up" OR "email" OR "setup" OR "e mail" OR "set up"',
        ),
    ],
)
def test_compile_match_quotes_every_term_and_joins_with_or(query: str, match: str) -> None:
    assert compile_match(query) == match


def test_a_compound_ranks_the_chunk_holding_it_whole_first(tether: Tether) -> None:
    # Each row holds a "6" and a "4"; only one holds "6.4" (the parts in a row, in order).
    rows = {f"row{i}": f"depth: {d}; magnitude: {m}" for i, (d, m) in enumerate(
        [(46, 5.6), (64, 4.6), (127, 6.4), (604, 4.0), (4, 6.1), (66, 4.4)]
    )}  # fmt: skip
    for doc_id, text in rows.items():
        tether.add(text=text, title="quakes", document_id=doc_id)
    hits = tether.search("How deep was the magnitude 6.4 earthquake?", scope="global")
    assert _doc_ids(hits)[0] == "row2"


@given(st.text(max_size=300))
@hsettings(max_examples=200, deadline=None)
def test_compiled_match_is_quoted_terms_joined_by_or(text: str) -> None:
    match = compile_match(text)
    terms = query_terms(text)
    if not terms:
        assert match is None
        return
    assert match is not None
    parts = match.split(" OR ")
    extra = [v for v in spellings(terms) + joined(text) if v not in terms]
    assert len(parts) == len(terms) + len(extra) + len(compounds(text))
    for part in parts:
        assert len(part) >= 3
        assert part.startswith('"')
        assert part.endswith('"')
        assert '"' not in part[1:-1]


def test_at_most_max_terms() -> None:
    words = [f"word{i}" for i in range(MAX_TERMS * 2)]
    terms = query_terms(" ".join(words))
    assert terms == words[:MAX_TERMS]
    match = compile_match(" ".join(words))
    assert match is not None
    assert match.count(" OR ") == MAX_TERMS - 1


def test_only_the_first_max_query_chars_are_read() -> None:
    head = "alpha "
    padding = " " * (MAX_QUERY_CHARS - len(head))
    assert query_terms(head + padding + "zebra") == ["alpha"]
    assert query_terms(head + padding[:-10] + "zebra") == ["alpha", "zebra"]


@pytest.mark.parametrize(
    "query", ["", " ", "   \n\t ", "?!", "*", '"', '""', "()", ":-", "\x00", "\\", "🚀🔥", "___"]
)
def test_no_searchable_term_compiles_to_none(query: str) -> None:
    assert query_terms(query) == []
    assert compile_match(query) is None


@pytest.mark.parametrize("query", ["", " ", "   \n\t ", "?!", "*", "\x00", "🚀"])
def test_search_without_terms_returns_an_empty_list(store: Tether, query: str) -> None:
    assert store.search(query, scope="global") == []


def test_the_compiler_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        compile_match(b"bytes")  # type: ignore[arg-type]


# -- hostile inputs against a real store --------------------------------------------------

HOSTILE: list[tuple[str, str | None]] = [
    ('"', None),
    ('""', None),
    ("*", None),
    ("foo*", None),
    ("NEAR(", "near"),
    ("NEAR(rocket dawn, 3)", "nasa"),  # the group's words, not NEAR or the distance
    ("title:battery", "battery"),
    ("col:term", "colterm"),
    ("content:secret", "secret"),
    ("section_title:x", None),
    ("multi-agent", "multi"),
    ("@nasa", "nasa"),
    ("", None),
    (" ", None),
    ("lorem ipsum " * 9000, "lorem"),
    ("x" * 100_000, None),
    ("ẍ" * 100_000, None),
    ("🚀🔥 rocket", "nasa"),
    ("مرحبا بالعالم", "arabic"),
    ("שלום עולם", "hebrew"),
    ("AND OR NOT", None),
    ("a AND b", None),
    ("(unbalanced", "unbalanced"),
    ("^start", "start"),
    ("{a b}: c", None),
    ("'; DROP TABLE rag_chunks; --", "drop"),
    ("\x00", None),
    ("\x00\x00nasa\x00", "nasa"),
    ("\\", None),
    ("C:\\Users\\guest", "path"),
    ('\\"nasa\\"', "nasa"),
    ("-term", "colterm"),
    ("+term", "colterm"),
    ("NOT secret", "secret"),
    ("secret NOT password", "secret"),
    ("rag_chunks_fts MATCH '*'", None),
    ("café*", "cafe"),
    ('"unbalanced wheel', "unbalanced"),
]


def _check_hostile(store: Tether, query: str, expected: str | None) -> None:
    hits = store.search(query, scope="global", k=20)
    assert isinstance(hits, list)
    assert all(isinstance(h, Hit) for h in hits)
    if expected is not None:
        assert expected in _doc_ids(hits), f"{query[:40]!r} did not find {expected!r}"


@pytest.mark.parametrize(
    ("query", "expected"), HOSTILE, ids=[repr(q[:24]) + f"-{len(q)}" for q, _ in HOSTILE]
)
def test_hostile_query_never_raises(store: Tether, query: str, expected: str | None) -> None:
    before = store.store.counts()
    _check_hostile(store, query, expected)
    store.store.fts_integrity_check()
    assert store.store.counts() == before


def test_store_is_intact_after_every_hostile_query(store: Tether) -> None:
    before = store.store.counts()
    docs_before = {d.id for d in store.documents()}
    for query, expected in HOSTILE:
        _check_hostile(store, query, expected)
        for scope in ("session", "workspace"):
            assert store.search(query, scope=scope, session_id="nope", workspace_id="nope") == []
    store.store.fts_integrity_check()
    assert store.store.counts() == before
    assert {d.id for d in store.documents()} == docs_before
    assert len(docs_before) == len(CORPUS)
    # and search still works
    assert _doc_ids(store.search("battery", scope="global")) == ["battery"]


def test_operators_in_the_query_are_plain_words(store: Tether) -> None:
    # As FTS5 syntax, "secret NOT password" would exclude the only document with "secret".
    assert _doc_ids(store.search("secret NOT password", scope="global")) == ["secret"]
    # As FTS5 syntax, "nasa AND rocket AND vault" would match nothing.
    found = set(_doc_ids(store.search("nasa AND rocket AND vault", scope="global")))
    assert found == {"nasa", "secret"}
    # As a prefix query, "batt*" would find "battery"; as text it is the word "batt".
    assert store.search("batt*", scope="global") == []


# -- properties ---------------------------------------------------------------------------

ANY_TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"]),
    max_size=400,
)


@given(text=ANY_TEXT)
@hsettings(max_examples=300, deadline=None)
def test_compile_match_never_raises(text: str) -> None:
    match = compile_match(text)
    assert match is None or isinstance(match, str)


@given(text=st.one_of(ANY_TEXT, st.text(alphabet='"*:^()-+{}NEARORNOTAND \\\x00', max_size=60)))
@hsettings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_search_never_raises(store: Tether, text: str) -> None:
    hits = store.search(text, scope="global", k=5)
    assert isinstance(hits, list)
    assert len(hits) <= 5
    assert all(isinstance(h, Hit) for h in hits)


WORD = st.text(
    alphabet=st.characters(categories=["L", "N"]),
    min_size=1,
    max_size=12,
)


@pytest.fixture
def word_store(tmp_path: Path) -> Iterator[Tether]:
    with Tether(db=tmp_path / "words.db", settings=Settings.load()) as t:
        yield t


@given(
    words=st.lists(WORD, min_size=1, max_size=4),
    separators=st.lists(st.sampled_from([" ", "-", ", ", ":", "'", '"', "(", "/", "\n"])),
    pick=st.integers(min_value=0),
    form=st.sampled_from(["NFC", "NFD"]),
)
@hsettings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_a_document_is_found_by_its_own_words(
    word_store: Tether, words: list[str], separators: list[str], pick: int, form: str
) -> None:
    """Whatever the script or case, searching a document's text, or any one of its words,
    finds it (also when the query arrives decomposed, as text pasted from macOS may)."""
    text = words[0] + "".join(
        (separators[i % len(separators)] if separators else " ") + w
        for i, w in enumerate(words[1:])
    )
    [result] = word_store.add(text=text, title="w", workspace_id="words", on_error="collect")
    if result.status == "failed":  # text that normalizes to nothing
        return
    for query in (text, words[pick % len(words)]):
        query = unicodedata.normalize(form, query)
        if compile_match(query) is None:
            continue
        hits = word_store.search(query, scope="workspace", workspace_id="words", k=1000)
        assert result.document_id in _doc_ids(hits), query


# -- tokenizer behaviour ------------------------------------------------------------------


@pytest.mark.parametrize("query", ["cafe", "CAFE", "café", "CAFÉ", "Café", "cafe\u0301"])
def test_accents_and_case_are_folded(store: Tether, query: str) -> None:
    assert _doc_ids(store.search(query, scope="global")) == ["cafe"]


@pytest.mark.parametrize("query", ["creme brulee", "CRÈME", "Brûlée"])
def test_accented_document_words_match_plain_queries(store: Tether, query: str) -> None:
    assert _doc_ids(store.search(query, scope="global")) == ["cafe"]


@pytest.mark.parametrize(
    ("document", "query"),
    [
        ("Die Straße ist lang.", "Straße"),
        ("Die Straße ist lang.", "STRAßE"),
        ("Ο λόγος είναι σαφής.", "λόγος"),
        ("Ο λόγος είναι σαφής.", "ΛΌΓΟΣ"),
        ("İstanbul is a large city.", "İstanbul"),
        ("İstanbul is a large city.", "istanbul"),
        ("ᲛᲐᲠᲢᲘ is a Georgian word in Mtavruli.", "ᲛᲐᲠᲢᲘ"),
        ("보고서 문서를 찾습니다", "보고서"),
    ],
)
def test_non_ascii_words_find_their_document(tether: Tether, document: str, query: str) -> None:
    tether.add(text=document, title="doc", document_id="doc")
    tether.add(text="An unrelated text about engines.", title="other", document_id="other")
    assert _doc_ids(tether.search(query, scope="global")) == ["doc"]


def test_decomposed_hangul_query_finds_composed_document(tether: Tether) -> None:
    tether.add(text="보고서 문서를 찾습니다", title="doc", document_id="doc")
    query = unicodedata.normalize("NFD", "보고서")
    assert query != "보고서"
    assert _doc_ids(tether.search(query, scope="global")) == ["doc"]


@pytest.mark.parametrize("query", ["batteries", "battery", "Battery", "BATTERIES"])
def test_porter_stemming(store: Tether, query: str) -> None:
    assert _doc_ids(store.search(query, scope="global")) == ["battery"]


def test_stemming_works_from_the_document_side(tether: Tether) -> None:
    tether.add(text="Replace both batteries every year.", title="b", document_id="b")
    assert _doc_ids(tether.search("battery", scope="global")) == ["b"]


def test_only_stopwords_query_finds_a_document_with_those_words(tether: Tether) -> None:
    tether.add(text="The Who played a long concert.", title="band", document_id="band")
    tether.add(text="Concrete sets in a day.", title="other", document_id="other")
    assert _doc_ids(tether.search("the who", scope="global")) == ["band"]


# -- ranking ------------------------------------------------------------------------------


def test_chunk_with_more_rare_terms_ranks_first(tether: Tether) -> None:
    filler = "common words appear in every single document of this corpus"
    docs = {
        "all": f"quasar pulsar magnetar {filler}",
        "two": f"quasar pulsar orbit {filler}",
        "one": f"quasar nothing else {filler}",
    }
    for i in range(6):
        docs[f"noise{i}"] = f"unrelated text number {i} {filler}"
    for doc_id, text in docs.items():
        tether.add(text=text, title=doc_id, document_id=doc_id)
    hits = tether.search("quasar pulsar magnetar", scope="global")
    assert _doc_ids(hits) == ["all", "two", "one"]
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > scores[1] > scores[2]


def test_hits_are_in_descending_score_order(store: Tether) -> None:
    hits = store.search("the rocket battery near station secret term agent", scope="global")
    assert len(hits) >= 5
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len({h.chunk_id for h in hits}) == len(hits)


def test_k_limits_the_number_of_hits(store: Tether) -> None:
    query = "rocket battery near station secret term agent"
    all_hits = store.search(query, scope="global", k=100)
    assert len(all_hits) >= 5
    for k in (1, 2, 3):
        assert store.search(query, scope="global", k=k) == all_hits[:k]


# -- input validation ---------------------------------------------------------------------


@pytest.mark.parametrize("query", [None, 5, 1.5, b"battery", ["battery"], {"q": "battery"}])
def test_non_str_query_is_invalid(store: Tether, query: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        store.search(query, scope="global")  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("k", [0, -1, 1001, True, False, "5", 5.0, None])
def test_bad_k_is_invalid(store: Tether, k: object) -> None:
    with pytest.raises(InvalidArgument):
        store.search("battery", scope="global", k=k)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [1, 1000])
def test_k_bounds_are_accepted(store: Tether, k: int) -> None:
    assert _doc_ids(store.search("battery", scope="global", k=k)) == ["battery"]
