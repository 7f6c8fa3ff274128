"""Ingestion: loaders (Markdown, text, PDF, HTML), chunking, hash skip/replace, sessions.

Everything runs on real files in tmp_path, real PDFs made with fpdf2 and a real SQLite file.
"""

from __future__ import annotations

import random
import re
import textwrap
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from helpers import EXAMPLES, make_pdf, make_settings
from tether import (
    EmptyDocument,
    IndexingFailed,
    IngestError,
    InvalidArgument,
    Settings,
    Tether,
    TextSource,
    UnreadableFile,
    UnsupportedFileType,
)
from tether.ingest import (
    LoadedDocument,
    Section,
    chunk_sections,
    content_hash,
    embedding_text,
    load_path,
    load_text,
    markdown_sections,
    normalize_text,
    split_span,
    supported_extensions,
)

PROPERTY = hsettings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def write(path: Path, content: str | bytes) -> Path:
    """Write exactly these bytes (no newline translation)."""
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def titled_sections(doc: LoadedDocument) -> list[tuple[str | None, str]]:
    return [(s.title, doc.text[s.start : s.end]) for s in doc.sections]


def section_titles(doc: LoadedDocument) -> list[str | None]:
    return [s.title for s in doc.sections]


def search_texts(t: Tether, query: str, **scope: str) -> list[str]:
    return [hit.text for hit in t.search(query, scope=scope.pop("scope", "global"), **scope)]


# -- Markdown -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "title"),
    [
        ("# Lumen Guide\n\nIntro text.\n", "Lumen Guide"),
        ("Preface line.\n\n## Sub\n\nText.\n\n# Late Title\n\nMore.\n", "Late Title"),
        ("# Closed Heading ##\n\nBody.\n", "Closed Heading"),
        ("# C#\n\nA language.\n", "C#"),
        ("   # Indented Title\n\nBody.\n", "Indented Title"),
        ("Setext Title\n============\n\nBody.\n", "Setext Title"),
        ("```sh\n# install deps\npip install x\n```\n\n# Real Title\n\nBody.\n", "Real Title"),
        ("~~~\n# not a title\n~~~\n\nNo heading outside the fence.\n", "notes"),
        ("## Only a Subheading\n\nBody.\n", "notes"),
        ("No headings at all.\n", "notes"),
        ("#Hashtag is not a heading\n\nBody.\n", "notes"),
        (
            "---\ntitle: Front Matter Title\nauthor: Ann\n---\n# Heading\n\nBody.\n",
            "Front Matter Title",
        ),
        ('---\ntitle: "Quoted Title"\n---\n\nBody.\n', "Quoted Title"),
        ("---\ntitle: 'Single Quoted'\n---\n\nBody.\n", "Single Quoted"),
        ("---\nauthor: Ann\n---\n# From The Heading\n\nBody.\n", "From The Heading"),
        ("---\n---\n# After Empty Front Matter\n\nBody.\n", "After Empty Front Matter"),
    ],
)
def test_markdown_title(tmp_path: Path, markdown: str, title: str) -> None:
    doc = load_path(write(tmp_path / "notes.md", markdown))
    assert doc.title == title
    assert doc.mime == "text/markdown"


@pytest.mark.parametrize(
    "front_matter",
    [
        "---\ntitle: Front\nauthor: Ann Example\n---\n",
        "---\nauthor: Ann Example\ntags: [a, b]\n---\n\n",
    ],
)
def test_front_matter_is_not_part_of_the_text(tmp_path: Path, front_matter: str) -> None:
    doc = load_path(write(tmp_path / "fm.md", front_matter + "# Heading\n\nThe body.\n"))
    assert "Ann Example" not in doc.text
    assert doc.text == "# Heading\n\nThe body."
    assert section_titles(doc) == ["Heading"]


GUIDE_MD = """\
# Guide

Intro paragraph.

## Install

Get the package.

### Linux

Use apt on Linux.

### macOS

Use brew on macOS.

## Usage

Run the tool.
"""


@pytest.mark.parametrize("extension", [".md", ".markdown", ".MD"])
def test_markdown_sections_have_header_paths(tmp_path: Path, extension: str) -> None:
    doc = load_path(write(tmp_path / f"guide{extension}", GUIDE_MD))
    assert titled_sections(doc) == [
        ("Guide", "# Guide\n\nIntro paragraph.\n\n"),
        ("Guide > Install", "## Install\n\nGet the package.\n\n"),
        ("Guide > Install > Linux", "### Linux\n\nUse apt on Linux.\n\n"),
        ("Guide > Install > macOS", "### macOS\n\nUse brew on macOS.\n\n"),
        ("Guide > Usage", "## Usage\n\nRun the tool."),
    ]


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        (
            "Guide\n=====\n\nIntro.\n\nInstall\n-------\n\nGet it.\n",
            [("Guide", "Intro."), ("Guide > Install", "Get it.")],
        ),
        (
            "Guide\n=====\n\nIntro.\n\n### Deep\n\nDeep text.\n\nNext\n----\n\nNext text.\n",
            [("Guide", "Intro."), ("Guide > Deep", "Deep text."), ("Guide > Next", "Next text.")],
        ),
        (
            "Preamble text.\n\n# Guide\n\nIntro.\n",
            [(None, "Preamble text."), ("Guide", "Intro.")],
        ),
        (
            "# A\n\nText a.\n\n#### Deep\n\nText d.\n\n## B\n\nText b.\n\n# C\n\nText c.\n",
            [("A", "Text a."), ("A > Deep", "Text d."), ("A > B", "Text b."), ("C", "Text c.")],
        ),
        (
            "# Title with closing hashes ###\n\nBody.\n",
            [("Title with closing hashes", "Body.")],
        ),
        (
            "A paragraph line\n\n---\n\nAfter a thematic break.\n",
            [(None, "After a thematic break.")],
        ),
    ],
)
def test_markdown_sections_atx_and_setext(
    markdown: str, expected: list[tuple[str | None, str]]
) -> None:
    doc = load_text(markdown, title="t", mime="text/markdown")
    sections = titled_sections(doc)
    assert [title for title, _ in sections] == [title for title, _ in expected]
    for (_, text), (_, body) in zip(sections, expected, strict=True):
        assert body in text


@pytest.mark.parametrize(
    ("opener", "closer"),
    [("```", "```"), ("~~~", "~~~"), ("```python", "```"), ("  ~~~", "~~~"), ("````", "````")],
)
def test_headings_inside_fenced_code_are_not_headings(opener: str, closer: str) -> None:
    markdown = (
        "# Guide\n\nIntro.\n\n"
        f"{opener}\n# not a heading\n## nor this\nSetext inside code\n---\nmore code\n"
        f"{closer}\n\nAfter the code.\n\n## Next\n\nNext body.\n"
    )
    doc = load_text(markdown, title="t", mime="text/markdown")
    assert section_titles(doc) == ["Guide", "Guide > Next"]
    guide = titled_sections(doc)[0][1]
    assert "# not a heading" in guide
    assert "After the code." in guide


def test_a_fence_of_the_other_kind_does_not_close_the_fence() -> None:
    markdown = "# Guide\n\n```\n~~~\n# still code\n~~~\n```\n\nAfter.\n\n## Next\n\nBody.\n"
    doc = load_text(markdown, title="t", mime="text/markdown")
    assert section_titles(doc) == ["Guide", "Guide > Next"]


def test_an_underline_after_a_closing_fence_is_not_a_setext_heading() -> None:
    markdown = "# Guide\n\n```\ncode\n```\n---\n\nMore text.\n"
    doc = load_text(markdown, title="t", mime="text/markdown")
    assert section_titles(doc) == ["Guide"]


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("# Guide\n## Install\n### Linux\n\nRun it.\n", [("Guide > Install > Linux", "Run it.")]),
        (
            "# Guide\n\n## Install\n\n### Linux\n\nRun it.\n",
            [("Guide > Install > Linux", "Run it.")],
        ),
        (
            "Guide\n=====\nInstall\n-------\n\nRun it.\n",
            [("Guide > Install", "Run it.")],
        ),
        (
            "Guide\n=====\n\n## Install\n\nRun it.\n\n## Use\n\nUse it.\n",
            [("Guide > Install", "Run it."), ("Guide > Use", "Use it.")],
        ),
        (
            "# Guide\n\nIntro.\n\n## Install\n\n### Linux\n\nApt.\n\n## Use\n\nUse it.\n",
            [("Guide", "Intro."), ("Guide > Install > Linux", "Apt."), ("Guide > Use", "Use it.")],
        ),
    ],
)
def test_heading_without_body_is_folded_into_the_next_section(
    markdown: str, expected: list[tuple[str, str]]
) -> None:
    doc = load_text(markdown, title="t", mime="text/markdown")
    sections = titled_sections(doc)
    assert [title for title, _ in sections] == [title for title, _ in expected]
    for (_, text), (_, body) in zip(sections, expected, strict=True):
        assert body in text
    # The folded headings are kept (nothing lost), in the section that has the body.
    assert "".join(text for _, text in sections).split() == doc.text.split()
    chunks = chunk_sections(doc.text, list(doc.sections), size=1200, overlap=0)
    assert len(chunks) == len(expected)
    for chunk, (_, body) in zip(chunks, expected, strict=True):
        assert body in chunk.content


# -- plain text ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["support-faq.txt", "notes.text", "README.TXT"])
def test_plain_text_is_one_section_titled_by_the_stem(tmp_path: Path, name: str) -> None:
    raw = "First line.\n\n# Not a heading in plain text\n\nLast line."
    doc = load_path(write(tmp_path / name, raw))
    assert doc.title == Path(name).stem
    assert doc.mime == "text/plain"
    assert doc.text == raw
    assert doc.sections == (Section(0, len(raw)),)
    assert doc.file_size == len(raw)


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (
            b"Line one  \r\nLine two\t\r\n\r\n\r\n\r\nLine three\r\n",
            "Line one\nLine two\n\nLine three",
        ),
        (b"Old Mac\rline endings\r", "Old Mac\nline endings"),
        (b"\n\n\nLeading and trailing blank lines\n\n\n", "Leading and trailing blank lines"),
        (b"\xef\xbb\xbfUTF-8 with a BOM\n", "UTF-8 with a BOM"),
        (b"caf\xe9 in Windows-1252\n", "café in Windows-1252"),
        ("caf\u0065\u0301 decomposed\n".encode(), "café decomposed"),
        (b"zero\xe2\x80\x8bwidth and \x07bell\n", "zerowidth and bell"),
    ],
)
def test_plain_text_is_normalized(tmp_path: Path, raw: bytes, text: str) -> None:
    doc = load_path(write(tmp_path / "doc.txt", raw))
    assert doc.text == text
    assert doc.sections == (Section(0, len(text)),)


def test_a_text_files_underlined_headings_are_its_sections(tmp_path: Path) -> None:
    """A plain-text document's underlined headings (``====``, ``----``, as READMEs and
    release notes write them; an overline too) are its sections, ranked by the order
    their characters first appear. A table's dashed header row, a paragraph's last line
    over a rule and source code are no headings."""
    text = (
        "Read me first.\n\nINSTALL\n=======\n\nRun the installer.\n\nOn Linux\n--------\n\n"
        "Use the package.\n\nName    Value\n----    -----\nport    8080\n\n"
        "A paragraph that ends\nwith a line over a rule\n-----------------------\n\n"
        "=======\nCHANGES\n=======\n\nAll of them.\n"
    )
    doc = load_path(write(tmp_path / "README.txt", text))
    assert section_titles(doc) == [None, "INSTALL", "INSTALL > On Linux", "CHANGES"]
    assert doc.text.startswith("Read me first.")  # the text is as written
    code = load_path(write(tmp_path / "setup.py", "# Title\n# =====\nx = 1\n"))
    assert section_titles(code) == [None]


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("a\r\nb", "a\nb"),
        ("a\rb", "a\nb"),
        ("a  \nb\t", "a\nb"),
        ("a\u00a0\nb", "a\nb"),
        ("a\n\n\n\nb", "a\n\nb"),
        ("\n\na\n\n", "a"),
        ("  indented first line", "  indented first line"),
        ("a\u200bb\ufeff", "ab"),
        ("e\u0301", "\u00e9"),
        ("a\x00b\x1fc", "abc"),
        ("tab\tinside", "tab\tinside"),
        ("   \n\t\n", ""),
        ("a \ufb01le, brie\ufb02y, o\ufb03ce, e\ufb00ect", "a file, briefly, office, effect"),
    ],
)
def test_normalize_text_examples(raw: str, normalized: str) -> None:
    assert normalize_text(raw) == normalized


@PROPERTY
@given(st.text(alphabet=st.sampled_from(list("ab \t\r\n\u00a0\u200b\x00é\ufb01")), max_size=60))
def test_normalize_text_is_idempotent_and_canonical(raw: str) -> None:
    text = normalize_text(raw)
    assert normalize_text(text) == text
    assert "\r" not in text and "\n\n\n" not in text and "\x00" not in text
    assert all(line == line.rstrip(" \t\u00a0") for line in text.split("\n"))
    assert text == text.strip("\n").rstrip()
    # Line-ending style and trailing spaces do not change the hash.
    assert normalize_text(text.replace("\n", "\r\n")) == text
    assert normalize_text(text.replace("\n", " \t\n") + "  ") == text


# -- PDF ----------------------------------------------------------------------------------

PAGE_WORDS = ["alpha", "bravo", "charlie"]


def page_text(word: str, sentences: int = 3) -> str:
    return " ".join(f"Sentence {i} of the {word} page mentions {word}." for i in range(sentences))


@pytest.mark.parametrize(
    ("meta_title", "title"), [("Warranty Booklet", "Warranty Booklet"), (None, "booklet")]
)
def test_pdf_has_one_section_per_page(tmp_path: Path, meta_title: str | None, title: str) -> None:
    pdf = make_pdf(tmp_path / "booklet.pdf", [page_text(w) for w in PAGE_WORDS], title=meta_title)
    doc = load_path(pdf)
    assert doc.title == title
    assert doc.mime == "application/pdf"
    assert [s.page for s in doc.sections] == [1, 2, 3]
    for section, word in zip(doc.sections, PAGE_WORDS, strict=True):
        page = doc.text[section.start : section.end]
        assert page.startswith(f"Sentence 0 of the {word} page")
        assert page.endswith(f"mentions {word}.")
        words = set(re.findall(r"[a-z]+", page))
        assert word in words
        assert not words & (set(PAGE_WORDS) - {word})
    assert doc.file_size == pdf.stat().st_size


