"""Data and markup files: JSON (and JSON Lines), XML, reStructuredText and RTF, written as
real files in tmp_path and read through the format table, hostile ones included (a
billion laughs, an external entity, a 100,000-deep JSON array, an ``.. include::`` of
/etc/passwd)."""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path

import pytest

from tether import EmptyDocument, UnreadableFile
from tether.ingest import LoadedDocument, load_path, normalize_text
from tether.ingest.formats import data


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def titled(doc: LoadedDocument) -> list[tuple[str | None, str]]:
    """Each section's title and text; the text is normalized and the sections cover it
    in order."""
    assert normalize_text(doc.text) == doc.text
    assert all(a.end <= b.start for a, b in zip(doc.sections, doc.sections[1:], strict=False))
    assert doc.sections[-1].end <= len(doc.text)
    return [(s.title, doc.text[s.start : s.end].strip()) for s in doc.sections]


# -- JSON ---------------------------------------------------------------------------------


def test_a_json_object_is_a_section_per_top_level_key_with_flattened_lines(
    tmp_path: Path,
) -> None:
    config = {
        "name": "harbour-light",
        "server": {"host": "lamp.example.org", "ports": [80, 443], "tls": True, "proxy": None},
        "keepers": [{"name": "Ana", "shifts": ["night"]}, {"name": "Ben", "shifts": []}],
    }
    doc = load_path(write(tmp_path / "config.json", json.dumps(config, indent=2)))
    assert doc.title == "config" and doc.mime == "application/json"
    assert titled(doc) == [
        ("name", "name: harbour-light"),
        (
            "server",
            "server.host: lamp.example.org\nserver.ports: 80, 443\nserver.tls: true\n"
            "server.proxy: null",
        ),
        # A list of objects: a section per object.
        ("keepers 1", "keepers.name: Ana\nkeepers.shifts: night"),
        ("keepers 2", "keepers.name: Ben"),
    ]


def test_a_json_list_is_a_section_per_item(tmp_path: Path) -> None:
    items = [{"id": 1, "text": "fog horn"}, {"id": 2, "text": "lamp oil"}, "a bare note"]
    doc = load_path(write(tmp_path / "items.json", json.dumps(items)))
    assert titled(doc) == [
        ("item 1", "id: 1\ntext: fog horn"),
        ("item 2", "id: 2\ntext: lamp oil"),
        ("item 3", "a bare note"),
    ]


def test_a_list_of_objects_under_a_key_is_a_section_per_object(tmp_path: Path) -> None:
    page = {
        "items": [{"sku": "S2", "price": 39}, {"sku": "S3", "price": 59}],
        "total": 2,
        "tags": ["lamp", "oil"],  # a list of values stays one line
    }
    doc = load_path(write(tmp_path / "page.json", json.dumps(page)))
    assert titled(doc) == [
        ("items 1", "items.sku: S2\nitems.price: 39"),
        ("items 2", "items.sku: S3\nitems.price: 59"),
        ("total", "total: 2"),
        ("tags", "tags: lamp, oil"),
    ]


def test_json_lines_are_a_section_per_line_and_a_damaged_line_is_skipped_with_a_warning(
    tmp_path: Path,
) -> None:
    lines = '{"event": "lit", "at": "dusk"}\n\n{"event": "trimmed"\n{"event": "out"}\n'
    doc = load_path(write(tmp_path / "log.jsonl", lines))
    assert titled(doc) == [("line 1", "event: lit\nat: dusk"), ("line 4", "event: out")]
    assert doc.metadata["warnings"] == ["1 lines are not valid JSON and were skipped (3)"]


def test_json_records_past_the_limit_are_left_out_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "MAX_RECORDS", 2)
    doc = load_path(write(tmp_path / "log.ndjson", "\n".join(f'{{"n": {n}}}' for n in range(5))))
    assert [s.title for s in doc.sections] == ["line 1", "line 2"]
    assert doc.metadata["warnings"] == ["only the first 2 records were read"]


