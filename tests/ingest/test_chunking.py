"""Chunks sized in the embedder's tokens: every chunk, under its context header, fits the
model's window; without a tokenizer or a window, chunks are sized in characters as before.

Token counts come from the real packaged all-MiniLM-L6-v2 tokenizer (no torch, no weights).
"""

from __future__ import annotations

import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tether import ConfigurationError, OpenAIEmbedder, Settings, Tether
from tether.embed import LocalEmbedder, TokenCounter
from tether.embed.local import packaged_token_counter
from tether.ingest import (
    Section,
    chunk_sections,
    embedding_text,
    markdown_sections,
    normalize_text,
    split_span,
)
from tether.ingest.chunking import _TOKEN_MARGIN, context_header, section_under_title
from tether.store import NewChunk
from tether.testing import HashEmbedder

MINILM_WINDOW = 256
SPECIAL_TOKENS = 2  # [CLS] and [SEP]: the model adds them inside its window

PROPERTY = hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    found = packaged_token_counter()
    assert found is not None and found("probe") is not None, "the packaged tokenizer is missing"
    return found


def chunk(
    text: str,
    counter: object,
    *,
    title: str | None = "Pump manual",
    sections: list[Section] | None = None,
    window: int | None = MINILM_WINDOW,
    overlap_tokens: int | None = None,
) -> list[NewChunk]:
    return chunk_sections(
        text,
        markdown_sections(text) if sections is None else sections,
        size=1200,
        overlap=150,
        title=title,
        count_tokens=counter,  # type: ignore[arg-type]
        max_tokens=window,
        overlap_tokens=overlap_tokens,
    )


def check_chunks(text: str, chunks: list[NewChunk], title: str | None) -> None:
    """Offsets are the text's, chunks move forward and no non-space character is lost."""
    assert chunks
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    covered = [False] * len(text)
    for c in chunks:
        assert c.content == text[c.char_start : c.char_end] == c.content.strip() != ""
        covered[c.char_start : c.char_end] = [True] * len(c.content)
    for a, b in pairwise(chunks):
        assert b.char_start > a.char_start
    assert all(covered[i] for i, ch in enumerate(text) if not ch.isspace())


def embedded_tokens(counter: TokenCounter, title: str | None, chunks: list[NewChunk]) -> list[int]:
    texts = [embedding_text(title, c.section_title, c.content) for c in chunks]
    counts = counter.count_many(texts)
    assert all(n is not None for n in counts)
    return [n for n in counts if n is not None]


# -- the embedders say their window ---------------------------------------------------------


def test_the_local_model_window_comes_from_its_folder_without_torch() -> None:
    code = (
        "import sys; from tether.embed import LocalEmbedder;"
        " print(LocalEmbedder().max_tokens, 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == [str(MINILM_WINDOW), "False"]


def test_a_model_folder_without_a_window_is_asked_once_loaded(tmp_path: Path) -> None:
    embedder = LocalEmbedder()
    (tmp_path / "config.json").write_text("{}")
    embedder.model_path = str(tmp_path)  # no sentence_bert_config.json, no weights

    class Loaded:
        max_seq_length = 128

    embedder._model = Loaded()
    assert embedder.max_tokens == 128


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("text-embedding-3-small", 8191),
        ("text-embedding-3-large", 8191),
        ("nomic-embed-text", None),  # an Ollama model: not known here
    ],
)
def test_openai_models_window(model: str, window: int | None) -> None:
    assert OpenAIEmbedder(model, api_key="sk-test").max_tokens == window


def test_an_embedder_without_a_window_says_none() -> None:
    assert HashEmbedder().max_tokens is None


# -- no chunk over the window ---------------------------------------------------------------

_SENTENCE = "The {i}th relief valve opens at 4.5 bar when the primary coolant pump overheats."
LONG_PARAGRAPHS = "\n\n".join(
    " ".join(_SENTENCE.format(i=i * 40 + j) for j in range(40)) for i in range(6)
)
SHORT_LINES = "\n".join(f"- step {i}: tighten bolt M{i % 12 + 3}" for i in range(900))
ENORMOUS_WORD = "Checksum: " + "a1b2c3d4" * 3000 + " end."
PUNCTUATED_RUN = "Path: " + ".".join(f"segment{i}" for i in range(2000)) + " done."
# Word pieces cut apart: "photosynthesis" is several tokens, and a cut between two of them
# tokenizes differently on its own; the section is then cut again by counting.
SLASHED = "Tags: " + "/".join(
    ("unbelievable", "photosynthesis", "qzxvkw", "Ümlautish")[i * 7 % 4] for i in range(3000)
)
URLS = " ".join(f"https://example.com/manual/part-{i}?page={i}&lang=en" for i in range(400))
CJK = "泵的冷却系统在高温时会自动关闭阀门。" * 300
MARKDOWN = "\n\n".join(
    f"# Part {p}\n\nIntro of part {p}.\n\n## Maintenance of the {p}th unit\n\n"
    + "\n\n".join(_SENTENCE.format(i=k) * 3 for k in range(12))
    for p in range(4)
)
LONG_HEADINGS = (
    "# " + "Very long heading words " * 12 + "\n\n## " + "Deeper heading terms " * 12 + "\n\n"
) + " ".join(_SENTENCE.format(i=i) for i in range(200))