@pytest.mark.parametrize("chunk_size", [150, 1200])
def test_every_stored_pdf_chunk_has_its_page(tmp_path: Path, chunk_size: int) -> None:
    pdf = make_pdf(tmp_path / "manual.pdf", [page_text(w, 6) for w in PAGE_WORDS])
    settings = Settings.load(
        rag={"chunk_by": "chars", "chunk_size": chunk_size, "chunk_overlap": 30}
    )
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        [result] = t.add(pdf)
        chunks = t.chunks(result.document_id)
        assert {c.page for c in chunks} == {1, 2, 3}
        text = load_path(pdf).text
        assert all(c.content == text[c.char_start : c.char_end] for c in chunks)
        if chunk_size == 150:
            assert len(chunks) > 3
        for chunk in chunks:
            page_words = set(re.findall(r"[a-z]+", chunk.content)) & set(PAGE_WORDS)
            assert page_words == {PAGE_WORDS[chunk.page - 1]}
        assert [c.ordinal for c in chunks] == list(range(len(chunks)))
        for page, word in enumerate(PAGE_WORDS, start=1):
            hits = t.search(word, scope="global")
            assert hits
            assert {hit.page for hit in hits} == {page}


@pytest.mark.parametrize("empty_page", [0, 1, 2])
def test_pdf_page_without_text_is_skipped_keeping_page_numbers(
    tether: Tether, tmp_path: Path, empty_page: int
) -> None:
    pages = [page_text(w) for w in PAGE_WORDS]
    pages[empty_page] = ""
    kept = [n for n in (1, 2, 3) if n != empty_page + 1]
    pdf = make_pdf(tmp_path / "gappy.pdf", pages)
    doc = load_path(pdf)
    assert [s.page for s in doc.sections] == kept
    for section in doc.sections:
        word = PAGE_WORDS[section.page - 1]
        assert doc.text[section.start : section.end].startswith(f"Sentence 0 of the {word}")
        assert doc.text[section.start : section.end].endswith(f"mentions {word}.")

    [result] = tether.add(pdf)
    assert {c.page for c in tether.chunks(result.document_id)} == set(kept)
    for page in kept:
        word = PAGE_WORDS[page - 1]
        assert [hit.page for hit in tether.search(word, scope="global")] == [page]
    assert tether.search(PAGE_WORDS[empty_page], scope="global") == []


@pytest.mark.parametrize("pages", [[""], ["", "", ""]])
def test_pdf_without_any_text_is_an_empty_document(
    tether: Tether, tmp_path: Path, pages: list[str]
) -> None:
    pdf = make_pdf(tmp_path / "scan.pdf", pages)
    with pytest.raises(EmptyDocument) as excinfo:
        load_path(pdf)
    assert excinfo.value.source == str(pdf)
    [result] = tether.add(pdf, on_error="collect")
    assert result.status == "failed"
    assert isinstance(result.error, EmptyDocument)
    assert tether.documents() == []


def _random_bytes(pdf: bytes) -> bytes:
    return random.Random(7).randbytes(4096)