@pytest.mark.parametrize(
    "content",
    [
        "[" * 100_000 + "]" * 100_000,  # past the parser's own recursion limit
        "[" * 60 + "1" + "]" * 60,  # parses, but nests past MAX_DEPTH
        '{"a": ',
    ],
    ids=["100k-deep", "past-the-depth-limit", "damaged"],
)
def test_deep_or_damaged_json_is_unreadable_not_a_crash(tmp_path: Path, content: str) -> None:
    # Garbage of earlier tests is collected here, not a hundred thousand frames deep inside
    # the parser, where a finalizer would hit the recursion limit and be "unraisable".
    gc.collect()
    with pytest.raises(UnreadableFile):
        load_path(write(tmp_path / "bad.json", content))


def test_json_with_no_text_is_an_empty_document(tmp_path: Path) -> None:
    with pytest.raises(EmptyDocument):
        load_path(write(tmp_path / "empty.json", '{"a": {}, "b": []}'))


# -- XML ----------------------------------------------------------------------------------


CATALOG = """<?xml version="1.0" encoding="UTF-8"?>
<catalog xmlns="urn:example:catalog">
  <title>Harbour Library</title>
  <book id="bk1">
    <title>Keeping the Light</title>
    <author>Ana Ribeiro</author>
    <summary>A long account of a winter spent trimming wicks and polishing the great
    lens of the northern lighthouse, written by the keeper who stayed on alone.</summary>
  </book>
  <book>
    <author>Ben Okafor</author>
  </book>
</catalog>
"""


def test_xml_is_a_section_per_child_of_the_root_with_names_as_context(tmp_path: Path) -> None:
    doc = load_path(write(tmp_path / "catalog.xml", CATALOG))
    assert doc.title == "Harbour Library" and doc.mime == "application/xml"
    sections = titled(doc)
    assert [title for title, _ in sections] == ["title 1", "book: Keeping the Light", "book 3"]
    assert sections[1][1].startswith("book: id=bk1\ntitle: Keeping the Light\nauthor: Ana")
    assert "trimming wicks and polishing the great\nlens" in sections[1][1]
    assert sections[2][1] == "author: Ben Okafor"


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<lolz>&lol9;</lolz>
"""
EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE note [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<note>&secret;</note>
"""


@pytest.mark.parametrize("content", [BILLION_LAUGHS, EXTERNAL_ENTITY], ids=["laughs", "xxe"])
def test_xml_declaring_entities_is_refused_quickly(tmp_path: Path, content: str) -> None:
    started = time.monotonic()
    with pytest.raises(UnreadableFile, match="declares entities"):
        load_path(write(tmp_path / "hostile.xml", content))
    assert time.monotonic() - started < 2


def test_damaged_xml_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFile, match="damaged XML"):
        load_path(write(tmp_path / "cut.xml", "<catalog><book>Half"))


# -- reStructuredText ---------------------------------------------------------------------


GUIDE = """\
============
Keeper Guide
============

:Author: Ana Ribeiro

The guide for new keepers.

Lighting
========

Light the lamp at dusk::

    def light(lamp):
        lamp.wick.trim()
            return lamp

- check the oil
- polish the lens

.. code-block:: console

    $ keeper light --all

>>> lamp.lit
True

Weather
-------

=========  ========
Wind       Action
=========  ========
gale       stay in
calm       paint
=========  ========
"""


def test_rst_sections_are_nested_headings_with_fenced_code_lists_and_table_rows(
    tmp_path: Path,
) -> None:
    doc = load_path(write(tmp_path / "guide.rst", GUIDE))
    assert doc.title == "Keeper Guide" and doc.mime == "text/x-rst"
    sections = titled(doc)
    assert [title for title, _ in sections] == [
        "Keeper Guide",
        "Keeper Guide > Lighting",
        "Keeper Guide > Lighting > Weather",
    ]
    assert "author: Ana Ribeiro" in sections[0][1]
    lighting = sections[1][1]
    # Code is a fenced block, as in Markdown and HTML: kept whole, never a paragraph.
    assert "```\ndef light(lamp):\n    lamp.wick.trim()\n        return lamp\n```" in lighting
    assert "```console\n$ keeper light --all\n```" in lighting
    assert "```pycon\n>>> lamp.lit\nTrue\n```" in lighting
    assert "- check the oil\n- polish the lens" in lighting
    assert sections[2][1] == "Weather\n\nWind | Action\ngale | stay in\ncalm | paint"


