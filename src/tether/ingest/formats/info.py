"""GNU Info files (``sed.info``, ``coreutils.info.gz``): the manuals Texinfo builds for
the ``info`` reader, read as the manual's text.

An Info file is plain text in nodes, each after a ``\\x1f`` line and a header naming it and
its neighbours (``File: sed.info,  Node: Overview,  Next: ..., Up: ...``), with a menu of
the nodes below it (``* Menu:`` and ``* Name::`` lines) at its end. This reader keeps the
text and drops the navigation: the headers, the menus, the file's preamble (``This is
sed.info, produced by makeinfo``, its directory entry) and its tag table. A title
underlined by ``*``, ``=``, ``-`` or ``.`` is a chapter, a section, a subsection or a
subsubsection; a cross reference reads as it does in the printed manual (``*Note
Overview::`` is "See Overview", ``*note How sed works: Execution Cycle.`` is "see How sed
works").

A manual Info split into files (``find.info`` names ``find.info-1`` and ``find.info-2``
in an ``Indirect:`` table) keeps its text in those: each is read on its own, and the
main file, which holds none, says which to add.
"""

from __future__ import annotations

import re
from itertools import pairwise

from tether.errors import EmptyDocument
from tether.ingest.formats.data import TextBuilder, _document, one_line
from tether.ingest.loaders import FileBytes, LoadedDocument, decode_text

MIME = "text/x-info"
#: The underline of each level of title, chapters first.
_LEVELS = {"*": 1, "=": 2, "-": 3, ".": 4}
_UNDERLINE = re.compile(r"([*=.-])\1*")
_HEADER = re.compile(r"File: [^,\n]*,\s+Node: ")
#: A cross reference: ``*Note Name::`` or ``*note Label: Node.`` (across a line break).
_REFERENCE = re.compile(r"\*([Nn])ote\s+([^:*]+?)(?:::|:\s+[^.,:*]+?[.,])")


def load_info(file: FileBytes) -> LoadedDocument:
    """An Info file's text (see the module's docstring), its titles as sections."""
    text = decode_text(file)
    nodes = text.split("\x1f")
    indirect = next((n for n in nodes if n.lstrip("\n").startswith("Indirect:")), None)
    builder = TextBuilder()
    title = ""
    for node in nodes[1:]:  # (the first part is the preamble)
        body = node.lstrip("\n")
        if not _HEADER.match(body):
            continue  # the tag table, the indirect table, local variables
        first = _node(body, builder)
        title = title or first or _node_title(body)
    if title == "Top":  # (a manual whose top node has no title: its file's name)
        title = file.stem.removesuffix(".info")
    if not builder and indirect is not None:
        parts = re.findall(r"^(\S+):\s*\d+$", indirect, re.MULTILINE)
        raise EmptyDocument(
            str(file.path),
            f"is the index of a manual split into {', '.join(parts)}: add those files",
        )
    return _document(file, builder, MIME, [], one_line(title))


def _node_title(body: str) -> str:
    """The first title of a node, else its name."""
    lines = body.split("\n")
    for above, below in pairwise(lines[1:]):
        if above.strip() and _UNDERLINE.fullmatch(below.strip()):
            return above.strip()
    found = re.search(r"Node: ([^,\n]+)", lines[0])
    return found.group(1).strip() if found else ""


def _node(body: str, builder: TextBuilder) -> str:
    """Write one node's text (its header and menu left out); its first title."""
    text = body.split("\n", 1)[1] if "\n" in body else ""
    menu = re.search(r"^\* Menu:", text, re.MULTILINE)
    if menu:
        text = text[: menu.start()]
    text = _REFERENCE.sub(_reference, text)
    lines = text.split("\n")
    first = ""
    block: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        below = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if line.strip() and _is_underline(below, line.strip()):
            _write(builder, block)
            builder.heading(line.strip(), _LEVELS[below[0]])
            first = first or line.strip()
            i += 2
            continue
        if line.strip():
            block.append(line)
        else:
            _write(builder, block)
        i += 1
    _write(builder, block)
    return first


def _is_underline(line: str, title: str) -> bool:
    return bool(_UNDERLINE.fullmatch(line)) and abs(len(line) - len(title)) <= 2


def _write(builder: TextBuilder, block: list[str]) -> None:
    if block:
        builder.block("\n".join(block))
        block.clear()


def _reference(match: re.Match[str]) -> str:
    see = "See" if match.group(1) == "N" else "see"
    return f"{see} {' '.join(match.group(2).split())}"