def _truncated(pdf: bytes) -> bytes:
    return pdf[: len(pdf) // 2]


def _header_only(pdf: bytes) -> bytes:
    return b"%PDF-1.4\n"


def _unknown_filter(pdf: bytes) -> bytes:
    # Same length, so the cross-reference table stays valid: only the stream filter is bad.
    assert b"/FlateDecode" in pdf
    return pdf.replace(b"/FlateDecode", b"/FlateDecodX")


@pytest.mark.parametrize("corrupt", [_random_bytes, _truncated, _header_only, _unknown_filter])
def test_corrupt_pdf_is_unreadable(
    tether: Tether, tmp_path: Path, corrupt: Callable[[bytes], bytes]
) -> None:
    good = make_pdf(tmp_path / "good.pdf", [page_text(w) for w in PAGE_WORDS])
    bad = write(tmp_path / "broken.pdf", corrupt(good.read_bytes()))
    with pytest.raises(UnreadableFile) as excinfo:
        load_path(bad)
    assert excinfo.value.source == str(bad)
    assert str(bad) in str(excinfo.value)
    # In a batch the broken PDF fails alone.
    results = tether.add([bad, good], on_error="collect")
    assert [r.status for r in results] == ["failed", "indexed"]
    assert isinstance(results[0].error, UnreadableFile)


# -- HTML ---------------------------------------------------------------------------------

PAGE_HTML = """<!DOCTYPE html>
<html><head>
  <title>Data &amp; Export   Guide</title>
  <style>.x { color: red } /* STYLE-SECRET */</style>
  <script>var SCRIPT_SECRET = "<p>not text</p>";</script>
</head>
<body>
  <noscript>NOSCRIPT-SECRET <ul><li>enable javascript</li></ul></noscript>
  <h1>Exporting</h1>
  <p>Intro about R&amp;D &lt;data&gt; exports &mdash; at 20&deg;C.</p>
  <h2>Export <code>CSV</code> files</h2>
  <p>CSV body text.</p>
  <h3>Delimiters</h3>
  <p>Semicolon body.</p>
  <h2>Export <em>JSON</em></h2>
  <p>JSON body.</p>
</body></html>
"""


@pytest.mark.parametrize("extension", [".html", ".htm", ".xhtml"])
def test_html_page(tmp_path: Path, extension: str) -> None:
    doc = load_path(write(tmp_path / f"page{extension}", PAGE_HTML))
    assert doc.title == "Data & Export Guide"
    assert doc.mime == "text/html"
    for secret in ("STYLE-SECRET", "SCRIPT_SECRET", "not text", "NOSCRIPT", "javascript"):
        assert secret not in doc.text
    assert "R&D <data> exports — at 20°C." in doc.text
    assert "&amp;" not in doc.text and "&lt;" not in doc.text
    assert titled_sections(doc) == [
        ("Exporting", "# Exporting\n\nIntro about R&D <data> exports — at 20°C.\n\n"),
        ("Exporting > Export CSV files", "## Export CSV files\n\nCSV body text.\n\n"),
        ("Exporting > Export CSV files > Delimiters", "### Delimiters\n\nSemicolon body.\n\n"),
        ("Exporting > Export JSON", "## Export JSON\n\nJSON body."),
    ]


@pytest.mark.parametrize(
    ("markup", "title"),
    [
        ("<h1>Main Heading</h1><p>Body.</p>", "Main Heading"),
        ("<h2>Sub only</h2><p>Body.</p>", "page"),
        ("<p>No headings.</p>", "page"),
        ("<title>  Spaced \n Title </title><p>Body.</p>", "Spaced Title"),
        ("<title>Use &amp;lt;b&amp;gt; tags</title><p>Body.</p>", "Use &lt;b&gt; tags"),
        (
            "<head><title>Real Title</title></head>"
            "<body><svg><title>Close icon</title></svg><p>Body.</p></body>",
            "Real Title",
        ),
        ("<body><svg><title>Icon</title></svg><h1>Heading</h1><p>Body.</p></body>", "Heading"),
        ("<pre># shell comment</pre><p>Body.</p>", "page"),
    ],
)
def test_html_title(tmp_path: Path, markup: str, title: str) -> None:
    doc = load_path(write(tmp_path / "page.html", markup))
    assert doc.title == title


@pytest.mark.parametrize(
    ("markup", "titles"),
    [
        (
            "<h1>Guide</h1><p>Intro.</p><h2>Install</h2><p>Run:</p>"
            "<pre># install the deps\npip install tether\n## also not a heading</pre>"
            "<p>Then continue.</p><h2>Use</h2><p>Use it.</p>",
            ["Guide", "Guide > Install", "Guide > Use"],
        ),
        (
            "<h1>Guide</h1><p># of items is not a heading</p><p>Total<br>-----</p>",
            ["Guide"],
        ),
        ("<h1>Guide</h1><p>```</p><h2>Real</h2><p>Body.</p>", ["Guide", "Guide > Real"]),
        (
            "<h1>Guide</h1><p>Intro.</p><h2>Install<br>now</h2><p>Body.</p>",
            ["Guide", "Guide > Install now"],
        ),
        ("<h1>Guide</h1><p>Intro.</p><h2>  </h2><h2></h2><p>Body.</p>", ["Guide"]),
        ("<h1>Guide</h1><h2>Setup</h2><h3>Linux</h3><p>Apt.</p>", ["Guide > Setup > Linux"]),
        (
            "<h1>A</h1><p>a</p><h4>Deep</h4><p>d</p><h2>B</h2><p>b</p>",
            ["A", "A > Deep", "A > B"],
        ),
        (
            "<h2>\n   Export\n   <code>CSV</code>\n   files\n</h2><p>Body.</p>",
            ["Export CSV files"],
        ),
    ],
)
def test_html_sections_follow_the_html_headings(
    tmp_path: Path, markup: str, titles: list[str]
) -> None:
    doc = load_path(write(tmp_path / "page.html", markup))
    assert section_titles(doc) == titles
    assert "##\n" not in doc.text + "\n"  # no empty heading line
    assert not any(line.strip() in {"-", "#"} for line in doc.text.split("\n"))


def test_html_sections_keep_the_text_after_code_in_its_section(tmp_path: Path) -> None:
    markup = (
        "<h1>Guide</h1><h2>Install</h2><p>Run:</p><pre># install deps\npip install x</pre>"
        "<p>Then continue.</p>"
    )
    doc = load_path(write(tmp_path / "page.html", markup))
    [(title, text)] = titled_sections(doc)
    assert title == "Guide > Install"
    assert "# install deps" in text and "Then continue." in text


SITE_PAGE = """<!DOCTYPE html><html><head><title>Backups - Acme Docs</title></head><body>
<a class="skip-link" href="#content">Skip to content</a>
<div class="cookie-banner">We use cookies to improve your experience. Accept all</div>
<header><div class="logo">Acme Docs</div><nav><ul><li>Home<li>Guides<li>API</ul></nav></header>
<div class="breadcrumbs">Acme Docs › Guides › Backups</div>
<div class="wrapper"><div class="sidebar"><h3>On this page</h3><ul><li>Snapshots</li></ul></div>
<main id="content"><h1>Backups<a class="headerlink" href="#b">¶</a></h1>
<p>Snapshots are kept for 30 days.</p>
<section id="cookies"><h2>Cookies and sessions</h2><p>Session cookies are not backed up.</p>
<pre>acme backup --keep 30
  --quiet</pre></section>
<div class="related-pages">Next: Restores</div>
</main></div>
<footer><p>© 2026 Acme. Built with a generator.</p></footer>
<div id="footer">Last updated 2026-11-01 by the site generator</div></body></html>
"""


@pytest.mark.parametrize("landmark", ['<main id="content">', '<div role="main">', None])
def test_html_keeps_the_main_content_only(tmp_path: Path, landmark: str | None) -> None:
    """Menus, breadcrumbs, banners, sidebars, cookie notes and footers are not content;
    headings stay section titles and code blocks stay whole, with or without a main
    landmark (then by the page's other landmarks and class names)."""
    markup = SITE_PAGE
    if landmark != '<main id="content">':
        markup = markup.replace('<main id="content">', landmark or "<div>")
        markup = markup.replace("</main>", "</div>")
    doc = load_path(write(tmp_path / "page.html", markup))
    for boilerplate in ("Skip to content", "We use cookies", "Home", "Guides ›", "On this page",
                        "Next: Restores", "© 2026", "¶", "Last updated"):  # fmt: skip
        assert boilerplate not in doc.text, boilerplate
    # Without any main landmark the page-level <header> goes too: it holds no heading,
    # only the site's name (simple pages that keep their <h1> there keep it: below).
    assert doc.text.startswith("# Backups\n")
    assert "Session cookies are not backed up." in doc.text  # a section whose id says cookies
    assert "acme backup --keep 30\n  --quiet" in doc.text
    assert section_titles(doc) == ["Backups", "Backups > Cookies and sessions"]


def test_markdown_html_comments_are_not_text(tmp_path: Path) -> None:
    markup = (
        "# Guide\n\n<!-- This file is generated: edit the other repository.\n"
        "Pull requests here are overwritten. -->\nVisible text.\n\n"
        "```html\n<!-- a comment in code stays -->\n```\n"
    )
    doc = load_path(write(tmp_path / "guide.md", markup))
    assert "generated" not in doc.text and "overwritten" not in doc.text
    assert "Visible text." in doc.text
    assert "<!-- a comment in code stays -->" in doc.text


def test_markdown_site_generator_markup_is_read_as_a_reader_sees_it(tmp_path: Path) -> None:
    """Heading ids, attribute lists, Liquid's raw and include tags, Hugo's shortcodes, MDX
    imports and components and admonitions are the site generator's, never shown as
    written: they leave the section titles and the text, and a tab's label, an
    admonition's kind and title and the text inside stay. In code nothing changes."""
    markup = (
        "import Tabs from '@theme/Tabs';\n\n# Install the widget {#install}\n\n"
        "Read this first.{: .lead}\n\n"
        "## On Linux {#linux .tab}\n\n"
        '{{< tabs >}}\n{{< tab name="Debian" >}}\nRun `apt install widget`.\n{{< /tab >}}\n'
        '{{< /tabs >}}\n\n<Tabs>\n<TabItem value="arch" label="Arch Linux">\n\n'
        "Run pacman.\n\n</TabItem>\n</Tabs>\n\n"
        '!!! warning "Root needed"\n    Every command runs as root.\n\n'
        ":::tip[Faster]\nPass `--yes`.\n:::\n\n> [!NOTE]\n> Logs go to the journal.\n\n"
        '/// info | Offline\nNo network is needed.\n///\n\n--8<-- "includes/abbreviations.md"\n\n'
        '[journal]: https://example.org/journal "The journal"\n[^1]: A footnote stays.\n\n'
        "The format is {% raw %}{{ .Name }}{% endraw %}.\n"
        "{% include links.html %}\n\n"
        "```md\n## Kept {#kept}\n{{< tabs >}}\n!!! note\n```\n"
    )
    doc = load_path(write(tmp_path / "install.md", markup))
    assert section_titles(doc) == ["Install the widget", "Install the widget > On Linux"]
    assert doc.title == "Install the widget"
    assert doc.text == (
        "# Install the widget\n\nRead this first.\n\n## On Linux\n\nDebian\n"
        "Run `apt install widget`.\n\nArch Linux\n\nRun pacman.\n\n"
        "Warning: Root needed\nEvery command runs as root.\n\nTip: Faster\nPass `--yes`."
        "\n\n> Note:\n> Logs go to the journal.\n\nInfo: Offline\nNo network is needed.\n\n"
        "[^1]: A footnote stays.\n\n"
        "The format is {{ .Name }}.\n\n"
        "```md\n## Kept {#kept}\n{{< tabs >}}\n!!! note\n```"
    )


def test_markdown_content_tabs_and_nested_bodies_read_as_rendered(tmp_path: Path) -> None:
    """PyMdown's content tabs (MkDocs Material, FastAPI's docs) are a label over a body
    indented by four spaces, as an admonition's: the label stays, the body is text, not
    an indented code block; bodies nest, a fence inside one is code, and a line indented
    less ends them. An abbreviation's definition is a tooltip, never a line."""
    markup = (
        '# Install\n\n=== "Linux"\n\n    Run the installer.\n\n    ```sh\n'
        "    sudo ./install.sh \\\n        --yes\n    ```\n\n"
        '    !!! tip "Faster"\n\n        Pass `--yes` to skip questions.\n\n'
        '===+ "Windows"\n\n    Double-click `setup.exe`.\n\n'
        "Back at the top level, in HTML.\n\n    an indented code block\n\n"
        "*[HTML]: Hyper Text Markup Language\n\n## Keys :material-keyboard:\n\n"
        "Press ++ctrl+alt+delete++ to restart.\n\n??? warning inline end\n\n"
        "    Folded.\n\n1. A list item\n\n    /// tab | macOS\n    Run the app.\n    ///\n\n"
        "    /// html | div.result\n    Rendered.\n    ///\n"
    )
    doc = load_path(write(tmp_path / "install.md", markup))
    assert doc.text == (
        "# Install\n\nLinux\n\nRun the installer.\n\n```sh\nsudo ./install.sh \\\n"
        "    --yes\n```\n\nTip: Faster\n\nPass `--yes` to skip questions.\n\nWindows\n\n"
        "Double-click `setup.exe`.\n\nBack at the top level, in HTML.\n\n"
        "    an indented code block\n\n## Keys\n\nPress ctrl+alt+delete to restart.\n\n"
        "Warning:\n\nFolded.\n\n1. A list item\n\nmacOS\n    Run the app.\n\n    Rendered."
    )
    assert section_titles(doc)[-1] == "Install > Keys"


def test_markdown_section_titles_are_the_headings_text_without_markup(tmp_path: Path) -> None:
    """A heading's emphasis, links and escapes are not its title's text (a citation
    showed "Extensions > **Main API**"), nor a code span's backticks (an HTML heading's
    text has none); underscores inside a name stay."""
    markup = (
        "# Guide\n\n## **Main API**\n\nText.\n\n## [Install](#install) the *widget* \\_now\\_\n\n"
        "More.\n\nThe `--yes` flag and snake_case_name\n---\n\nLast.\n"
    )
    doc = load_path(write(tmp_path / "guide.md", markup))
    assert section_titles(doc) == [
        "Guide > Main API",
        "Guide > Install the widget _now_",
        "Guide > The --yes flag and snake_case_name",
    ]
    assert "## **Main API**" in doc.text  # the text is as written


def test_mkdocstrings_and_autorefs_markup_is_read_as_rendered(tmp_path: Path) -> None:
    """mkdocstrings' ``::: package.Object`` renders the object's documentation under its
    name (its indented options are configuration); mkdocs-autorefs' ``[](){#id}`` is an
    anchor; Docusaurus' ``:::note`` stays an admonition."""
    markup = (
        "# API\n\n[](){#loading}\n## Loading\n\n::: griffe.load\n    options:\n"
        "      show_source: false\n\n::: griffe.Extension\n\nAfter.\n\n:::note Heads up\n"
        "Mind the gap.\n:::\n"
    )
    doc = load_path(write(tmp_path / "api.md", markup))
    assert doc.text == (
        "# API\n\n## Loading\n\ngriffe.load\n\ngriffe.Extension\n\nAfter.\n\n"
        "Note: Heads up\nMind the gap."
    )


def test_liquid_block_tags_read_as_jekyll_and_gitbook_render_them(tmp_path: Path) -> None:
    """Jekyll's ``{% highlight %}`` is a code block; GitBook's hints are admonitions and
    its tabs keep their labels; other tag lines show nothing. In code nothing changes."""
    markup = (
        '# Setup\n\n{% hint style="warning" %}\nYou need admin rights.\n{% endhint %}\n\n'
        '{% tabs %}\n{% tab title="Linux" %}\nRun `./install.sh`.\n{% endtab %}\n{% endtabs %}\n\n'
        '{% highlight ruby %}\nputs "{% not a tag %}"\n{% endhighlight %}\n\n'
        '{% embed url="https://example.com/video" %}\n\n'
        "```liquid\n{% if user %}Hi{% endif %}\n```\n"
    )
    doc = load_path(write(tmp_path / "setup.md", markup))
    assert doc.text == (
        "# Setup\n\nWarning:\nYou need admin rights.\n\nLinux\nRun `./install.sh`.\n\n"
        '```ruby\nputs "{% not a tag %}"\n```\n\n```liquid\n{% if user %}Hi{% endif %}\n```'
    )


def test_myst_directives_roles_and_targets_are_read_as_sphinx_renders_them(
    tmp_path: Path,
) -> None:
    """MyST (Sphinx's Markdown): an admonition written as a fenced block is prose (its
    option lines go), a toctree is nothing, a role is its text and a target line goes;
    other fenced directives (a code block) stay code, as written."""
    markup = (
        "(config)=\n# Config\n\n```{warning} Hot plates\n:class: tip\n"
        "See {ref}`the setup <setup>` and {func}`~keeper.lamps.light`.\n```\n\n"
        "```{toctree}\n:maxdepth: 2\n\ninstall\nusage\n```\n\n"
        ":::{note}\nKeep the wick short.\n:::\n\n"
        "```{code-block} python\nlight({ref}`x`)\n```\n"
    )
    doc = load_path(write(tmp_path / "config.md", markup))
    assert doc.text == (
        "# Config\n\nWarning: Hot plates\nSee the setup and light.\n\n"
        "Note:\nKeep the wick short.\n\n```{code-block} python\nlight({ref}`x`)\n```"
    )


def test_markdown_given_as_text_reads_as_the_same_file_does(tmp_path: Path) -> None:
    """Markdown given in memory (``mime="text/markdown"``) is read as a Markdown file is:
    its front matter, comments and heading ids are not its text; its title is the
    caller's."""
    markdown = "---\ntitle: Front\n---\n# Setup {#setup}\n\n<!-- draft -->\nRun it.\n"
    given = load_text(markdown, title="My note", mime="text/markdown")
    read = load_path(write(tmp_path / "setup.md", markdown))
    assert given.text == read.text == "# Setup\n\nRun it."
    assert section_titles(given) == section_titles(read) == ["Setup"]
    assert (given.title, read.title) == ("My note", "Front")
    with pytest.raises(EmptyDocument):
        load_text("---\ntitle: Only front matter\n---\n", title="t", mime="text/markdown")


def test_markdown_empty_anchors_are_not_text(tmp_path: Path) -> None:
    """An empty link (the anchor a heading is linked to by, as Docker's reference writes
    them) renders nothing, so it is neither in the section title nor in the text; in code
    it stays, and a link with text keeps it."""
    markup = (
        '# logs\n\n### <a name="until"></a> Logs until a point in time (--until)\n\n'
        'Use `<a name="x"></a>` to link here, or <a href="/since">since</a>.\n\n'
        '```html\n<a id="code"></a>\n```\n'
    )
    doc = load_path(write(tmp_path / "logs.md", markup))
    assert section_titles(doc)[-1] == "logs > Logs until a point in time (--until)"
    assert "### Logs until a point in time (--until)" in doc.text
    assert 'Use `<a name="x"></a>` to link here, or <a href="/since">since</a>.' in doc.text
    assert '<a id="code"></a>' in doc.text


def test_markdown_html_blocks_are_read_as_a_reader_sees_them(tmp_path: Path) -> None:
    """An HTML block in Markdown (Docker's run reference gives its network modes as a
    <table>) is its text, without tags; HTML in a code fence, and a block holding a
    fence, stay as written."""
    markup = (
        "# run\n\nSupported networks:\n\n<table>\n  <tr><th>Network</th><th>Description</th>"
        "</tr>\n  <tr>\n    <td><strong>none</strong></td>\n    <td>\n      No networking in"
        " the container.\n    </td>\n  </tr>\n</table>\n\n## Restart policies\n\n"
        "```html\n<table><tr><td>kept</td></tr></table>\n```\n\n"
        "<details>\n```sh\ndocker run --rm x\n```\n</details>\n"
    )
    doc = load_path(write(tmp_path / "run.md", markup))
    assert "<td>" not in doc.text.split("```html")[0] and "<strong>" not in doc.text
    assert "none" in doc.text and "No networking in the container." in doc.text
    assert "```html\n<table><tr><td>kept</td></tr></table>\n```" in doc.text
    assert "<details>\n```sh\ndocker run --rm x\n```\n</details>" in doc.text
    assert section_titles(doc)[-1] == "run > Restart policies"


def test_html_a_page_header_keeps_its_title(tmp_path: Path) -> None:
    markup = (
        "<body><header><h1>Release notes</h1><nav><a href='/'>Home</a> › Notes</nav></header>"
        "<p>Version 2 drops Python 3.8.</p><footer>© Example</footer></body>"
    )
    doc = load_path(write(tmp_path / "page.html", markup))
    assert doc.text == "# Release notes\n\nVersion 2 drops Python 3.8."


# The furniture of two real generators, as their pages carry it: a page header without
# a heading, a breadcrumb of links in a div named by id only, a language list, a link
# list, a banner tagline, a search form's options and the labels of "show" buttons.
GENERATED_PAGE = """<html><head><title>mod_alias - Apache HTTP Server Version 2.4</title></head>
<body><div id="page-header"><p class="apache">Apache HTTP Server Version 2.4</p></div>
<div class="tagline desktoponly">Small. Fast. Reliable.<br>Choose any three.</div>
<form><select name="s"><option>Search Documentation</option><option>Search Changelog</option>
</select><input name="q"></form>
<div id="path"><a href="/">Apache</a> &gt; <a href="/httpd">HTTP Server</a> &gt;
<a href="/docs">Documentation</a></div>
<div id="page-content"><div id="preamble"><h1>Apache Module mod_alias</h1>
<div class="toplang"><p><span>Available Languages: </span><a href="en.html">en</a> |
<a href="fr.html" hreflang="fr">fr</a></p></div>
<p>The directives in this module map <a href="#alias">URLs</a> to filesystem paths.</p>
<div id="quickview"><ul><li><a href="#alias">Alias</a></li><li><a href="#redirect">Redirect</a>
</li></ul></div></div>
<p><b><a href="syntax/select-stmt.html">select-stmt</a>:</b> <button>show</button></p>
<div class="section"><h2>Alias Directive</h2><p>Alias maps a URL to a path. See
<a href="mod_rewrite.html">mod_rewrite</a> for <a href="rewrite.html">rewriting</a> rules
that need more than a prefix.</p>
<ul><li><a href="a.html">Alias</a> maps a prefix.</li><li><a href="r.html">Redirect</a>
sends the client elsewhere.</li></ul></div></div></body></html>"""


def test_html_drops_link_lists_page_headers_and_form_text_of_any_generator(
    tmp_path: Path,
) -> None:
    """Without landmarks or known class names, furniture is found by what it is: a block
    of links (breadcrumb, language list, in-page index), a page header with no heading,
    a tagline, and form controls. A sentence with links in it, and a list whose items
    say more than their links, stay."""
    doc = load_path(write(tmp_path / "mod_alias.html", GENERATED_PAGE))
    for furniture in ("Apache HTTP Server Version 2.4", "Small. Fast.", "Search Documentation",
                      "HTTP Server >", "Available Languages", "show"):  # fmt: skip
        assert furniture not in doc.text, furniture
    assert doc.text.startswith("# Apache Module mod_alias\n\nThe directives in this module map")
    assert "See mod_rewrite for rewriting rules that need more than a prefix." in doc.text
    assert "- Alias maps a prefix." in doc.text
    assert "- Redirect sends the client elsewhere." in doc.text
    assert "- Alias\n" not in doc.text  # the in-page index of links
    # A code block whose identifiers are links (Javadoc, rustdoc) is content all the same.
    signature = "<div><pre><a href='S.html'>String</a> <a href='j.html'>join</a>()</pre></div>"
    linked = load_path(write(tmp_path / "api.html", f"<h1>API</h1>{signature}<p>Joins.</p>"))
    assert "String join()" in linked.text
    assert section_titles(doc) == [
        "Apache Module mod_alias",
        "Apache Module mod_alias > Alias Directive",
    ]


# A help centre's article as its theme marks it up: the article's own header (title,
# author's avatar, a "Follow" link acting as a button), body, attachments and footer
# (share links, "Was this article helpful?" votes), and a "related articles" list.
HELP_CENTRE_ARTICLE = """<html><head><title>Exporting your data - Lumen Labs</title></head>
<body><main role="main"><ol class="breadcrumbs"><li><a href="/hc">Lumen Labs</a></li>
<li><a href="/hc/s">Support</a></li></ol>
<article class="article"><header class="article-header"><h1>Exporting your data</h1>
<div class="avatar article-avatar"><img src="a.png" alt="">Dana</div>
<a class="article-subscribe" role="button" href="/subscription">Follow</a></header>
<div class="article-body"><p>Exports are ZIP archives of every project.</p>
<h2>Limits</h2><p>Archives larger than 50 GB are split into parts.</p>
<blockquote><p>Exports saved our audit.</p><footer>Quoted from a customer</footer></blockquote>
<p>See the <span class="author">Fong</span> report.</p>
<div class="tabs"><div role="tabpanel" hidden="true"><pre>lumen export --all</pre></div></div>
</div>
<footer><div class="article-share"><a href="https://x.example/s">Share on X</a></div>
<div class="article-votes"><h2>Was this article helpful?</h2><button>Yes</button>
<span>0 out of 0 found this helpful</span></div></footer>
<section class="related-articles"><h3>Related articles</h3><ul><li><a href="/a/2">Deleting
a workspace</a></li><li><a href="/a/3">Importing a CSV file</a></li></ul></section>
<div class="social-links">Follow us on Mastodon for release news</div>
</article></main></body></html>"""


def test_html_an_articles_footer_votes_and_share_links_are_not_content(tmp_path: Path) -> None:
    """What a help centre or a blog puts around an article is about it, not in it: its
    footer, votes, share and follow controls, avatar and related list go; a quotation's
    source, a bibliography's author and a hidden tab panel (shown by a click) stay."""
    doc = load_path(write(tmp_path / "article.html", HELP_CENTRE_ARTICLE))
    for furniture in ("Lumen Labs", "Dana", "Follow", "Share on X", "helpful", "Yes",
                      "Related articles", "Deleting", "Mastodon"):  # fmt: skip
        assert furniture not in doc.text, furniture
    assert doc.text.startswith("# Exporting your data\n\nExports are ZIP archives")
    assert "Archives larger than 50 GB are split into parts." in doc.text
    assert "Quoted from a customer" in doc.text  # a <footer> in a quotation names its source
    assert "See the Fong report." in doc.text
    assert "lumen export --all" in doc.text
    assert section_titles(doc) == ["Exporting your data", "Exporting your data > Limits"]


def test_html_permalink_signs_script_links_and_emptied_menu_items_leave_no_text(
    tmp_path: Path,
) -> None:
    """Node.js's "#" after each heading and its contents list (``id="toc"``; DocBook's
    and Docusaurus' by class), rustdoc's
    "[−]" toggle (a link that runs a script) and the items of a menu whose links were
    dropped leave nothing behind; an
    operator that links to its own section (SQLite's "->") stays."""
    markup = (
        "<div class='interior'><ul><li><a class='nav-dns' href='dns.html'>DNS</a></li>"
        "<li><a class='nav-fs' href='fs.html'>File system</a></li></ul></div>"
        "<details id='toc'><summary>Table of contents</summary><ul><li><a href='#lookup'>"
        "dns.lookup()</a></li></ul></details>"
        "<div class='toc'><b>Table of Contents</b><dl><dt><a href='a.html'>A</a> — one</dt>"
        "</dl></div><ul class='table-of-contents'><li><a href='#lookup'>lookup</a></li></ul>"
        "<h2>dns.lookup()<span><a class='mark' href='#lookup'>#</a></span></h2>"
        "<p>Resolves a host name.<a href='#fn1'>↩\ufe0e</a></p>"
        "<p><a href='javascript:void(0)'>[<span>−</span>]</a> Since 1.0.</p>"
        "<ul><li>json <a href='#jptr'>-&gt;</a> path</li></ul>"
    )
    doc = load_path(write(tmp_path / "api.html", markup))
    assert doc.text == "## dns.lookup()\n\nResolves a host name.\n\nSince 1.0.\n\n- json -> path"
    assert section_titles(doc) == ["dns.lookup()"]


def test_html_a_table_row_is_one_line_and_docbook_navigation_bars_go(tmp_path: Path) -> None:
    """A row keeps its cells together ("Status: | Extension"), nested tables included;
    DocBook's "Prev | Up | Next" bars (navheader, navfooter) are navigation."""
    markup = (
        "<div class='navheader'><table><tr><td><a href='p.html'>Prev</a></td><td>Chapter 5."
        " Data Definition</td><td><a href='n.html'>Next</a></td></tr></table></div>"
        "<h1>5.1. Table Basics</h1><table><tr><th>Status:</th><td>Extension</td></tr>"
        "<tr><td>Module:</td><td><table><tr><td>mod_alias</td><td>core</td></tr></table>"
        "</td><td>last</td></tr></table>"
        "<div class='navfooter'><table><tr><td><a href='h.html'>Home</a></td></tr></table></div>"
    )
    doc = load_path(write(tmp_path / "ddl.html", markup))
    assert "Prev" not in doc.text and "Home" not in doc.text and "Chapter 5" not in doc.text
    lines = [line for line in doc.text.splitlines() if line]
    assert lines[1] == "Status: | Extension"
    assert "mod_alias | core" in lines
    assert lines[-1] == "| last"  # the outer row's next cell, after its nested table


def test_html_a_list_items_paragraph_and_a_terms_definition_stay_on_its_line(
    tmp_path: Path,
) -> None:
    """Sphinx writes ``<li><p>``, asciidoc and DocBook ``<dt>term</dt><dd><p>``: the item's
    text is on its marker's line, and a definition on the line after its term, not a
    paragraph away, where a chunk could end between them."""
    markup = (
        "<h1>Options</h1><ul>\n<li>\n<p>First item's text.</p>\n<p>Its second paragraph.</p>"
        "</li><li><div><p>Second item.</p></div></li><li>Plain item.</li></ul>"
        "<dl>\n<dt class='hdlist1'>\n--onto &lt;newbase&gt;\n</dt>\n<dd>\n<p>\nStarting"
        " point.</p><p>More about it.</p></dd><dt><code>huge_pages</code> (enum)</dt>"
        "<dd><p>Controls huge pages.</p></dd><dt>Bare</dt><dd>Definition text.</dd>"
        "<dt>-f</dt>\n<dt>--force</dt><dd><p>Force it.</p></dd></dl>"
        "<ul><li><pre>make test</pre></li></ul>"
        "<ul><li><table><tr><td>Status:</td><td>Extension</td></tr></table></li></ul>"
    )
    text = load_path(write(tmp_path / "options.html", markup)).text
    assert "- First item's text.\n\nIts second paragraph." in text
    assert "\n- Second item.\n" in text and "\n- Plain item." in text
    assert "--onto <newbase>\nStarting point.\n\nMore about it." in text
    assert "huge_pages (enum)\nControls huge pages." in text
    assert "Bare\nDefinition text.\n\n-f\n--force\nForce it." in text
    assert "-\n\n```\nmake test\n```" in text  # a code block keeps its own lines
    assert "Status: | Extension" in text  # a table in an item keeps its rows


#: Pages that came out empty or lost a section: what holds the page is not furniture,
#: whatever its class says. mdBook writes ``<html class="sidebar-visible no-js light">``
#: on every page and the Apache manual ``<body class="no-sidebar">`` (the page's state,
#: not a sidebar); Read the Docs' theme holds the main landmark in ``<div
#: class="wy-nav-content">``; docutils makes a section's id from its heading ("Sidebar").
#: A real sidebar or menu beside them still goes.
WHAT_HOLDS_THE_PAGE = [
    pytest.param(
        "<html lang='en' class='sidebar-visible no-js light'><body>"
        "<nav id='sidebar' class='sidebar'><ol class='chapter'><li><a href='a.html'>1. Intro"
        "</a></li><li><a href='b.html'>2. Workspaces</a></li></ol></nav>"
        "<div id='page-wrapper' class='page-wrapper'><div class='page'>"
        "<div id='menu-bar' class='menu-bar sticky bordered'><ul id='theme-list'"
        " class='theme-popup' role='menu'><li role='none'><button role='menuitem'>Coal"
        "</button></li></ul><h1 class='menu-title'>The Rust Book</h1></div>"
        "<div id='content' class='content'><main><h2>Cargo Workspaces</h2>"
        "<p>A workspace is a set of packages that share the same Cargo.lock.</p></main>"
        "</div></div></div></body></html>",
        "## Cargo Workspaces\n\nA workspace is a set of packages that share the same Cargo.lock.",
        id="mdbook",
    ),
    pytest.param(
        "<body id='manual-page' class='no-sidebar'><div id='page-header'><p class='menu'>"
        "<a href='m.html'>Modules</a> | <a href='d.html'>Directives</a></p></div>"
        "<div id='page-content'><h1>Documenting code</h1><p>Apache uses Doxygen.</p>"
        "<div class='has-sidebar with-toc'><p>Wrapped content stays.</p></div>"
        "<div class='sidebar'><p>Related modules</p></div></div></body>",
        "# Documenting code\n\nApache uses Doxygen.\n\nWrapped content stays.",
        id="apache-no-sidebar",
    ),
    pytest.param(
        "<body class='wy-body-for-nav'><nav class='wy-nav-side'><div class='wy-menu'"
        " role='navigation'><a href='a.html'>Install</a><a href='b.html'>Usage</a></div>"
        "</nav><section class='wy-nav-content-wrap'><div class='wy-nav-content'>"
        "<div role='navigation' aria-label='Page navigation'><ul class='wy-breadcrumbs'>"
        "<li><a href='index.html'>Docs</a></li><li>Usage</li></ul></div><div role='main'"
        " class='document'><h1>Usage</h1><p>Run the server on port 8080.</p></div>"
        "<footer><p>Copyright 2024.</p></footer></div></section></body>",
        "# Usage\n\nRun the server on port 8080.",
        id="read-the-docs",
    ),
    pytest.param(
        "<div class='document'><div class='section' id='sidebar'><h2>Sidebar</h2><p>A"
        " sidebar is a side note.</p></div><section id='footer'><h2>Footer</h2><p>A footer"
        " ends each page.</p></section><div id='footer'>Generated by Docutils</div></div>",
        "## Sidebar\n\nA sidebar is a side note.\n\n## Footer\n\nA footer ends each page.",
        id="docutils-section-ids",
    ),
]


@pytest.mark.parametrize(("markup", "text"), WHAT_HOLDS_THE_PAGE)
def test_html_what_holds_the_page_is_not_furniture_whatever_its_class(
    tmp_path: Path, markup: str, text: str
) -> None:
    assert load_path(write(tmp_path / "page.html", markup)).text == text


def test_html_a_head_left_open_ends_where_the_body_starts(tmp_path: Path) -> None:
    """RDoc (Ruby's and Asciidoctor's API pages) writes no ``</head>``: its end tag is
    optional, and ``<body>`` ends it. Every such page used to come out empty."""
    markup = (
        "<!DOCTYPE html><html><head><meta charset='UTF-8'><title>class Asciidoctor::Block"
        "</title><script>var rdoc_rel_prefix = './';</script>\n<body id='top' class='class'>"
        "<nav role='navigation'><a href='index.html'>Home</a></nav><main role='main'>"
        "<h1>class Asciidoctor::Block</h1><p>Methods for managing blocks of content.</p>"
        "</main></body></html>"
    )
    doc = load_path(write(tmp_path / "Block.html", markup))
    assert doc.title == "class Asciidoctor::Block"
    assert doc.text == "# class Asciidoctor::Block\n\nMethods for managing blocks of content."


def test_html_furniture_of_more_generators_goes_and_their_titles_stay(tmp_path: Path) -> None:
    """Qt's breadcrumb (``navigationbar``), MediaWiki's tagline and sub-title
    (``siteSub``, ``contentSub``) and Doxygen's banner (``titlearea``) are furniture;
    pandoc's title (``<h1 class="title toc-ignore">``) is not ("ignore" is a flag, not
    a name). A ``<head>`` left open ends at the first element a head cannot hold."""
    markup = (
        "<html><head><title>QSvgWidget</title><meta charset='utf-8'>"
        "<div id='titlearea'><table><tr><td>cmocka 1.1.5</td></tr></table></div>"
        "<div class='navigationbar'><ul><li><a href='q.html'>Qt 5.15</a></li>"
        "<li>Qt SVG</li></ul></div>"
        "<div id='siteSub'>From cppreference.com</div><div id='contentSub'>&lt; c | io</div>"
        "<h1 class='title toc-ignore'>Introduction to dplyr</h1>"
        "<p>The QSvgWidget class provides a widget that displays SVG files.</p></html>"
    )
    doc = load_path(write(tmp_path / "qsvgwidget.html", markup))
    assert doc.text == (
        "# Introduction to dplyr\n\nThe QSvgWidget class provides a widget that displays SVG files."
    )


def test_html_a_page_title_in_a_header_and_a_list_classed_toc_are_content(
    tmp_path: Path,
) -> None:
    """Doxygen puts a page's title in ``<div class="header"><div class="title">``: the
    header is no banner when it holds the title. texi2html writes every bullet list as
    ``<ul class="toc">``: such a list is judged by its links, so a list of sentences
    stays and a list of links (a contents list) goes."""
    markup = (
        "<div class='header'><div class='summary'><a href='#func'>Functions</a> | "
        "<a href='#define'>Macros</a></div><div class='headertitle'><div class='title'>"
        "Standard Assertions</div></div></div><div class='contents'><p>How to assert.</p>"
        "<ul class='toc'><li>Format-aware diffing and patching of PO files.</li>"
        "<li>Handling of version-control branches.</li></ul>"
        "<ul class='toc'><li><a href='a.html'>1 Introduction</a></li>"
        "<li><a href='b.html'>2 The User's View</a></li></ul></div>"
    )
    assert load_path(write(tmp_path / "group.html", markup)).text == (
        "Standard Assertions\n\nHow to assert.\n\n- Format-aware diffing and patching of PO"
        " files.\n\n- Handling of version-control branches."
    )


def test_html_a_sentence_or_a_table_of_links_with_words_of_its_own_is_content(
    tmp_path: Path,
) -> None:
    """A sentence that names its cross-references, or a table of linked names and what
    they are, is mostly link text and still content: it has words of its own. A bar of
    links between brackets and bars ("[ << ] | [ >> ] | [Top]") and an index's letter
    bar have none, and go."""
    markup = (
        "<h1>Drivers</h1><table class='nav'><tr><td>[<a href='a.html'>&lt;&lt;</a>]</td>"
        "<td>[<a href='b.html'>&gt;&gt;</a>]</td><td>[<a href='t.html'>Top</a>]</td>"
        "<td>[<a href='c.html'>Contents</a>]</td></tr></table>"
        "<p><a href='#A'>A</a> | <a href='#B'>B</a> | <a href='#C'>C</a></p>"
        "<p>Also see <a href='f.html'>$forward_decode</a> and"
        " <a href='m.html'>$mime_forward_decode</a>.</p>"
        "<table><tr><th><p>Driver</p></th><th><p>Supported</p></th></tr>"
        "<tr><td><p><a href='c.html'>ConsulDriver</a></p></td><td><p>Yes</p></td></tr>"
        "<tr><td><p><a href='e.html'>EtcdDriver</a></p></td><td><p>No</p></td></tr></table>"
        "<ul><li><a href='x.html'>Next topic</a></li><li><a href='y.html'>Index</a></li></ul>"
    )
    assert load_path(write(tmp_path / "drivers.html", markup)).text == (
        "# Drivers\n\nAlso see $forward_decode and $mime_forward_decode.\n\n"
        "Driver | Supported\n\nConsulDriver | Yes\n\nEtcdDriver | No"
    )


def test_html_a_declaration_whose_types_are_links_is_content(tmp_path: Path) -> None:
    """Haddock writes a signature as ``<p class="src">`` with every type a link: it is the
    declaration's code, not a menu, though its words are nearly all link text."""
    markup = (
        "<h1>Data.Aeson</h1><div class='top'><p class='src'><a href='#v:toConstr'>toConstr"
        "</a> :: <a href='t.html#Value'>Value</a> -&gt; <a href='d.html#Constr'>Constr</a>"
        " <a href='src/Data.html' class='link'>Source</a></p><div class='doc'><p>The"
        " constructor of a value.</p></div></div>"
        "<p><a href='a.html'>Contents</a> <a href='i.html'>Index</a></p>"
    )
    assert load_path(write(tmp_path / "Data-Aeson.html", markup)).text == (
        "# Data.Aeson\n\ntoConstr :: Value -> Constr Source\n\nThe constructor of a value."
    )


def test_html_the_sites_name_above_the_page_is_no_heading(tmp_path: Path) -> None:
    """Django's and Exim's pages open with the site's name, a heading that is one link to
    the front page ("../../index.html", "http://www.exim.org"): not a section of the page.
    A heading that links to a page of its own (a mailing list's archive) stays."""
    for link in ("../../index.html", "http://www.exim.org", "../"):
        markup = (
            f"<div id='hd'><h1><a href='{link}'>Django 3.2 documentation</a></h1></div>"
            "<h1>Writing your first app</h1><p>Create a project.</p>"
            "<h4><a href='https://groups.google.com/forum/#!forum/git-mentoring'>"
            "git-mentoring@googlegroups.com</a></h4><p>Ask here.</p>"
        )
        assert load_path(write(tmp_path / "intro.html", markup)).text == (
            "# Writing your first app\n\nCreate a project.\n\n"
            "#### git-mentoring@googlegroups.com\n\nAsk here."
        )


def test_html_a_sidebar_inside_a_section_and_a_title_without_its_hidden_link(
    tmp_path: Path,
) -> None:
    """reStructuredText's ``.. sidebar::`` sits inside the section it belongs to: it is
    text, where a site's sidebar, beside the sections, is not. What a screen reader skips
    in a heading (``aria-hidden``: FFmpeg's "TOC" link) is no part of its title."""
    markup = (
        "<div class='sidebar'><ul><li><a href='i.html'>Install</a></li>"
        "<li><a href='u.html'>Usage</a></li></ul><p>Site search and links.</p></div>"
        "<section id='defining-document-structure'><h2>Defining document structure"
        "<span class='pull-right'><a href='#toc-x' aria-hidden='true'>TOC</a></span></h2>"
        "<aside class='sidebar'><p class='sidebar-title'>Tip</p><p>Documents are trees of"
        " sections.</p></aside><p>A document starts with its title.</p></section>"
    )
    assert load_path(write(tmp_path / "quickstart.html", markup)).text == (
        "## Defining document structure\n\nTip\n\nDocuments are trees of sections.\n\n"
        "A document starts with its title."
    )


def test_an_html_page_is_read_in_the_encoding_it_declares(tmp_path: Path) -> None:
    """A page in ISO-8859-1 (vim's digraph table) may hold bytes that Windows-1252 lacks
    (0x81, 0x8d); read as it declares itself, as a browser does, it is text."""
    page = (
        b'<meta http-equiv="Content-type" content="text/html; charset=ISO-8859-1">'
        b"<h1>Digraphs</h1><p>caf\xe9 \x81 na\xefve</p>"
    )
    doc = load_path(write(tmp_path / "digraph.html", page))
    assert doc.text.startswith("# Digraphs\n\ncaf\u00e9 ")
    assert doc.text.endswith(" na\u00efve")
    with pytest.raises(UnreadableFile, match="neither UTF-8 nor Windows-1252"):
        load_path(write(tmp_path / "digraph.txt", b"caf\xe9 \x81 na\xefve"))


def test_a_stray_nul_byte_in_a_utf8_page_is_not_binary(tmp_path: Path) -> None:
    """A Javadoc page that documents the NUL character holds one. A UTF-8 text with a
    NUL byte or two is text (the NUL is dropped); binary data, or a non-UTF-8 file with
    a NUL, is still refused."""
    about = "<p>" + "Operations on char primitives and Character objects. " * 30 + "</p>"
    page = f"<h1>CharUtils</h1>{about}<p><code>\x00</code> null control character.</p>"
    doc = load_path(write(tmp_path / "CharUtils.html", page))
    assert doc.text.startswith("# CharUtils\n\nOperations") and "\x00" not in doc.text
    assert doc.text.endswith("null control character.")
    utf16 = tmp_path / "notes.txt"
    utf16.write_bytes("Grüße aus Köln".encode("utf-16"))
    assert load_path(utf16).text == "Grüße aus Köln"
    for name, data in (
        ("blob.txt", bytes(range(256)) * 8),
        ("latin.txt", b"caf\xe9 \x00 cr\xe8me"),
    ):
        with pytest.raises(UnreadableFile, match="binary"):
            load_path(write(tmp_path / name, data))


def test_html_unclosed_items_in_a_menu_do_not_hide_the_page(tmp_path: Path) -> None:
    markup = "<nav><ul><li>One<li><p>Two</ul></nav><h1>Title</h1><p>Body text stays.</p>"
    doc = load_path(write(tmp_path / "page.html", markup))
    assert doc.text == "# Title\n\nBody text stays."


def test_html_a_landmark_that_holds_nothing_keeps_the_page(tmp_path: Path) -> None:
    """A stray "role=main" (in a script, or an empty element) is no reason to drop the
    page's text."""
    markup = (
        "<script>el.setAttribute('role=main')</script><div role='main'></div>"
        "<h1>Title</h1><p>" + "Body text that is the whole page. " * 10 + "</p>"
    )
    doc = load_path(write(tmp_path / "page.html", markup))
    assert doc.text.startswith("# Title") and "whole page" in doc.text


def test_example_html_page(tether: Tether) -> None:
    path = EXAMPLES / "data-export.html"
    doc = load_path(path)
    assert doc.title == "Exporting Your Sensor Data - Lumen Labs Support"
    for marker in ("STYLE-BLOCK-MARKER", "SCRIPT-BLOCK-MARKER", "lumenAnalytics", "font-family"):
        assert marker not in doc.text
    assert "soil temperature (°C)" in doc.text
    assert "Data > Export" in doc.text
    assert "Lumen Labs › Support" not in doc.text  # the breadcrumb is navigation
    assert "Exporting Your Sensor Data > Export through the HTTP API" in section_titles(doc)

    [result] = tether.add(path)
    assert result.status == "indexed"
    stored = "\n".join(c.content for c in tether.chunks(result.document_id))
    assert "STYLE-BLOCK-MARKER" not in stored and "SCRIPT-BLOCK-MARKER" not in stored
    assert search_texts(tether, "STYLE-BLOCK-MARKER") == []
    assert search_texts(tether, "lumenAnalytics cookie consent") == []
    hits = tether.search("Retry-After header HTTP 429", scope="global")
    assert hits[0].section_title == "Exporting Your Sensor Data > Export through the HTTP API"


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tool.exe", "Makefile", "archive.tar.gz", "x.md.bak"])
def test_unsupported_file_type(tmp_path: Path, name: str) -> None:
    """Binary data of no format tether reads, whatever its name says (a name that says
    nothing, or names no format, is read by its content)."""
    path = tmp_path / name
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    with pytest.raises(UnsupportedFileType) as excinfo:
        load_path(path)
    error = excinfo.value
    assert isinstance(error, IngestError)
    assert error.source == str(path)
    assert str(path) in str(error)
    for extension in (".md", ".txt", ".pdf", ".html", ".docx"):
        assert extension in str(error)
    assert set(supported_extensions()) >= {".md", ".markdown", ".txt", ".pdf", ".html", ".htm"}


@pytest.mark.parametrize("name", ["missing.md", "missing.txt", "missing.pdf", "missing.html"])
def test_missing_file_is_unreadable(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with pytest.raises(UnreadableFile, match="no such file") as excinfo:
        load_path(path)
    assert excinfo.value.source == str(path)
    assert isinstance(excinfo.value, IngestError)


@pytest.mark.parametrize("name", ["folder", "folder.md", "folder.pdf"])
def test_directory_is_unreadable(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.mkdir()
    with pytest.raises(UnreadableFile, match="directory") as excinfo:
        load_path(path)
    assert excinfo.value.source == str(path)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("junk.txt", b"\x00\x01\x02\x03binary\xff\xfe\x00"),
        ("junk.md", b"# Title\n\x00\x00\x00"),
        ("junk.html", b"<p>x</p>\x00\x89PNG"),
        ("undecodable.txt", b"\x81\x8d\x8f\x90\x9d"),
    ],
)
def test_binary_junk_is_unreadable(tmp_path: Path, name: str, raw: bytes) -> None:
    path = write(tmp_path / name, raw)
    with pytest.raises(UnreadableFile) as excinfo:
        load_path(path)
    assert excinfo.value.source == str(path)
    assert str(path) in str(excinfo.value)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("empty.txt", b""),
        ("blank.txt", b"  \n\t\r\n  \r\n"),
        ("nbsp.txt", "\u00a0\u200b\n".encode()),
        ("empty.md", b""),
        ("blank.md", b"\n\n   \n"),
        ("front-matter-only.md", b"---\ntitle: Nothing here\n---\n"),
        ("empty.html", b""),
        (
            "invisible.html",
            b"<html><head><title>T</title><script>x()</script></head><body> </body></html>",
        ),
    ],
)
def test_empty_file_is_an_empty_document(tmp_path: Path, name: str, raw: bytes) -> None:
    path = write(tmp_path / name, raw)
    with pytest.raises(EmptyDocument) as excinfo:
        load_path(path)
    assert isinstance(excinfo.value, IngestError)
    assert excinfo.value.source == str(path)