CASES = {
    "long paragraphs": LONG_PARAGRAPHS,
    "many short lines": SHORT_LINES,
    "an enormous word": ENORMOUS_WORD,
    "a punctuated run without spaces": PUNCTUATED_RUN,
    "words joined by slashes": SLASHED,
    "urls": URLS,
    "cjk": CJK,
    "markdown sections": MARKDOWN,
    "long heading paths": LONG_HEADINGS,
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("window", [MINILM_WINDOW, 128])
def test_no_chunk_is_over_the_window(counter: TokenCounter, name: str, window: int) -> None:
    text = normalize_text(CASES[name])
    chunks = chunk(text, counter, window=window)
    check_chunks(text, chunks, "Pump manual")
    tokens = embedded_tokens(counter, "Pump manual", chunks)
    assert max(tokens) + SPECIAL_TOKENS <= window, f"{name}: {max(tokens)} tokens"
    assert [c.token_count for c in chunks] == counter.count_many([c.content for c in chunks])


def test_a_header_longer_than_the_window_leaves_a_quarter_of_it_to_content(
    counter: TokenCounter,
) -> None:
    """The one case where a chunk's embedding text may be over the window: a heading path
    longer than three quarters of it. The content still gets a quarter of the window."""
    text = normalize_text(LONG_HEADINGS)
    chunks = chunk(text, counter, window=64)
    check_chunks(text, chunks, "Pump manual")
    assert max(c.token_count or 0 for c in chunks) <= 64 // 4


def test_an_enormous_word_is_cut_hard(counter: TokenCounter) -> None:
    """One unknown token to the tokenizer, thousands of characters: cut like a long word."""
    text = "x" * 30_000
    chunks = chunk(text, counter, title=None, sections=[Section(0, len(text))])
    check_chunks(text, chunks, None)
    assert len(chunks) > 10
    assert all(len(c.content) <= 10 * MINILM_WINDOW for c in chunks)


def test_prose_chunks_fill_most_of_the_window(counter: TokenCounter) -> None:
    """Sized in tokens, not cut short: every chunk but a section's last holds more than
    half the window, and the largest come close to it."""
    chunks = chunk(LONG_PARAGRAPHS, counter, sections=[Section(0, len(LONG_PARAGRAPHS))])
    tokens = embedded_tokens(counter, "Pump manual", chunks)
    assert len(chunks) > 5
    assert min(tokens[:-1]) > MINILM_WINDOW // 2
    assert max(tokens) > MINILM_WINDOW - 40


def test_chunks_keep_the_boundaries_of_character_chunking(counter: TokenCounter) -> None:
    """Paragraphs, then sentences: a chunk ends where a sentence does."""
    chunks = chunk(LONG_PARAGRAPHS, counter)
    assert all(c.content.endswith(".") for c in chunks)
    assert all(c.content.startswith("The ") for c in chunks)


@pytest.mark.parametrize("overlap_tokens", [0, 20, None])
def test_overlap_is_counted_in_tokens(counter: TokenCounter, overlap_tokens: int | None) -> None:
    text = LONG_PARAGRAPHS.replace("\n\n", " ")
    chunks = chunk(text, counter, sections=[Section(0, len(text))], overlap_tokens=overlap_tokens)
    shared = [counter(text[b.char_start : a.char_end]) or 0 for a, b in pairwise(chunks)]
    most = overlap_tokens if overlap_tokens is not None else round(0.15 * MINILM_WINDOW)
    if overlap_tokens == 0:
        assert all(b.char_start >= a.char_end for a, b in pairwise(chunks))
    else:
        assert all(a.char_end > b.char_start for a, b in pairwise(chunks)), "no overlap"
        assert max(shared) <= most


def test_without_a_tokenizer_or_a_window_chunks_are_sized_in_characters(
    counter: TokenCounter,
) -> None:
    text = normalize_text(MARKDOWN)
    sections = markdown_sections(text)
    by_chars = [
        (start, end) for s in sections for start, end in split_span(text, s.start, s.end, 1200, 150)
    ]
    for count_tokens, window in [(None, MINILM_WINDOW), (counter, None)]:
        chunks = chunk(text, count_tokens, window=window)
        assert [(c.char_start, c.char_end) for c in chunks] == by_chars


def test_a_counter_without_offsets_is_binary_searched(counter: TokenCounter) -> None:
    """Any ``count_tokens`` callable works: it is asked about slices, never word by word."""
    calls = 0

    def count(text: str) -> int | None:
        nonlocal calls
        calls += 1
        return counter(text)

    text = normalize_text(MARKDOWN)
    chunks = chunk(text, count)
    check_chunks(text, chunks, "Pump manual")
    assert max(embedded_tokens(counter, "Pump manual", chunks)) + SPECIAL_TOKENS <= 256
    assert calls < 40 * len(chunks)


_WORD = st.text(alphabet="abcdefghij0123456789", min_size=1, max_size=12)
_PIECE = st.one_of(
    _WORD,
    _WORD,
    _WORD,
    st.sampled_from([" ", "  ", "\n", "\n\n", ". ", "! ", ", ", "# Head\n", "## Sub\n"]),
    st.text(alphabet="xyz", min_size=60, max_size=1500),  # long unbroken words
)


@PROPERTY
@given(
    st.lists(_PIECE, max_size=300).map("".join).map(normalize_text),
    st.integers(32, 120),
    st.one_of(st.none(), st.integers(0, 16)),
)
def test_word_counted_chunks_fit_their_window(
    text: str, window: int, overlap_tokens: int | None
) -> None:
    """Whatever the text, with a simple counter (words): no chunk's embedding text is
    over the window, and no text is lost."""

    def words(s: str) -> int:
        return len(s.split())

    chunks = chunk(text, words, window=window, overlap_tokens=overlap_tokens)
    if not text.strip():
        assert chunks == []
        return
    check_chunks(text, chunks, "Pump manual")
    for c in chunks:
        assert words(embedding_text("Pump manual", c.section_title, c.content)) <= window
        assert c.token_count == words(c.content)


_RICH_PIECE = st.one_of(
    _PIECE,
    st.sampled_from(["é", "🎉", "泵的冷却", "ISO-9001", "0.35mm", "/", "-", "(x)", "—"]),
    st.text(alphabet="abc/.", min_size=50, max_size=800),  # punctuated runs
)


@hsettings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_RICH_PIECE, max_size=300).map("".join).map(normalize_text),
    st.integers(40, 160),
)
def test_tokenizer_sized_chunks_fit_their_window(text: str, window: int) -> None:
    """The same with the real tokenizer's offsets, over unicode, emoji and long runs."""
    counter = packaged_token_counter()
    assert counter is not None
    chunks = chunk(text, counter, window=window)
    if not text.strip():
        assert chunks == []
        return
    check_chunks(text, chunks, "Pump manual")
    for c, n in zip(chunks, embedded_tokens(counter, "Pump manual", chunks), strict=True):
        header = counter(context_header("Pump manual", c.section_title)) or 0
        if header + _TOKEN_MARGIN + window // 4 > window:
            # A header that takes over three quarters of the window leaves the content a
            # quarter (a 60-character heading of "xx" pieces, a 40-token window).
            assert c.token_count is not None and c.token_count <= window // 4
        else:
            assert n + SPECIAL_TOKENS <= window