def test_rst_cannot_include_files_or_raw_markup(tmp_path: Path) -> None:
    hostile = (
        "Title\n=====\n\nBefore.\n\n.. include:: /etc/passwd\n\n"
        ".. raw:: html\n   :file: /etc/passwd\n\n.. raw:: html\n\n   <script>x</script>\n\n"
        ".. csv-table:: T\n   :file: /etc/passwd\n\nAfter.\n"
    )
    doc = load_path(write(tmp_path / "hostile.rst", hostile))
    assert "root:" not in doc.text and "<script>" not in doc.text
    assert "Before." in doc.text and "After." in doc.text


SPHINX = """\
Lamps
=====

.. py:function:: light(lamp, wick=3)
   :noindex:

   Light *lamp* at dusk.

   .. versionadded:: 2.1
      The *wick* argument.

   .. deprecated:: 3.0

.. py:data:: MAX_LAMPS

   How many lamps one keeper tends. Default: ``12``.

.. toctree::
   :maxdepth: 2

   weather

.. only:: html

   See :func:`~keeper.lamps.light`, :class:`Lamp`, :ref:`the weather <weather>` and
   :confval:`lamp_colour`.

.. seealso:: :mod:`keeper.weather`
"""


def test_rst_sphinx_directives_and_roles_read_as_sphinx_renders_them(tmp_path: Path) -> None:
    """A Sphinx project's sources: an object's description is its signature and its text,
    version notes say what Sphinx prints, build-steering directives are nothing and roles
    are their text. docutils alone dropped each of these directives with its content."""
    doc = load_path(write(tmp_path / "lamps.rst", SPHINX))
    assert doc.text.split("\n\n") == [
        "Lamps",
        "light(lamp, wick=3)",
        "Light lamp at dusk.",
        "Added in version 2.1.",
        "The wick argument.",
        "Deprecated since version 3.0.",
        "MAX_LAMPS",
        "How many lamps one keeper tends. Default: 12.",
        "See light(), Lamp, the weather and\nlamp_colour.",
        "See also: keeper.weather",
    ]
    from docutils.parsers.rst import directives, roles

    assert "py:function" not in directives._directives and "func" not in roles._roles


def test_rst_roles_a_project_defines_and_page_settings_read_as_the_built_page(
    tmp_path: Path,
) -> None:
    """A role only the project's ``conf.py`` defines (``sphinx.ext.extlinks``'
    ``:pypi:``, an ``:issue:`` link) is its text, not raw markup; the page settings Sphinx
    reads from the first fields (``:orphan:``, ``:tocdepth:``) are not text of the page,
    while its other fields are."""
    source = (
        ":orphan:\n:tocdepth: 2\n:Author: Ana Ribeiro\n\nPlugins\n=======\n\n"
        "Install :pypi:`pytest-cov` (see :issue:`the report <1234>`), then :func:`run`.\n\n"
        "Compare :data:`python:doctest.REPORT_UDIFF`, :func:`~python:os.path.join` and"
        " :cpp:class:`std::vector`.\n"
    )
    doc = load_path(write(tmp_path / "plugins.rst", source))
    assert doc.text.split("\n\n") == [
        "author: Ana Ribeiro",
        "Plugins",
        "Install pytest-cov (see the report), then run().",
        # (an intersphinx inventory's name is no part of what the page shows)
        "Compare doctest.REPORT_UDIFF, join() and std::vector.",
    ]
    from docutils.parsers.rst import roles

    assert roles.role.__module__ == "docutils.parsers.rst.roles"  # (the lookup restored)


# -- RTF ----------------------------------------------------------------------------------