def test_a_page_of_navigation_alone_says_so(tmp_path: Path) -> None:
    """A contents page or an index holds nothing but links: it is refused, and the error
    says it held navigation, not that it showed nothing."""
    contents = (
        "<html><head><title>Manual</title></head><body><div class='toc'><ul>"
        "<li><a href='a.html'>1 Introduction</a></li><li><a href='b.html'>2 Usage</a></li>"
        "</ul></div></body></html>"
    )
    with pytest.raises(EmptyDocument, match="only navigation"):
        load_path(write(tmp_path / "index.html", contents))
    with pytest.raises(EmptyDocument, match="no visible text"):
        load_path(write(tmp_path / "search.html", "<title>Search</title><script>s()</script>"))


def test_html_paging_links_and_a_generators_credit_go(tmp_path: Path) -> None:
    """Links classed as the way to the previous or next page (xfpt's "<-previous next->",
    Furo's "next-page") and Texinfo's closing credit are not the page's text."""
    markup = (
        "<div id='content'><a class='previous_page' href='ch02.html'>&lt;-previous</a>"
        "<a class='next_page' href='ch04.html'>next-&gt;</a><h1>3. Routers</h1>"
        "<p>A router decides where a message goes.</p><p>This document was generated on"
        " February 5, 2023 using <a href='https://www.gnu.org/software/texinfo/'>"
        "<em>texi2any</em></a>.</p><p>This document was generated to show what routers"
        " do, and it is used by the tests.</p></div>"
    )
    assert load_path(write(tmp_path / "ch03.html", markup)).text == (
        "# 3. Routers\n\nA router decides where a message goes.\n\nThis document was"
        " generated to show what routers do, and it is used by the tests."
    )