# -- settings and the indexer ---------------------------------------------------------------


class WindowedEmbedder(HashEmbedder):
    """A test double with all-MiniLM-L6-v2's window."""

    max_tokens = MINILM_WINDOW


def test_the_facade_embeds_chunks_that_fit_the_window(db_path: Path, counter: TokenCounter) -> None:
    embedder = WindowedEmbedder()
    with Tether(db=db_path, embedder=embedder, count_tokens=counter) as t:
        [result] = t.add(text=LONG_PARAGRAPHS, title="Pump manual", document_id="pump")
        assert result.chunk_count > 1
        assert t.get_document("pump").chunking == "256/auto tokens"
    tokens = counter.count_many(embedder.embedded_texts)
    assert max(n or 0 for n in tokens) + SPECIAL_TOKENS <= MINILM_WINDOW


@pytest.mark.parametrize(
    ("embedder", "rag", "chunking"),
    [
        (WindowedEmbedder(), {}, "256/auto tokens"),
        (WindowedEmbedder(), {"chunk_tokens": 128, "chunk_overlap_tokens": 16}, "128/16 tokens"),
        (WindowedEmbedder(), {"chunk_tokens": 4096}, "256/auto tokens"),  # the window caps
        (WindowedEmbedder(), {"chunk_by": "chars"}, "1200/150"),
        (HashEmbedder(), {}, "1200/150"),  # no window: characters
        # Embeddings off: sized for the configured model all the same (MiniLM, packaged),
        # so that turning embeddings off or on does not chunk a store again.
        (None, {}, "256/auto tokens"),
        (None, {"embeddings": {"model_path": "/nowhere"}}, "1200/150"),  # no model: chars
    ],
)
def test_the_recorded_chunking_says_how_chunks_were_sized(
    db_path: Path, embedder: HashEmbedder | None, rag: dict[str, object], chunking: str
) -> None:
    with Tether(db=db_path, settings=Settings.load(rag=rag), embedder=embedder) as t:
        t.add(text="Reset the sensor with the pin.", title="Guide", document_id="guide")
        assert t.get_document("guide").chunking == chunking