def test_a_text_file_that_is_rst_is_read_as_rst_and_plain_text_stays_plain(
    tmp_path: Path,
) -> None:
    """Sphinx ships its sources as ``_sources/<page>.rst.txt`` and Django writes its
    documentation in ``.txt`` files: reStructuredText, whose directives were indexed as
    text ("``.. code-block:: python``" in 32 of the 52 files of pytest's documentation).
    A ``.txt`` file with an underlined heading and two lines of explicit markup, or named
    ``.rst.txt``, is read as reStructuredText; plain text, headings and all, is not."""
    from tether.ingest.formats import reads_as_rst

    django = write(tmp_path / "lamps.txt", SPHINX + "\n.. _weather:\n")
    sphinx_copy = write(tmp_path / "guide.rst.txt", GUIDE)
    notes = write(tmp_path / "notes.txt", "Notes\n=====\n\nThe lamp.. it flickers.\n")
    assert reads_as_rst(django, django.read_bytes())
    assert reads_as_rst(sphinx_copy, b"")
    assert not reads_as_rst(notes, notes.read_bytes())
    doc = load_path(django)
    assert doc.mime == "text/x-rst"
    assert ".. " not in doc.text and "Added in version 2.1." in doc.text
    assert load_path(sphinx_copy).title == "Keeper Guide"
    plain = load_path(notes)
    assert plain.mime == "text/plain" and "The lamp.. it flickers." in plain.text


def test_rst_admonitions_read_with_their_kind_as_rendered(tmp_path: Path) -> None:
    """Sphinx and docutils show a note's kind above it ("Note"); a reader of the text
    should see it too, on the note's first line, as Markdown's admonitions read."""
    source = (
        "Exit codes\n==========\n\n.. note::\n\n    Exit code 5 means no tests ran.\n\n"
        "    See the plugin.\n\n.. warning:: Hot lamp.\n\n"
        ".. admonition:: Keeper's tip\n\n    Trim the wick.\n"
    )
    doc = load_path(write(tmp_path / "codes.rst", source))
    assert doc.text.split("\n\n") == [
        "Exit codes",
        "Note: Exit code 5 means no tests ran.",
        "See the plugin.",
        "Warning: Hot lamp.",
        "Keeper's tip",
        "Trim the wick.",
    ]


def test_a_text_file_with_rst_inline_markup_and_a_long_underline_is_rst(tmp_path: Path) -> None:
    """reStructuredText underlines a title with a run at least as long as it (pytest's
    "Contact channels" over 35 "="), and marks its text with roles, inline literals and
    hyperlink references as often as with directives: 8 of pytest's 52 source files were
    read as plain text, raw markup and all. Plain text with a long underline and single
    backticks stays plain."""
    from tether.ingest.formats import reads_as_rst

    flaky = write(
        tmp_path / "flaky.txt",
        "\nFlaky tests\n-----------\n\nSee :ref:`fixtures` and the `tracker\n"
        "<https://example.org/issues>`_ about ``pytest.mark.flaky``.\n",
    )
    contact = write(
        tmp_path / "contact.txt",
        ".. _`contact`:\n\nContact channels\n===================================\n\n"
        "- `the issue tracker`_ to report bugs.\n\n.. _`the issue tracker`: https://x.org\n",
    )
    shopping = write(
        tmp_path / "shopping.txt",
        "Shopping list\n==================================\n\nRun `make` and `make test`.\n",
    )
    assert reads_as_rst(flaky, flaky.read_bytes()) and reads_as_rst(contact, contact.read_bytes())
    assert not reads_as_rst(shopping, shopping.read_bytes())
    doc = load_path(contact)
    assert doc.mime == "text/x-rst" and doc.text.split("\n\n") == [
        "Contact channels",
        "- the issue tracker to report bugs.",
    ]
    assert load_path(flaky).text == (
        "Flaky tests\n\nSee fixtures and the tracker about pytest.mark.flaky."
    )


def test_rtf_is_its_text_in_one_section(tmp_path: Path) -> None:
    rtf = (
        rb"{\rtf1\ansi\ansicpg1252{\fonttbl\f0\fswiss Helvetica;}\f0\pard "
        rb"The keeper\'92s log: caf\'e9 closed.\par Second line \u8364? euro.\par}"
    )
    doc = load_path(write(tmp_path / "log.rtf", rtf))
    assert doc.title == "log" and doc.mime == "application/rtf"
    assert titled(doc) == [(None, "The keeper’s log: café closed.\nSecond line € euro.")]