def test_html_a_pages_date_stamp_goes_and_prose_about_dates_stays(tmp_path: Path) -> None:
    """SQLite's pages end with "This page last modified on <date> UTC" in a plain
    paragraph, MkDocs' with "Last update: <date>" in a div: when the page changed is
    not what it says. A sentence about modification times is text."""
    markup = (
        "<h1>INSERT</h1><p>The INSERT statement comes in three basic forms.</p>"
        "<p>The last modified time of a row is not stored: add a column for it.</p>"
        "<p>Last modified: the time the file changed.</p>"
        "<p align=center><small><i>This page last modified on <a href='x'>2022-01-20"
        " 21:38:08</a> UTC </i></small></p><div>Last update: 2023-01-05</div>"
    )
    assert load_path(write(tmp_path / "lang_insert.html", markup)).text == (
        "# INSERT\n\nThe INSERT statement comes in three basic forms.\n\nThe last modified"
        " time of a row is not stored: add a column for it.\n\nLast modified: the time the"
        " file changed."
    )


@pytest.mark.parametrize(
    ("line", "stamp"),
    [
        ("This page last modified on 2022-01-20 21:38:08 UTC", True),
        ("Last updated on Jan 5, 2023.", True),
        ("This page was last edited on 5 May 2023, at 10:00 (UTC).", True),
        ("Last updated: Tue, 05 Mar 2024 10:22:01 GMT", True),
        ("Last updated 3 days ago when the cache expired", False),
        ("Modified on 2023 the config file lost its header.", False),
        ("Last modified: 2023-01-05 by jdoe", False),  # a name after it: not only a date
    ],
)
def test_a_date_stamp_is_a_date_and_nothing_else(line: str, stamp: bool) -> None:
    from tether.ingest.furniture import date_stamp

    assert date_stamp(line) is stamp


def test_html_a_row_of_empty_cells_and_mediawikis_furniture_go(tmp_path: Path) -> None:
    """A table row whose cells hold no text (a layout or spacer row) prints no "|" line;
    MediaWiki's "Jump to" links and category links are not the page's text."""
    markup = (
        "<h1>printf</h1><div id='jump-to-nav'>Jump to: <a href='#nav'>navigation</a>,"
        " <a href='#search'>search</a></div><p>Prints formatted output.</p><table>"
        "<tr><td></td><td>&nbsp;</td></tr><tr><td>%d</td><td>a decimal integer</td></tr>"
        "<tr><td> </td><td></td><td></td></tr><tr><td></td><td>no specifier</td></tr>"
        "</table><div id='catlinks'><a href='/Category:io'>Category: io</a></div>"
    )
    assert load_path(write(tmp_path / "printf.html", markup)).text == (
        "# printf\n\nPrints formatted output.\n\n%d | a decimal integer\n\n| no specifier"
    )


def test_html_a_heading_named_like_furniture_stays_and_a_banner_goes(tmp_path: Path) -> None:
    """A heading's id is made from its text (MkDocs: ``<h2 id="footer">Footer</h2>``):
    a section titled "Footer" or "Navigation" is content. Publican's ``<div id="banner">``
    ("Download the ebook", on every page of the Debian Administrator's Handbook) is not."""
    markup = (
        "<html><body><div id='banner'><a href='/get/'><span class='text'>Download the ebook"
        "</span></a></div><h1>Theme</h1><p>Intro.</p><h2 id='footer'>Footer</h2><p>The footer"
        " shows the copyright line.</p><h2 id='navigation'>Navigation</h2><p>Tabs sit at the"
        " top.</p></body></html>"
    )
    doc = load_path(write(tmp_path / "theme.html", markup))
    assert doc.text == (
        "# Theme\n\nIntro.\n\n## Footer\n\nThe footer shows the copyright line.\n\n"
        "## Navigation\n\nTabs sit at the top."
    )
    assert section_titles(doc) == ["Theme", "Theme > Footer", "Theme > Navigation"]


