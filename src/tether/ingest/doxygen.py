"""What Doxygen writes, read as it means it (see :mod:`tether.ingest.html`).

Doxygen, the generator of most C and C++ API references, says so in every page's
``<meta name="generator" content="Doxygen 1.9.4">``, and writes its pages in markup of its
own that a reader of plain HTML gets wrong:

- a code example is a ``<div class="fragment">`` of ``<div class="line">`` elements, not a
  ``<pre>``: read as blocks, each line of code became a paragraph of its own, and a
  chunk could end inside the example;
- each linked name in an example carries a hover card, ``<div class="ttc">`` (the name,
  its declaration, "Definition: SDL_stdinc.h:226"), hidden by the stylesheet, not by an
  attribute: read as text, a copy of every declaration the example names followed it;
- a function's prototype is a ``<table class="memname">``, its return type, its name, "(",
  each parameter and ")" in cells and rows of their own: read as a table, "#define
  SDL_TICKS_PASSED | ( | | A," and "| ) | | ((Sint32)...)" on lines apart;
- lines that point into the source listings, not at what a thing does: "Definition at
  line 106 of file SDL_timer.h.", "Definition in file SDL_timer.h.", "Go to the source
  code of this file.", the captions of the include and collaboration graphs (images),
  and "The documentation for this struct was generated from the following file:" with
  its list of files.

These are read only on pages Doxygen says it made: elsewhere a ``fragment`` class may be
a slide's step (reveal.js), and a paragraph may well begin "Definition".
"""

from __future__ import annotations

import re

_GENERATOR = re.compile(
    r"<meta\s[^>]*name\s*=\s*[\"']generator[\"'][^>]*content\s*=\s*[\"']doxygen\b"
    r"|<meta\s[^>]*content\s*=\s*[\"']doxygen\b[^>]*name\s*=\s*[\"']generator[\"']",
    re.IGNORECASE,
)
#: A page's head is read for the generator's name, up to this many characters.
_HEAD_CHARS = 4096


def made_by_doxygen(markup: str) -> bool:
    """Whether the page's head says Doxygen generated it."""
    return _GENERATOR.search(markup, 0, _HEAD_CHARS) is not None


def _classes(attrs: list[tuple[str, str | None]]) -> set[str]:
    return {c for n, v in attrs if n == "class" for c in (v or "").lower().split()}


def code_fragment(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    """Whether an element is a code example (``<div class="fragment">``)."""
    return tag == "div" and "fragment" in _classes(attrs)


def hover_card(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    """Whether an element is a name's hover card in a code example (``<div class="ttc">``)."""
    return tag == "div" and "ttc" in _classes(attrs)


def prototype(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    """Whether an element is a function's or a macro's prototype (``<table
    class="memname">``), which reads as one line of code."""
    return tag == "table" and "memname" in _classes(attrs)


_SOURCE_REFERENCE = re.compile(
    r"Definition (?:at line \d+ of file|in file) \S+?\.?"
    r"|Go to the source code of this file\.?"
    r"|(?:Include dependency graph|Collaboration diagram|Inheritance diagram|Call graph"
    r"|Caller graph|Dependency graph) (?:for|of) .{1,200}?:"
    r"|This graph shows which files directly or indirectly include this file:"
    r"|Here is the (?:call|caller) graph for this function:"
    r"|The documentation for this \w+ was generated from the following files?:",
    re.IGNORECASE,
)
#: A line that introduces a list of the source files a page was generated from.
_FILE_LIST = re.compile(r"The documentation for this \w+ was generated from", re.IGNORECASE)
_FILE_ITEM = re.compile(r"- [\w./+-]+")


def source_references_dropped(lines: list[str]) -> list[str]:
    """``lines`` without those that point into the source listings (see the module's
    docstring), and without the list of files after "generated from the following
    files:"."""
    kept: list[str] = []
    files = False
    for line in lines:
        if files and (not line or _FILE_ITEM.fullmatch(line)):
            continue
        files = False
        if _SOURCE_REFERENCE.fullmatch(line.strip()):
            files = _FILE_LIST.match(line.strip()) is not None
            continue
        kept.append(line)
    return kept
