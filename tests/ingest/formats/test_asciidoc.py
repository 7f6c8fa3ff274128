"""AsciiDoc: documents written in the tests, loaded through the format table, and indexed
and searched through the real library."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import Tether
from tether.ingest import load_path

GUIDE = """\
= Widget Guide
:toc: left
:icons: font

// a maintainer's note
This guide covers https://example.org/widget[the widget], link:https://example.org/docs[]
and <<install,installing it>>.

[[install]]
== Installation

NOTE: You need root.

[source,bash]
----
sudo apt install widget
// in code, not a comment
----

.Options
[cols="1,2"]
|===
|Option |Meaning

|--fast
|Skip the checks.

|--size
|Size of the
widget.
|===

====
An example block.
====

////
A hidden block.
////

include::partials/footer.adoc[]
image::diagram.png[Diagram]
ifdef::env-github[]

=== On Debian

See xref:debian.adoc[the Debian page].
"""


def test_asciidoc_is_read_as_its_rendered_page(tmp_path: Path) -> None:
    """Section titles are headings (the sections); listings are fenced code in their
    language; tables are a line per row; block delimiters, comments, attributes,
    includes and images go; links and cross references are their text."""
    path = tmp_path / "guide.adoc"
    path.write_text(GUIDE, encoding="utf-8")
    doc = load_path(path)
    assert (doc.title, doc.mime) == ("Widget Guide", "text/asciidoc")
    assert [s.title for s in doc.sections] == [
        "Widget Guide",
        "Widget Guide > Installation",
        "Widget Guide > Installation > On Debian",
    ]
    assert doc.text == (
        "# Widget Guide\n\nThis guide covers the widget, https://example.org/docs\n"
        "and installing it.\n\n## Installation\n\nNOTE: You need root.\n\n"
        "```bash\nsudo apt install widget\n// in code, not a comment\n```\n\nOptions\n\n"
        "Option | Meaning\n--fast | Skip the checks.\n--size | Size of the widget.\n\n"
        "An example block.\n\n### On Debian\n\nSee the Debian page."
    )


def test_two_line_titles_and_long_delimiters_read_as_asciidoc_renders_them(
    tmp_path: Path,
) -> None:
    """AsciiDoc.py's two-line titles (a man page's ``NAME`` over ``----``), with an anchor
    line above them or not, are sections; a listing delimited by a longer run of dashes
    is code (its ``#`` lines are comments, not headings); a rule too long or too short
    for the line above it is no title."""
    source = (
        "A2X(1)\n======\n:doctype: manpage\n\n\nNAME\n----\na2x - a toolchain manager\n\n"
        "[[X2]]\nCONF FILES\n----------\nThe defaults:\n\n"
        "-----------------------------\n# Optional environment\nENV = None\n"
        "-----------------------------\n\nWord\n--------------\n"
    )
    path = tmp_path / "a2x.1.adoc"
    path.write_text(source, "utf-8")
    doc = load_path(path)
    assert doc.title == "A2X(1)"
    assert [s.title for s in doc.sections] == ["A2X(1) > NAME", "A2X(1) > CONF FILES"]
    assert "```\n# Optional environment\nENV = None\n```" in doc.text


def test_an_indexed_asciidoc_file_is_cited_by_its_section(tmp_path: Path) -> None:
    path = tmp_path / "guide.asciidoc"
    path.write_text(GUIDE, encoding="utf-8")
    with Tether(db=tmp_path / "t.db") as t:
        assert [r.status for r in t.add(path)] == ["indexed"]
        hits = t.search("skip the checks fast", scope="global", mode="lexical")
        assert hits and hits[0].section_title == "Widget Guide > Installation"


HOSTILE_LINES = [
    "## a" + " " * 200_000 + "b",
    "## a {" + " " * 200_000 + "}",
    ":::note a" + " " * 200_000 + "b",
    "/// tip | a" + " " * 200_000 + "b",
    "```{note} a" + " " * 200_000 + "b",
    "{{< a" + " " * 200_000 + "b",
    "{{<" * 60_000,
    "a" + " " * 200_000 + "{: .x}",
    "`" * 200_000,
    "`a " * 60_000,
    "``a`" * 50_000,
    "[a]: b" + " " * 200_000 + "c",
    "== a" + " " * 200_000 + "==",
    "<<a,b" * 40_000,
    "[[" * 100_000,
    "include::" + "[" * 200_000,
    "https://x[" * 20_000,
    '=== "a' + " " * 200_000 + "b",
    "*[" + "a" * 200_000,
    "!!! a" + " b" * 100_000 + ' "x',
    "++" + "a+" * 100_000,
    ":material-" + "a-" * 100_000,
    "    /// a |" + " " * 200_000 + "b",
    "{% a" + " " * 200_000 + "b",
    "{%" * 100_000,
]


@pytest.mark.timeout(120)
def test_markup_rewriting_costs_a_pass_over_a_hostile_line(tmp_path: Path) -> None:
    """Markdown and AsciiDoc load in the indexing process, with no worker to kill them:
    each rewriting rule must cost a pass over the line, never a search from every place
    in it. Each line here took hours (or longer) with the first, backtracking rules."""
    from tether.ingest.formats.asciidoc import asciidoc_as_markdown
    from tether.ingest.markup import rendered_markdown

    for line in HOSTILE_LINES:
        assert rendered_markdown(f"# T {{x}}\n{line}\n").startswith("# T")
        assert asciidoc_as_markdown(f"= T\n{line}\n").startswith("# T")
    from tether.ingest.markup import heading_text

    titles = ("**a" * 60_000, "[" * 200_000, "_a " * 60_000, "![a](" * 40_000, "\\*" * 100_000)
    for title in (*titles, "`" * 200_000, "`a" * 100_000, "``a`" * 50_000):
        assert isinstance(heading_text(title), str)
    # Tabs nested a thousand deep: a line costs its length, not its depth times it.
    nested = "\n".join(" " * 4 * i + f'=== "t{i}"' for i in range(1_000))
    assert rendered_markdown(nested + "\n").endswith("t998\nt999\n")