def test_html_a_header_with_words_of_its_own_after_the_first_heading_is_text(
    tmp_path: Path,
) -> None:
    """haproxy's manual writes each keyword's "See also: ..." line as a
    ``<div class="page-header">``: after the page's first heading, a header with words of
    its own beside its links is text. A tagline header before the first heading is still
    a banner, and a "Next: ..., Up: ..." header bar (texi2any) has only navigation's
    words: both go."""
    markup = (
        "<html><body><div class='header'><p>Small. Fast. Reliable.</p></div>"
        "<div class='page-header'><h1>1. Keywords</h1></div><p>bind listens on an address."
        "</p><div class='page-header'><b>See also :</b> &quot;<a href='#maxconn'>maxconn"
        "</a>&quot;, &quot;<a href='#grace'>grace</a>&quot;</div><div class='header'>Next:"
        " <a href='b.html'>Backends</a>, Up: <a href='index.html'>Top</a></div>"
        "<p>More text.</p></body></html>"
    )
    assert load_path(write(tmp_path / "configuration.html", markup)).text == (
        '# 1. Keywords\n\nbind listens on an address.\n\nSee also : "maxconn", "grace"\n\n'
        "More text."
    )


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t\n", "\u200b"])
@pytest.mark.parametrize("mime", ["text/plain", "text/markdown"])
def test_empty_text_is_an_empty_document(text: str, mime: str) -> None:
    with pytest.raises(EmptyDocument) as excinfo:
        load_text(text, title="My note", mime=mime)
    assert excinfo.value.source == "My note"


def test_failed_results_name_the_source(tether: Tether, tmp_path: Path) -> None:
    missing = tmp_path / "missing.txt"
    unsupported = write(tmp_path / "a.exe", b"MZ\x90\x00\x03\x00\x00\x00")
    results = tether.add([missing, unsupported], on_error="collect")
    assert [(r.status, r.source, type(r.error)) for r in results] == [
        ("failed", str(missing), UnreadableFile),
        ("failed", str(unsupported), UnsupportedFileType),
    ]
    assert all(r.document_id is None for r in results)
    assert results[0].error.source == str(missing)  # type: ignore[union-attr]


# -- batches ------------------------------------------------------------------------------


def _missing(tmp_path: Path) -> Path:
    return tmp_path / "missing.md"


def _unsupported(tmp_path: Path) -> Path:
    return write(tmp_path / "tool.exe", b"MZ\x90\x00\x03\x00\x00\x00")


def _empty(tmp_path: Path) -> Path:
    return write(tmp_path / "empty.txt", "  \n")


def _corrupt_pdf(tmp_path: Path) -> Path:
    return write(tmp_path / "broken.pdf", b"%PDF-1.7\nthis is not a pdf")


def _name_too_long(tmp_path: Path) -> Path:
    return tmp_path / f"{'n' * 300}.md"  # the OS refuses even to look it up


BAD_SOURCES = [_missing, _unsupported, _empty, _corrupt_pdf, _name_too_long]
BAD_ERRORS = {
    _missing: UnreadableFile,
    _unsupported: UnsupportedFileType,
    _empty: EmptyDocument,
    _corrupt_pdf: UnreadableFile,
    _name_too_long: UnreadableFile,
}


def good_files(tmp_path: Path) -> tuple[Path, Path]:
    first = write(tmp_path / "first.md", "# First\n\nThe zeppelin manual.\n")
    second = write(tmp_path / "second.txt", "The xylophone tuning notes.\n")
    return first, second


@pytest.mark.parametrize("make_bad", BAD_SOURCES)
def test_batch_collects_failures(
    tether: Tether, tmp_path: Path, make_bad: Callable[[Path], Path]
) -> None:
    first, second = good_files(tmp_path)
    bad = make_bad(tmp_path)
    results = tether.add([first, bad, second], on_error="collect")
    assert [r.status for r in results] == ["indexed", "failed", "indexed"]
    assert [r.source for r in results] == [str(first), str(bad), str(second)]
    assert isinstance(results[1].error, BAD_ERRORS[make_bad])
    assert results[0].error is None and results[2].error is None
    assert search_texts(tether, "zeppelin") == ["# First\n\nThe zeppelin manual."]
    assert search_texts(tether, "xylophone") == ["The xylophone tuning notes."]
    assert len(tether.documents()) == 2


@pytest.mark.parametrize("make_bad", BAD_SOURCES)
def test_batch_raises_at_the_end_after_storing_the_good_ones(
    tether: Tether, tmp_path: Path, make_bad: Callable[[Path], Path]
) -> None:
    first, second = good_files(tmp_path)
    bad = make_bad(tmp_path)
    with pytest.raises(IndexingFailed) as excinfo:
        tether.add([first, bad, second])
    error = excinfo.value
    assert isinstance(error, IngestError)
    assert [r.status for r in error.results] == ["indexed", "failed", "indexed"]
    assert isinstance(error.results[1].error, BAD_ERRORS[make_bad])
    assert str(bad) in str(error)
    stored = {d.id for d in tether.documents()}
    assert stored == {error.results[0].document_id, error.results[2].document_id}
    assert search_texts(tether, "zeppelin") and search_texts(tether, "xylophone")
    # Adding them again: the good ones are unchanged, the bad one still fails.
    with pytest.raises(IndexingFailed) as again:
        tether.add([first, bad, second])
    assert [r.status for r in again.value.results] == ["skipped", "failed", "skipped"]


def test_a_text_that_cannot_go_where_it_is_sent_fails_alone(tether: Tether) -> None:
    """Problems found only against the store (a document id of another workspace, a source
    key that is another document's) fail that source with a typed error; the sources
    before and after it in the batch are still stored."""
    from tether import InvalidArgument, ScopeError

    tether.add(text="owned by the lab workspace", title="Lab", document_id="lab-1",
               workspace_id="lab")  # fmt: skip
    tether.add(text="the artifact's first version", title="Artifact", source="artifact:7")
    middles = [
        (TextSource("new text for lab-1", "Lab", document_id="lab-1"), ScopeError, "'lab'"),
        (
            TextSource(
                "a new id for a taken key", "Other", document_id="new-id", source="artifact:7"
            ),
            InvalidArgument,
            "already document",
        ),
    ]
    for n, (middle, error, message) in enumerate(middles):
        batch = [
            TextSource(f"zeppelin note {n}", "A"),
            middle,
            TextSource(f"xylophone note {n}", "C"),
        ]
        results = tether.add(batch, on_error="collect")
        assert [r.status for r in results] == ["indexed", "failed", "indexed"]
        assert isinstance(results[1].error, error) and message in str(results[1].error)
        assert f"zeppelin note {n}" in search_texts(tether, "zeppelin")
        assert f"xylophone note {n}" in search_texts(tether, "xylophone")
    assert tether.get_document("lab-1").workspace_id == "lab"
    assert search_texts(tether, "first version") == ["the artifact's first version"]
    assert tether.store.counts()["rag_documents"] == 6


