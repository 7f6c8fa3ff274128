"""AsciiDoc (``.adoc``, ``.asciidoc``) as a reader of the rendered page sees it.

The document is rewritten line by line into the Markdown tether reads (its section titles
as ``#`` headings, so they make the sections and each chunk's heading path):

- section titles (``== Install``, or Markdown's ``## Install``, or a two-line title:
  ``Install`` after a blank line, underlined by ``-------`` about as long, as AsciiDoc.py
  documents and man pages written in AsciiDoc have them) become headings, the document
  title (``= Guide``, or ``=====`` under it) the first;
- listing and literal blocks (``----``, ``....``, or longer runs) become fenced code blocks, a
  ``[source,python]`` line giving the language; what is inside is left as written;
- the delimiters of example, sidebar, quote and open blocks (``====``, ``****``,
  ``____``, ``--``) go and their text stays;
- a table (``|===``) is a line per row, its cells joined by ``|``;
- what a reader never sees goes: comments (``//`` and ``////`` blocks), attribute entries
  (``:toc:``), block attributes and anchors (``[NOTE]``, ``[[install]]``), conditional
  directives (``ifdef::...[]``), includes and images;
- a block's title (``.Options``) is its caption, without the dot;
- in a line, a link or a cross reference is its text (``https://example.org[the site]``,
  ``xref:install.adoc[Install]``, ``<<install,Install>>``), and an admonition paragraph
  keeps its label (``NOTE: ...``), as the page shows it.
"""

from __future__ import annotations

import re

from tether.errors import EmptyDocument
from tether.ingest.chunking import markdown_sections
from tether.ingest.loaders import FileBytes, LoadedDocument, decode_text
from tether.text import normalize_text

MIME = "text/asciidoc"
_TITLE = re.compile(r"(={1,6}|#{1,6})[ \t]+(\S.*)")
_ATTRIBUTE_ENTRY = re.compile(r":!?[\w-]+!?:(?:\s.*)?$")
_BLOCK_ATTRIBUTES = re.compile(r"\[(?:\[[^\]]*\]|[^\[\]]*)\]\s*$")
_SOURCE_LANGUAGE = re.compile(r"\[(?:source|listing)?,\s*([\w+#.-]+)")
_DIRECTIVE = re.compile(r"(?:ifn?def|ifeval|endif|include|image|toc)::")
_BLOCK_TITLE = re.compile(r"\.([^\s.].*)$")
_VERBATIM = {"----": "", "....": "text"}
#: A listing or literal block's delimiter: four or more of ``-`` or ``.``.
_VERBATIM_DELIMITER = re.compile(r"-{4,}|\.{4,}")
_PLAIN_DELIMITERS = re.compile(r"(?:={4,}|\*{4,}|_{4,}|--|\+{4,})\s*$")
_TABLE = re.compile(r"[|!,:]===\s*$")
#: A two-line title's underline; its character gives the level (``=`` the document's).
_UNDERLINE = re.compile(r"([=\-~^+])\1+")
_UNDERLINE_LEVELS = {"=": 1, "-": 2, "~": 3, "^": 4, "+": 5}
#: Inline: a URL or a macro with link text, a cross reference, an anchor.
_LINK = re.compile(r"((?:https?|ftp|mailto|link|xref):[^\s\[]*)\[([^\[\]]*)\]")
_CROSS_REFERENCE = re.compile(r"<<[^,<>]+,[ \t]*([^<>]+)>>|<<([^<>]+)>>")
_INLINE_ANCHOR = re.compile(r"\[\[[^\[\]]*\]\]|\[#[\w-]+\]")


def load_asciidoc(file: FileBytes) -> LoadedDocument:
    text = normalize_text(asciidoc_as_markdown(normalize_text(decode_text(file))))
    if not text:
        raise EmptyDocument(str(file.path), "the file has no text")
    sections = markdown_sections(text)
    title = next((s.title.split(" > ")[0] for s in sections if s.title), None)
    return LoadedDocument(title=title or file.stem, text=text, mime=MIME, sections=tuple(sections))