def test_turning_embeddings_off_keeps_the_chunks(db_path: Path) -> None:
    """Lexical-only (``tether eval --lexical-only`` on a store a hybrid run filled) reads
    the same chunks: nothing is chunked again, and no vector is lost."""
    with Tether(db=db_path, embedder=WindowedEmbedder()) as t:
        t.add(text=LONG_PARAGRAPHS, title="Pump manual", document_id="pump")
        vectors = t.store.counts()["rag_embeddings"]
        assert vectors > 1
    off = Settings.load(rag={"embeddings": {"enabled": False}})
    with Tether(db=db_path, settings=off) as t:
        assert t.embedder is None
        [again] = t.add(text=LONG_PARAGRAPHS, title="Pump manual", document_id="pump")
        assert again.status == "skipped"
        assert t.get_document("pump").chunking == "256/auto tokens"
        assert t.store.counts()["rag_embeddings"] == vectors


def test_a_store_chunked_by_characters_is_chunked_again_in_tokens(db_path: Path) -> None:
    with Tether(db=db_path, embedder=HashEmbedder()) as t:
        [first] = t.add(text=LONG_PARAGRAPHS, title="Pump manual", document_id="pump")
        assert (
            t.add(text=LONG_PARAGRAPHS, title="Pump manual", document_id="pump")[0].status
            == "skipped"
        )
    with Tether(db=db_path, embedder=WindowedEmbedder()) as t:
        [again] = t.add(text=LONG_PARAGRAPHS, title="Pump manual", document_id="pump")
        assert (first.status, again.status) == ("indexed", "replaced")
        assert t.get_document("pump").chunking == "256/auto tokens"
        [same] = t.add(text=LONG_PARAGRAPHS, title="Pump manual", document_id="pump")
        assert same.status == "skipped"


@pytest.mark.parametrize(
    ("rag", "key"),
    [
        ({"chunk_by": "words"}, "chunk_by"),
        ({"chunk_tokens": 8}, "chunk_tokens"),
        ({"chunk_tokens": 100, "chunk_overlap_tokens": 60}, "chunk_overlap_tokens"),
        ({"chunk_overlap_tokens": -1}, "chunk_overlap_tokens"),
    ],
)
def test_chunk_token_settings_are_validated(rag: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigurationError, match=key):
        Settings.load(rag=rag)


@pytest.mark.parametrize(
    ("title", "section", "header"),
    [
        # A PDF manual's outline path names no document: the manual's name goes first.
        (
            "libtasn1",
            "4 Library Functions > 4.2 Parsing",
            "libtasn1 > 4 Library Functions > 4.2 Parsing",
        ),
        # An HTML page's path begins with its first heading, which its title holds.
        (
            "Blueprints — Flask Documentation (2.2.x)",
            "Blueprints > My First Blueprint",
            "Blueprints > My First Blueprint",
        ),
        ("docker", "Docker > Description", "Docker > Description"),  # case aside
        ("Notes", None, "Notes"),
        (None, "Install > Linux", "Install > Linux"),
        (None, None, None),
    ],
)
def test_the_context_header_names_the_document_then_the_section(
    title: str | None, section: str | None, header: str | None
) -> None:
    assert context_header(title, section) == header
    if header:
        assert embedding_text(title, section, "Body text.") == f"{header}\n\nBody text."
        assert embedding_text(title, section, f"{header} opens it.") == f"{header} opens it."