def test_a_document_that_fails_to_store_fails_alone(
    tether: Tether, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documents of a group share one write transaction. New ones are stored together;
    when the store refuses them (a failure injected here, after the rows are written) they
    are written again one by one, each a savepoint, so the one that fails rolls back
    alone."""
    from tether import StoreError

    files = [write(tmp_path / f"f{i}.md", f"# F{i}\n\nThe gyroscope note {i}.\n") for i in range(3)]
    real_insert, real_insert_all = tether.store.insert_document, tether.store.insert_documents
    together: list[list[str]] = []

    def insert(record, chunks, vectors=None):  # type: ignore[no-untyped-def]
        real_insert(record, chunks, vectors)  # the rows are written, then it fails
        if record.title == "F1":
            raise StoreError("disk said no")

    def insert_all(documents):  # type: ignore[no-untyped-def]
        together.append([record.title for record, _, _ in documents])
        real_insert_all(documents)
        if "F1" in together[-1]:
            raise StoreError("disk said no")

    monkeypatch.setattr(tether.store, "insert_document", insert)
    monkeypatch.setattr(tether.store, "insert_documents", insert_all)
    results = tether.add(files, on_error="collect")
    assert together == [["F0", "F1", "F2"]]
    assert [r.status for r in results] == ["indexed", "failed", "indexed"]
    assert isinstance(results[1].error, StoreError)
    assert sorted(d.title for d in tether.documents()) == ["F0", "F2"]
    assert sorted(h.title for h in tether.search("gyroscope", scope="global")) == ["F0", "F2"]
    tether.store.fts_integrity_check()
    monkeypatch.undo()
    assert [r.status for r in tether.add(files)] == ["skipped", "indexed", "skipped"]


def test_a_new_front_matter_title_updates_the_document(tether: Tether, tmp_path: Path) -> None:
    path = write(tmp_path / "note.md", "---\ntitle: Draft name\n---\n# Pumps\n\nPrime it.\n")
    [first] = tether.add(path)
    chunks = tether.chunks(first.document_id)
    write(path, "---\ntitle: Final name\n---\n# Pumps\n\nPrime it.\n")
    [second] = tether.add(path)
    assert (second.status, second.document_id) == ("updated", first.document_id)
    assert tether.get_document(first.document_id).title == "Final name"
    assert tether.chunks(first.document_id) == chunks
    assert tether.search("prime", scope="global")[0].title == "Final name"


def test_the_same_text_as_markdown_is_chunked_again(tether: Tether) -> None:
    text = "# Setup\n\nPlug it in.\n\n# Care\n\nWipe the lens.\n"
    [plain] = tether.add(text=text, title="Guide", document_id="guide")
    assert {c.section_title for c in tether.chunks("guide")} == {None}
    [markdown] = tether.add(text=text, title="Guide", document_id="guide", mime="text/markdown")
    assert (plain.status, markdown.status) == ("indexed", "replaced")
    assert [c.section_title for c in tether.chunks("guide")] == ["Setup", "Care"]


# -- chunking: split_span -----------------------------------------------------------------

_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789", min_size=1, max_size=12)
_PIECE = st.one_of(
    _WORD,
    _WORD,
    _WORD,
    st.sampled_from([" ", " ", "  ", "\n", "\n\n", "\t", ". ", "! ", "? ", ", ", "…", '." ', "; "]),
    st.sampled_from(["\u00a0", "\u2003", "- ", "(", ")", "é"]),
    st.text(alphabet="xyz", min_size=60, max_size=2500),  # long unbroken words
)
TEXTS = st.lists(_PIECE, max_size=400).map("".join)


def _size_and_overlap() -> st.SearchStrategy[tuple[int, int]]:
    return st.integers(100, 2000).flatmap(
        lambda size: st.tuples(st.just(size), st.integers(0, size // 2))
    )


def check_spans(
    text: str, start: int, end: int, size: int, overlap: int, spans: list[tuple[int, int]]
) -> None:
    covered = [False] * len(text)
    previous: tuple[int, int] | None = None
    for s, e in spans:
        content = text[s:e]
        assert start <= s < e <= end
        assert 0 < len(content) <= size
        assert not content[0].isspace() and not content[-1].isspace()
        if previous is not None:
            assert s > previous[0], "chunks must move forward"
            assert e > previous[1], "a chunk ends where the one before it did"
            assert previous[1] - s <= overlap, "chunks overlap by more than `overlap`"
        for i in range(s, e):
            covered[i] = True
        previous = (s, e)
    lost = [i for i in range(start, end) if not text[i].isspace() and not covered[i]]
    assert lost == [], f"characters lost: {[text[i] for i in lost[:10]]}"


@PROPERTY
@given(TEXTS, _size_and_overlap())
def test_split_span_properties(text: str, size_overlap: tuple[int, int]) -> None:
    size, overlap = size_overlap
    spans = list(split_span(text, 0, len(text), size, overlap))
    check_spans(text, 0, len(text), size, overlap, spans)
    if text.strip() and len(text.strip()) <= size:
        assert spans == [(len(text) - len(text.lstrip()), len(text.rstrip()))]


@PROPERTY
@given(TEXTS, TEXTS, TEXTS, _size_and_overlap())
def test_split_span_stays_inside_its_span(
    before: str, middle: str, after: str, size_overlap: tuple[int, int]
) -> None:
    size, overlap = size_overlap
    text = before + "\n" + middle + "\n" + after
    start, end = len(before) + 1, len(before) + 1 + len(middle)
    spans = list(split_span(text, start, end, size, overlap))
    check_spans(text, start, end, size, overlap, spans)


@pytest.mark.parametrize("size", [100, 250, 1200])
@pytest.mark.parametrize("overlap", [0, 50])
def test_split_span_prefers_paragraph_breaks(size: int, overlap: int) -> None:
    paragraph = "word " * (size // 5 - 4)  # a bit shorter than a chunk
    paragraphs = [paragraph.strip() + f" end{i}." for i in range(4)]
    text = "\n\n".join(paragraphs)
    spans = list(split_span(text, 0, len(text), size, overlap))
    assert [text[s:e] for s, e in spans] == paragraphs


_SENTENCE = st.lists(_WORD, min_size=3, max_size=12).map(" ".join).map(lambda s: s + ".")


@pytest.mark.slow
@PROPERTY
@given(
    st.lists(_SENTENCE, min_size=20, max_size=80),
    st.integers(20, 90),
    st.integers(250, 1000),
    st.booleans(),
)
def test_split_span_ends_at_sentences_even_across_wrapped_lines(
    sentences: list[str], wrap: int, size: int, bullets: bool
) -> None:
    """Text wrapped at a fixed width (PDF lines, hard-wrapped Markdown): a single line
    break says nothing, so a chunk ends where a sentence does, never at a line break in
    the middle of one, while every sentence is shorter than a chunk. A list item's start
    is a boundary too."""
    assume(max(map(len, sentences)) < size * 3 // 4)
    prose = " ".join(f"- {s}" if bullets and i % 3 == 0 else s for i, s in enumerate(sentences))
    text = "\n".join(textwrap.wrap(prose, wrap, break_long_words=False))
    spans = list(split_span(text, 0, len(text), size, size // 6))
    check_spans(text, 0, len(text), size, size // 6, spans)
    assume(len(spans) > 1)
    for _, e in spans:  # (a line starting "12. " reads as a numbered item: a block too)
        item = re.match(r"\s*(- |\d{1,3}\. )", text[e:])
        assert text[e - 1] == "." or item, text[:e][-60:]


def test_a_sentence_longer_than_the_window_is_cut_at_a_space() -> None:
    text = "Short one. " + " ".join(["word"] * 400) + "."
    spans = list(split_span(text, 0, len(text), 300, 0))
    assert text[spans[0][0] : spans[0][1]] != "Short one."  # not a tiny chunk before it
    assert all(0 < e - s <= 300 for s, e in spans)


@pytest.mark.parametrize("overlap", [0, 40, 100])
def test_split_span_cuts_at_sentence_ends(overlap: int) -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(60))
    spans = list(split_span(text, 0, len(text), 200, overlap))
    assert len(spans) > 1
    for s, e in spans:
        assert text[s:e].endswith(".")
        assert text[s:e].startswith("Sentence")


@pytest.mark.parametrize("overlap", [20, 60, 150])
def test_a_chunk_of_records_or_rows_starts_with_a_whole_one(overlap: int) -> None:
    """A spreadsheet's records and a table's rows hold no sentence end: a chunk's overlap
    starts at a record or a row, or not at all, never in the middle of one ("5.4;
    Sepal.Width: 3.9", its first value's name lost)."""
    records = "\n\n".join(
        f"Sepal.Length: {i / 10:.1f}; Sepal.Width: 3.{i % 10}; Species: setosa" for i in range(40)
    )
    rows = "\n".join(f"| {i} | row {i} of the table |" for i in range(60))
    for text in (records, rows):
        spans = list(split_span(text, 0, len(text), 300, overlap))
        assert len(spans) > 2
        for s, _ in spans:
            assert s == 0 or text[s - 1] == "\n", repr(text[s : s + 30])


@pytest.mark.parametrize("overlap", [0, 30])
def test_split_span_cuts_between_words(overlap: int) -> None:
    words = [f"w{i:03d}" for i in range(400)]
    text = " ".join(words)
    spans = list(split_span(text, 0, len(text), 120, overlap))
    assert len(spans) > 1
    for s, e in spans:
        assert set(text[s:e].split()) <= set(words)  # no word is cut
    if overlap:
        assert any(s < spans[i][1] for i, (s, _) in enumerate(spans[1:])), "no overlap used"


@pytest.mark.parametrize(("length", "size"), [(101, 100), (1000, 100), (2500, 1200)])
def test_split_span_hard_cuts_a_word_longer_than_the_chunk(length: int, size: int) -> None:
    text = "x" * length
    spans = list(split_span(text, 0, length, size, size // 4))
    assert all(e - s <= size for s, e in spans)
    assert spans[0][0] == 0 and spans[-1][1] == length
    assert all(b[0] <= a[1] for a, b in pairwise(spans))


def test_split_span_of_whitespace_is_nothing() -> None:
    text = "  \n\n\t  "
    assert list(split_span(text, 0, len(text), 100, 10)) == []


# -- chunking: chunk_sections -------------------------------------------------------------

_MD_LINE = st.one_of(
    st.lists(_WORD, min_size=1, max_size=30).map(" ".join),
    st.sampled_from(["# Title", "## Part", "### Deep", "Setext", "=====", "-----", "```", "~~~"]),
    st.just(""),
    st.text(alphabet="xyz", min_size=100, max_size=900),
)
MARKDOWN = st.lists(_MD_LINE, max_size=60).map("\n".join).map(normalize_text)


@PROPERTY
@given(MARKDOWN, _size_and_overlap())
def test_chunk_sections_properties(text: str, size_overlap: tuple[int, int]) -> None:
    size, overlap = size_overlap
    sections = markdown_sections(text)
    chunks = chunk_sections(text, sections, size=size, overlap=overlap)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    starts = [c.char_start for c in chunks]
    assert starts == sorted(set(starts))
    for chunk in chunks:
        assert chunk.content == text[chunk.char_start : chunk.char_end]
        assert 0 < len(chunk.content) <= size
        assert chunk.content == chunk.content.strip()
        expected = embedding_text(None, chunk.section_title, chunk.content)
        assert chunk.content_hash == content_hash(expected)
        assert chunk.token_count is None
        [home] = [s for s in sections if s.start <= chunk.char_start < s.end]
        assert chunk.char_end <= home.end
        assert chunk.section_title == home.title
    # Sections are ordered and disjoint, and together with the chunks lose no text.
    for a, b in pairwise(sections):
        assert a.end <= b.start
    covered = [False] * len(text)
    for chunk in chunks:
        covered[chunk.char_start : chunk.char_end] = [True] * len(chunk.content)
    assert all(covered[i] for i, ch in enumerate(text) if not ch.isspace())


@pytest.mark.parametrize("size", [100, 500, 2000])
def test_short_sections_are_one_chunk_each(size: int) -> None:
    text = "# One\n\nFirst body.\n\n## Two\n\nSecond body.\n\n## Three\n\nThird body."
    sections = markdown_sections(text)
    chunks = chunk_sections(text, sections, size=size, overlap=size // 2)
    assert [c.ordinal for c in chunks] == [0, 1, 2]
    assert [c.section_title for c in chunks] == ["One", "One > Two", "One > Three"]
    assert [c.content for c in chunks] == [
        "# One\n\nFirst body.",
        "## Two\n\nSecond body.",
        "## Three\n\nThird body.",
    ]


def test_a_title_line_before_the_first_heading_opens_the_first_section() -> None:
    """SQLite's pages show their title ("INSERT") in a styled div, not a heading: it
    opens the first section rather than making a chunk of one word. A sentence, or
    more than a line, before the first heading is a section of its own."""
    titled = "INSERT\n\n# 1. Overview\n\nThe INSERT statement comes in three forms."
    sections = markdown_sections(titled)
    assert [(s.start, s.title) for s in sections] == [(0, "1. Overview")]
    chunks = chunk_sections(titled, sections, size=500, overlap=0)
    assert [c.content for c in chunks] == [titled]
    for opening in ("Read this first.", "INSERT\nstatements", "Inserting rows: an overview of"
                    " the three forms of the statement and when each one applies"):  # fmt: skip
        text = f"{opening}\n\n# 1. Overview\n\nThe INSERT statement comes in three forms."
        assert [s.title for s in markdown_sections(text)] == [None, "1. Overview"]


def test_chunks_keep_the_section_page() -> None:
    text = "page one text\n\npage three text"
    sections = [Section(0, 13, None, 1), Section(15, len(text), None, 3)]
    chunks = chunk_sections(text, sections, size=100, overlap=0)
    assert [(c.content, c.page) for c in chunks] == [("page one text", 1), ("page three text", 3)]


def test_long_markdown_section_is_split_under_its_title(tmp_path: Path) -> None:
    body = "\n\n".join(
        f"Paragraph {i} explains step {i} of the installation in plain words." for i in range(30)
    )
    path = write(
        tmp_path / "guide.md", f"# Guide\n\nIntro.\n\n## Install\n\n{body}\n\n## Use\n\nUse it.\n"
    )
    settings = Settings.load(rag={"chunk_by": "chars", "chunk_size": 300, "chunk_overlap": 50})
    with Tether(db=tmp_path / "small.db", settings=settings) as t:
        [result] = t.add(path)
        chunks = t.chunks(result.document_id)
    text = load_path(path).text
    install = [c for c in chunks if c.section_title == "Guide > Install"]
    assert len(install) >= 5
    assert [c.section_title for c in chunks] == (
        ["Guide"] + ["Guide > Install"] * len(install) + ["Guide > Use"]
    )
    for chunk in chunks:
        assert len(chunk.content) <= 300
        assert chunk.content == text[chunk.char_start : chunk.char_end]
    for i in range(30):
        assert any(f"Paragraph {i} explains" in c.content for c in install)
    assert result.chunk_count == len(chunks)


@pytest.mark.parametrize(
    ("counter", "expected"),
    [
        (lambda s: len(s.split()), lambda content: len(content.split())),
        (len, len),
        (lambda s: None, lambda content: None),
    ],
    ids=["words", "chars", "none"],
)
def test_token_counts_are_stored(
    tmp_path: Path,
    counter: Callable[[str], int] | None,
    expected: Callable[[str], int | None],
) -> None:
    body = "\n\n".join(f"Line {i} has a few more words in it." for i in range(40))
    path = write(tmp_path / "doc.md", f"# Doc\n\n{body}\n")
    settings = Settings.load(rag={"chunk_size": 200, "chunk_overlap": 20})
    with Tether(db=tmp_path / "tok.db", settings=settings, count_tokens=counter) as t:
        [result] = t.add(path)
        [text_result] = t.add(text="Four words right here.", title="Note")
        chunks = t.chunks(result.document_id) + t.chunks(text_result.document_id)
    assert len(chunks) > 2
    assert [c.token_count for c in chunks] == [expected(c.content) for c in chunks]


def test_token_counts_default_to_the_packaged_tokenizer_with_embeddings_off(
    tmp_path: Path,
) -> None:
    """No embedder (the suite runs with embeddings off), yet the packaged model's
    tokenizer is installed: chunks get its WordPiece counts, which the context budget uses."""
    from tether.embed import TokenCounter, resolve_model_path

    wordpiece = TokenCounter(resolve_model_path())
    path = write(tmp_path / "doc.md", "# Doc\n\nTokenization splits unbelievably long words.\n")
    with Tether(db=tmp_path / "tok.db", settings=Settings.load()) as t:
        assert t.embedder is None
        [result] = t.add(path)
        chunks = t.chunks(result.document_id)
    counts = [c.token_count for c in chunks]
    assert counts == [wordpiece(c.content) for c in chunks]
    # WordPiece splits rare words: more tokens than words, so this is not a word count.
    assert all(
        n is not None and n > len(c.content.split()) for n, c in zip(counts, chunks, strict=True)
    )


# -- hash skip / replace ------------------------------------------------------------------


def chunk_ids(t: Tether, document_id: str) -> list[int]:
    return [c.id for c in t.chunks(document_id)]


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("a.md", "# Title\n\nSome body text about gyroscopes.\n"),
        ("a.txt", "Some body text about gyroscopes.\n"),
        ("a.html", "<title>T</title><h1>Title</h1><p>Some body text about gyroscopes.</p>"),
    ],
)
def test_adding_the_same_file_twice_is_skipped(
    tether: Tether, tmp_path: Path, name: str, content: str
) -> None:
    path = write(tmp_path / name, content)
    [first] = tether.add(path)
    ids = chunk_ids(tether, first.document_id)
    [second] = tether.add(str(path))
    assert first.status == "indexed"
    assert second.status == "skipped"
    assert second.document_id == first.document_id
    assert second.chunk_count == first.chunk_count == len(ids)
    assert chunk_ids(tether, first.document_id) == ids
    assert len(tether.documents()) == 1


def test_adding_the_same_pdf_twice_is_skipped(tether: Tether, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "m.pdf", [page_text(w) for w in PAGE_WORDS])
    [first] = tether.add(pdf)
    ids = chunk_ids(tether, first.document_id)
    [second] = tether.add(pdf)
    assert (second.status, second.document_id) == ("skipped", first.document_id)
    assert chunk_ids(tether, first.document_id) == ids


def test_changed_file_is_replaced(tether: Tether, tmp_path: Path) -> None:
    path = write(tmp_path / "notes.md", "# Notes\n\nThe old text mentions walruses.\n")
    [first] = tether.add(path)
    write(path, "# Notes\n\nThe new text mentions narwhals.\n\n## More\n\nAnd penguins.\n")
    [second] = tether.add(path)
    assert second.status == "replaced"
    assert second.document_id == first.document_id
    chunks = tether.chunks(first.document_id)
    assert second.chunk_count == len(chunks) == 2
    assert [c.content for c in chunks] == [
        "# Notes\n\nThe new text mentions narwhals.",
        "## More\n\nAnd penguins.",
    ]
    assert search_texts(tether, "walruses") == []
    assert search_texts(tether, "narwhals") == ["# Notes\n\nThe new text mentions narwhals."]
    assert len(tether.documents()) == 1
    assert tether.get_document(first.document_id).content_hash == content_hash(load_path(path).text)


ORIGINAL = "# Notes\n\nLine one.\nLine two.\n\nLine three."


@pytest.mark.parametrize(
    "variant",
    [
        ORIGINAL.replace("\n", "\r\n"),
        ORIGINAL.replace("\n", "\r"),
        ORIGINAL.replace("\n", "   \n") + "  \t",
        ORIGINAL + "\n\n\n\n",
        "\n\n" + ORIGINAL,
        ORIGINAL.replace("\n\n", "\n\n\n\n"),
        "\ufeff" + ORIGINAL,
    ],
    ids=["crlf", "cr", "trailing-space", "trailing-lines", "leading-lines", "blank-runs", "bom"],
)
def test_whitespace_only_changes_are_skipped(tether: Tether, tmp_path: Path, variant: str) -> None:
    path = write(tmp_path / "notes.md", ORIGINAL)
    [first] = tether.add(path)
    ids = chunk_ids(tether, first.document_id)
    write(path, variant)
    [second] = tether.add(path)
    assert (second.status, second.document_id) == ("skipped", first.document_id)
    assert chunk_ids(tether, first.document_id) == ids


def test_adding_the_same_text_twice_is_skipped(tether: Tether) -> None:
    [first] = tether.add(text="A note about barometers.", title="Note")
    [second] = tether.add(text="A note about barometers.\r\n  ", title="Note")
    assert first.status == "indexed"
    assert (second.status, second.document_id) == ("skipped", first.document_id)
    chunks = tether.chunks(first.document_id)
    # The same text under a new title: the title follows, nothing is re-chunked.
    [renamed] = tether.add(text="A note about barometers.", title="Barometer note")
    assert (renamed.status, renamed.document_id) == ("updated", first.document_id)
    assert tether.get_document(first.document_id).title == "Barometer note"
    assert tether.chunks(first.document_id) == chunks
    [third] = tether.add(text="A different note about anemometers.", title="Note")
    assert third.status == "indexed" and third.document_id != first.document_id
    assert len(tether.documents()) == 2


def test_text_with_a_document_id_is_replaced(tether: Tether) -> None:
    [first] = tether.add(text="Version one about thermostats.", title="Note", document_id="note-1")
    [same] = tether.add(text="Version one about thermostats.", title="Note", document_id="note-1")
    [second] = tether.add(text="Version two about hygrometers.", title="Note", document_id="note-1")
    assert [r.status for r in (first, same, second)] == ["indexed", "skipped", "replaced"]
    assert {r.document_id for r in (first, same, second)} == {"note-1"}
    assert [c.content for c in tether.chunks("note-1")] == ["Version two about hygrometers."]
    assert search_texts(tether, "thermostats") == []
    assert [d.id for d in tether.documents()] == ["note-1"]


# -- sessions -----------------------------------------------------------------------------


def test_adding_into_a_session_attaches_the_document(tether: Tether, tmp_path: Path) -> None:
    path = write(tmp_path / "a.md", "# A\n\nSession scoped text about lighthouses.\n")
    [result] = tether.add(path, workspace_id="ws", session_id="s1")
    [text_result] = tether.add(text="A text about harbours.", title="T", session_id="s1")
    assert {d.id for d in tether.documents(session_id="s1")} == {
        result.document_id,
        text_result.document_id,
    }
    assert tether.get_document(result.document_id).workspace_id == "ws"
    hits = tether.search("lighthouses", scope="session", session_id="s1")
    assert [h.document_id for h in hits] == [result.document_id]
    tether.create_session("s-other", workspace_id="ws")
    assert tether.documents(session_id="s-other") == []


@pytest.mark.parametrize("create_first", [True, False])
def test_unchanged_file_in_a_second_session_is_skipped_and_attached(
    tether: Tether, tmp_path: Path, create_first: bool
) -> None:
    if create_first:
        tether.create_session("s1", workspace_id="ws")
        tether.create_session("s2", workspace_id="ws")
    path = write(tmp_path / "shared.md", "# Shared\n\nText about sextants.\n")
    [first] = tether.add(path, workspace_id="ws", session_id="s1")
    ids = chunk_ids(tether, first.document_id)
    [second] = tether.add(path, workspace_id="ws", session_id="s2")
    assert second.status == "skipped"
    assert second.document_id == first.document_id
    assert chunk_ids(tether, first.document_id) == ids
    for session in ("s1", "s2"):
        assert [d.id for d in tether.documents(session_id=session)] == [first.document_id]
        hits = tether.search("sextants", scope="session", session_id=session)
        assert [h.document_id for h in hits] == [first.document_id]
    assert tether.get_document(first.document_id).session_ids == ("s1", "s2")
    assert len(tether.documents(workspace_id="ws")) == 1


def test_the_same_file_in_another_workspace_is_another_document(
    tether: Tether, tmp_path: Path
) -> None:
    path = write(tmp_path / "shared.md", "# Shared\n\nText about astrolabes.\n")
    [first] = tether.add(path, workspace_id="ws-a", session_id="a1")
    [second] = tether.add(path, workspace_id="ws-b", session_id="b1")
    assert (first.status, second.status) == ("indexed", "indexed")
    assert first.document_id != second.document_id
    assert [d.id for d in tether.documents(session_id="b1")] == [second.document_id]


def test_a_file_that_loads_too_long_fails_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rag.file_timeout: a file whose loader hangs fails with a clear error; the files
    around it (loaded a few at a time) are indexed."""
    import threading

    from tether.ingest import workers

    release = threading.Event()
    real_load = workers.load_path

    def load(path: Path):  # type: ignore[no-untyped-def]
        if path.name == "stuck.md":
            release.wait(10)  # a parser that hangs
        return real_load(path)

    monkeypatch.setattr(workers, "load_path", load)
    names = ["a.md", "stuck.md", "b.md", "c.md"]
    for name in names:
        (tmp_path / name).write_text(f"# {name}\n\nText of {name} about pumps.\n")
    settings = make_settings(file_timeout=0.5, convert_workers=2)
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        results = t.add([tmp_path / n for n in names], on_error="collect")
        release.set()
        by_name = {Path(r.source).name: r for r in results}
        assert by_name["stuck.md"].status == "failed"
        assert "took longer than 0.5s" in str(by_name["stuck.md"].error)
        assert all(by_name[n].status == "indexed" for n in ("a.md", "b.md", "c.md"))
        assert [Path(r.source).name for r in results] == names  # results keep their order


def test_new_chunk_settings_chunk_unchanged_text_again(tmp_path: Path) -> None:
    """The same text added again after rag.chunk_size (or chunk_overlap) changed is chunked
    with the new settings ("replaced"); with the same settings it is "skipped". Vectors of
    chunk texts that did not change are reused (same hash)."""
    body = "\n\n".join(f"Paragraph {i} is about the centrifuge rotor." for i in range(40))
    path = write(tmp_path / "rotor.md", f"# Rotor\n\n{body}\n")
    db = tmp_path / "chunking.db"
    with Tether(db=db, settings=make_settings(chunk_size=1000, chunk_overlap=100)) as t:
        [first] = t.add(path)
        assert [r.status for r in t.add(path)] == ["skipped"]
        wide = len(t.chunks(first.document_id))
    with Tether(db=db, settings=make_settings(chunk_size=300, chunk_overlap=0)) as t:
        [second] = t.add(path)
        assert (second.status, second.document_id) == ("replaced", first.document_id)
        narrow = t.chunks(first.document_id)
        assert len(narrow) > wide and max(c.char_end - c.char_start for c in narrow) <= 300
        assert [r.status for r in t.add(path)] == ["skipped"]
        t.store.fts_integrity_check()


def test_pdf_manual_chunks_fit_the_embedders_window(tmp_path: Path) -> None:
    """A real PDF manual, embedded by a model with all-MiniLM-L6-v2's window: every text
    sent to the embedder (chunk and context header) fits 256 tokens with the model's
    [CLS]/[SEP], and every chunk keeps its page."""
    from tether.embed.local import packaged_token_counter
    from tether.testing import HashEmbedder

    counter = packaged_token_counter()
    assert counter is not None

    class MiniLMWindow(HashEmbedder):
        max_tokens = 256

    sentence = "Check the impeller clearance (0.35-0.50 mm) before restarting pump P-{i}."
    pages = [" ".join(sentence.format(i=p * 100 + i) for i in range(25)) for p in range(4)]
    path = make_pdf(tmp_path / "manual.pdf", pages, title="Pump manual")
    embedder = MiniLMWindow()
    with Tether(db=tmp_path / "t.db", embedder=embedder, count_tokens=counter) as t:
        [result] = t.add(path)
        chunks = t.chunks(result.document_id)
    assert len(chunks) > len(pages)
    assert {c.page for c in chunks} == {1, 2, 3, 4}
    counts = counter.count_many(embedder.embedded_texts)
    assert max(n or 0 for n in counts) + 2 <= 256
    assert all(c.token_count == counter(c.content) for c in chunks)


def test_document_text_reads_the_documents_text_back_from_its_chunks(tmp_path: Path) -> None:
    """Overlapping chunks are read once; the words and their order are the document's."""
    text = "\n\n".join(
        f"Paragraph {i}: the valve seat of pump {i} is checked, then the seal is replaced."
        for i in range(12)
    )
    with Tether(
        db=tmp_path / "t.db", settings=make_settings(chunk_size=120, chunk_overlap=40)
    ) as t:
        [result] = t.add(text=text, title="Pumps")
        assert len(t.chunks(result.document_id)) > 5
        assert t.document_text(result.document_id).split() == text.split()


@pytest.mark.parametrize("field", ["text", "title"])
def test_a_text_source_that_is_not_text_is_a_typed_error(field: str) -> None:
    values = {"text": "Some text.", "title": "A title", field: None}
    with pytest.raises(InvalidArgument, match=f"TextSource.{field} must be str, not NoneType"):
        TextSource(**values)  # type: ignore[arg-type]


def test_adding_a_folder_adds_the_files_under_it_that_tether_reads(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    (folder / "deep").mkdir(parents=True)
    (folder / ".cache").mkdir()
    (folder / "a.md").write_text("# Pump\n\nReplace the seal every spring.\n")
    (folder / "deep" / "b.txt").write_text("The valve opens at two bar.\n")
    (folder / ".cache" / "c.md").write_text("# Hidden\n\nNot indexed.\n")
    (folder / "tool.exe").write_bytes(b"MZ\x90\x00")
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        results = t.add(folder, workspace_id="w")
        assert sorted(Path(r.source).name for r in results) == ["a.md", "b.txt"]
        assert {r.status for r in results} == {"indexed"}
        assert {r.status for r in t.add(str(folder), workspace_id="w")} == {"skipped"}
        (tmp_path / "empty").mkdir()
        with pytest.raises(InvalidArgument, match="folder without a file of a format"):
            t.add(tmp_path / "empty")


def test_text_in_memory_is_prepared_in_the_calling_thread(
    tether: Tether, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files load in the helper threads (a stuck one can be given up on); text given in
    memory is normalized and chunked in the calling thread, where helper threads would
    only contend for the interpreter lock with the writer. Both are indexed, in order."""
    import threading

    from tether.ingest.indexer import Indexer

    where: dict[str, str] = {}
    real = Indexer._prepare

    def prepare(self, source, placement, loaders, known=None):  # type: ignore[no-untyped-def]
        where[source.label] = threading.current_thread().name
        return real(self, source, placement, loaders, known)

    monkeypatch.setattr(Indexer, "_prepare", prepare)
    files = [write(tmp_path / f"f{i}.md", f"# F{i}\n\nThe sextant note {i}.\n") for i in range(2)]
    notes = [TextSource(f"The sextant memo {i}.", f"memo {i}") for i in range(2)]
    results = tether.add([files[0], notes[0], files[1], notes[1]])
    assert [r.status for r in results] == ["indexed"] * 4
    assert [r.source for r in results] == [str(files[0]), "memo 0", str(files[1]), "memo 1"]
    caller = threading.current_thread().name
    assert where["memo 0"] == where["memo 1"] == caller
    assert all(where[str(f)] != caller for f in files)
    assert len(tether.search("sextant", scope="global")) == 4


def test_html_pre_blocks_become_fenced_code(tmp_path: Path) -> None:
    markup = (
        "<h1>Guide</h1><p>Undo the rebase with</p>"
        "<div class='literalblock'><pre><code>git rebase --abort</code></pre></div>"
        "<pre>  A---B topic\n /\nD---E master\n</pre>"
        "<pre>a ``` fence inside</pre><pre>   </pre><p>Done.</p>"
    )
    text = load_path(write(tmp_path / "page.html", markup)).text
    assert "Undo the rebase with\n\n```\ngit rebase --abort\n```" in text
    assert "```\n  A---B topic\n /\nD---E master\n```" in text  # indentation kept
    assert "````\na ``` fence inside\n````" in text  # a fence longer than any inside
    assert text.count("```\n```") == 0  # an empty block leaves no fences
    assert text.rstrip().endswith("Done.")


def test_html_pre_that_reads_as_prose_stays_prose(tmp_path: Path) -> None:
    letter = (
        "Hello team,\n\nThe quarterly report is attached. Please read the summary before"
        " Friday's meeting, and send me your comments.\nI will merge them into the final"
        " version. Thanks for your help with the numbers this quarter.\n\nBest regards, Ana"
    )
    session = (
        "$ git switch --detach v2.6.17\nNote: checking out 'v2.6.17'.\n\nYou are in"
        " 'detached HEAD' state. You can look around, make experimental changes and"
        " commit them. Nothing you commit here is kept when you switch back."
    )
    text = load_path(write(tmp_path / "mail.html", f"<pre>{letter}</pre><pre>{session}</pre>")).text
    assert "```" + "\nHello" not in text and text.startswith("Hello team,")
    assert "```\n$ git switch --detach v2.6.17" in text  # a terminal session is code


def test_html_marker_like_characters_in_a_page_open_no_fence(tmp_path: Path) -> None:
    # U+E002/U+E003 are icon-font glyphs on real pages; an unclosed <pre> is cut-off HTML.
    markup = (
        "<p>Warning <i>&#xe002;</i></p><h2>Setup</h2><p>Install it.</p>"
        "<pre>make install &#xe003; now</pre><p>Done.</p><pre>make test"
    )
    text = load_path(write(tmp_path / "page.html", markup)).text
    assert "```\nmake install  now\n```" in text
    assert "## Setup" in text and "\ue002" not in text and "\ue003" not in text
    assert text.rstrip().endswith("make test") and text.count("```") == 2


def test_one_add_that_names_a_document_twice_keeps_the_later_version(tether: Tether) -> None:
    """New documents of a group are stored together; one that names the same id, source or
    content as an earlier one of the same call is stored after it, as a later add would."""
    results = tether.add(
        [
            TextSource("Version one about thermostats.", "Note", document_id="note-1"),
            TextSource("A note about barometers.", "Barometers"),
            TextSource("Version two about hygrometers.", "Note", document_id="note-1"),
            TextSource("A note about barometers.", "Barometers"),
            TextSource("Anemometers measure wind.", "Wind", source="wind.txt"),
            TextSource("Anemometers measure wind speed.", "Wind", source="wind.txt"),
            TextSource("   ", "Empty"),
            TextSource("A note about pluviometers.", "Rain"),
        ],
        on_error="collect",
    )
    statuses = ["indexed", "indexed", "replaced", "skipped", "indexed", "replaced", "failed"]
    assert [r.status for r in results] == [*statuses, "indexed"]
    assert results[3].document_id == results[1].document_id
    assert [c.content for c in tether.chunks("note-1")] == ["Version two about hygrometers."]
    [wind] = [d for d in tether.documents() if d.title == "Wind"]
    assert [c.content for c in tether.chunks(wind.id)] == ["Anemometers measure wind speed."]
    assert sorted(d.title for d in tether.documents()) == ["Barometers", "Note", "Rain", "Wind"]
    tether.store.fts_integrity_check()


def test_documents_stored_together_keep_each_chunk_with_its_own_vector(tmp_path: Path) -> None:
    """The chunks of a group are numbered in one go and their vectors stored beside them:
    each stored vector is the embedding of its own chunk's text."""
    import numpy as np

    from tether.testing import HashEmbedder

    embedder = HashEmbedder()
    with Tether(db=tmp_path / "t.db", embedder=embedder) as t:
        t.add(text="An old note about sextants.", title="Old")
        t.delete_document(t.documents()[0].id)  # a freed chunk id: numbering goes past it
        words = ["astrolabe", "bathyscaphe", "chronometer", "dirigible", "ephemeris"]
        sources = [
            TextSource(" ".join([f"The {w} {i}."] * 40 * (1 + i % 3)), f"{w.title()} {i}")
            for i, w in enumerate(words * 6)
        ]
        assert all(r.status == "indexed" for r in t.add(sources))
        with t.store.db.read() as conn:
            rows = conn.execute(
                "SELECT c.content, c.section_title, d.title, e.vector FROM rag_chunks c"
                " JOIN rag_documents d ON d.id = c.document_id"
                " JOIN rag_embeddings e ON e.chunk_id = c.id ORDER BY c.id"
            ).fetchall()
        assert len(rows) == t.store.counts()["rag_chunks"] > len(sources)
        for content, section, title, blob in rows:
            expected = embedder.embed_batch([embedding_text(title, section, content)])[0]
            stored = np.frombuffer(blob, dtype="<f4")
            assert np.allclose(stored / np.linalg.norm(stored), expected / np.linalg.norm(expected))