def asciidoc_as_markdown(text: str) -> str:
    """AsciiDoc ``text`` as the Markdown that shows the same (see the module)."""
    out: list[str] = []
    verbatim: str | None = None  # the delimiter of the open listing or literal block
    comment = False
    table: list[list[str]] | None = None  # the open table's lines, as cells
    language = ""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        stripped = line.strip()
        if verbatim is None and not comment and table is None and _underlines(lines, i, out):
            level = _UNDERLINE_LEVELS[stripped[0]]
            out[-1] = f"{'#' * level} {out[-1]}"
            continue
        if verbatim is not None:
            if stripped == verbatim:
                out.append("```")
                verbatim = None
            else:
                out.append(line)
            continue
        if comment:
            comment = not stripped.startswith("////")
            continue
        if stripped.startswith("////"):
            comment = True
            continue
        if _VERBATIM_DELIMITER.fullmatch(stripped):
            verbatim = stripped  # (closed by the same run, however long)
            out.append("```" + (language or _VERBATIM[stripped[:4]]))
            language = ""
            continue
        if _TABLE.match(stripped):
            if table is not None:
                out += _table_rows(table)
            table = [] if table is None else None
            continue
        if table is not None:
            _table_line(table, stripped)
            continue
        source = _SOURCE_LANGUAGE.match(stripped)
        if source or _BLOCK_ATTRIBUTES.match(stripped):
            language = source.group(1) if source else language
            continue
        shown = _shown(line, stripped)
        if shown is not None:
            out.append(shown)
    if verbatim is not None:
        out.append("```")
    return "\n".join(out + (_table_rows(table) if table else []))


def _underlines(lines: list[str], i: int, out: list[str]) -> bool:
    """Whether line ``i`` underlines the line before it into a two-line title: that line
    follows a blank line (or starts the text; anchor and attribute lines between do not
    count), was shown as written, and is about as long (within two characters) as the
    run of one character under it."""
    under = _UNDERLINE.fullmatch(lines[i].strip())
    if under is None or i == 0:
        return False
    above = i - 2  # past the title's anchor and attribute lines ("[[install]]")
    while above >= 0 and _BLOCK_ATTRIBUTES.match(lines[above].strip()):
        above -= 1
    if above >= 0 and lines[above].strip():
        return False
    title = lines[i - 1].strip()
    shown = bool(out) and bool(title) and out[-1] == _inline(lines[i - 1])
    return shown and abs(len(lines[i].strip()) - len(title)) <= 2


def _shown(line: str, stripped: str) -> str | None:
    """What a reader sees of one line outside listings, tables and comments (None:
    nothing)."""
    if stripped.startswith("//") or _ATTRIBUTE_ENTRY.match(stripped):
        return None
    if (_DIRECTIVE.match(stripped) and stripped.endswith("]")) or _PLAIN_DELIMITERS.fullmatch(
        stripped
    ):
        return None
    title = _TITLE.match(line)
    if title:
        marks, text = title.group(1), title.group(2).rstrip()
        if text.endswith(" " + marks):  # a closing run of marks ("== Install ==")
            text = text[: -len(marks)].rstrip()
        return f"{'#' * len(marks)} {_inline(text)}"
    caption = _BLOCK_TITLE.match(line)  # (a block's title is its caption: shown)
    return _inline(caption.group(1) if caption else line)


def _table_line(table: list[list[str]], line: str) -> None:
    """A table line's cells (``|a |b``), or more text of the cell before it."""
    if not line:
        table.append([])  # a blank line: the row's cells end here
    elif line.startswith(("|", "!")):
        table.append([c.strip() for c in re.split(r"(?<!\\)[|!]", line)[1:]])
    elif table and table[-1]:
        table[-1][-1] = f"{table[-1][-1]} {line}".strip()


def _table_rows(table: list[list[str]]) -> list[str]:
    """The table's rows, a line each with its cells joined by " | ": as many cells to a
    row as its first line holds (a row may spread its cells over several lines)."""
    columns = next((len(cells) for cells in table if cells), 0)
    cells = [cell for line in table for cell in line]
    rows = [cells[i : i + columns] for i in range(0, len(cells), columns)] if columns else []
    return ["", *(" | ".join(_inline(c) for c in row if c) for row in rows), ""]


def _inline(text: str) -> str:
    text = _INLINE_ANCHOR.sub("", text)
    text = _LINK.sub(lambda m: m.group(2) or m.group(1).removeprefix("link:"), text)
    return _CROSS_REFERENCE.sub(lambda m: m.group(1) or m.group(2), text)