@pytest.mark.parametrize(
    ("title", "section", "under"),
    [
        # A guide's H1 is its title: a citation says the title once, then the rest.
        (
            "Lumen S2 Field Sensor: User Guide",
            "Lumen S2 Field Sensor: User Guide > Troubleshooting > Battery drains quickly",
            "Troubleshooting > Battery drains quickly",
        ),
        ("Blueprints — Flask Documentation (2.2.x)", "Blueprints > Nesting", "Nesting"),
        ("Handbook", "Handbook", None),  # nothing but the title
        ("docker", "Docker > Description", "Description"),  # case aside
        # A PDF outline names no document: all of it is the section.
        ("libtasn1", "4 Library Functions > 4.2 Parsing", "4 Library Functions > 4.2 Parsing"),
        ("Notes", None, None),
        (None, "Install > Linux", "Install > Linux"),
    ],
)
def test_a_section_path_under_its_title_does_not_repeat_it(
    title: str | None, section: str | None, under: str | None
) -> None:
    assert section_under_title(title, section) == under


def test_spans_are_cut_outside_fenced_code_when_the_window_allows() -> None:
    code = "```\ndef get_db():\n    return g.db\n\n\ndef close_db(e=None):\n    g.pop('db')\n```"
    prose = "The connection is stored on g and reused within one request. " * 4
    text = f"{prose}\n\nflaskr/db.py\n\n{code}\n\n{prose}\n\n{prose}"
    fence_open = text.index("```")
    fence_close = text.index("```", fence_open + 3) + 3
    spans = list(split_span(text, 0, len(text), 420, 60))
    assert len(spans) > 2
    for start, end in spans:
        assert not fence_open < end < fence_close, "a chunk ends inside the code"
        assert not fence_open < start < fence_close, "a chunk starts inside the code"
    assert any(text[s:e].count("```") == 2 for s, e in spans)  # the code block whole


def test_code_longer_than_a_chunk_is_still_cut() -> None:
    code = "```\n" + "\n\n".join(f"line_{i} = {i}" for i in range(200)) + "\n```"
    text = f"Intro sentence.\n\n{code}\n\nOutro."
    spans = list(split_span(text, 0, len(text), 300, 40))
    assert all(e - s <= 300 for s, e in spans)
    assert "".join(text[s:e] for s, e in spans).count("line_199") >= 1


def test_a_cut_inside_code_gives_way_to_one_before_the_code() -> None:
    # The window's last blank lines are inside the function: the cut goes before it.
    prose = "The first sentence is here. " * 6
    code = "```\n" + "def first():\n    return 1\n\n\ndef second():\n    return 2\n\n\n" * 8 + "```"
    text = f"{prose}\n\n{code}\n\nAfter the code."
    fence_open = text.index("```")
    start, end = next(iter(split_span(text, 0, len(text), 420, 60)))
    assert end <= fence_open, repr(text[start:end][-40:])


def test_each_chunk_ends_past_the_one_before_it() -> None:
    """Before a code block longer than a chunk, the chunk after the introduction starts in
    its overlap: it ends inside the code, not again where the introduction's chunk ended
    (each such chunk started a word later, nine of them on Flask's "Static Files" page)."""
    intro = "The views work, but they look plain. Copy the following into the file: " * 5
    code = "```\n" + "\n".join(f".rule-{i} {{ padding: {i}px; }}" for i in range(120)) + "\n```"
    text = f"{intro}\n\nflaskr/static/style.css\n\n{code}\n\nReload the page."
    for size, overlap in ((420, 60), (420, 150), (300, 140)):
        spans = list(split_span(text, 0, len(text), size, overlap))
        ends = [end for _, end in spans]
        assert ends == sorted(set(ends)), ends
        assert len(spans) <= len(text) // (size - overlap) + 2


def test_prose_chunks_end_past_the_one_before_them() -> None:
    # The window's second half holds no sentence end; its first half's ends lie inside
    # the previous chunk's overlap.
    text = " ".join(["Short one."] * 5 + ["word"] * 400)
    spans = list(split_span(text, 0, len(text), 300, 140))
    ends = [end for _, end in spans]
    assert ends == sorted(set(ends)), ends


def test_a_fence_line_with_an_info_string_never_closes_a_block() -> None:
    text = "```\ncode\n```python\nmore code\n```\n\n" + "Prose sentence here. " * 40
    fence_close = text.index("```\n\n") + 3
    spans = list(split_span(text, 0, len(text), 200, 60))
    assert all(not 0 < start < fence_close for start, _ in spans)
    # The prose after the block is not code: its chunks overlap as prose chunks do.
    assert all(s2 < e1 for (_, e1), (s2, _) in pairwise(spans[1:]))
