"""Data and markup files as text: JSON (and JSON Lines), XML, reStructuredText and RTF.

Structured data becomes lines a person (and a search) can read: ``key.sub: value`` for
JSON, ``name: text`` for short XML leaves, each top-level record a section of its own.
Every reader is bounded: a JSON record limit and depth limit (a deeply nested file is an
:class:`~tether.errors.UnreadableFile`, not a crash), XML parsed with defusedxml (no entity
expansion, no external entities), reStructuredText with file inclusion and raw output off
(a hostile ``.. include:: /etc/passwd`` reads nothing).

:class:`TextBuilder` and :func:`parse_xml` are shared with the e-book and mail loaders.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from typing import Any
from xml.etree.ElementTree import Element

from tether.errors import EmptyDocument, UnreadableFile, UnsupportedFileType
from tether.ingest.chunking import Heading, Section, heading_sections
from tether.ingest.loaders import FileBytes, LoadedDocument, decode_text
from tether.ingest.preformatted import fenced
from tether.text import normalize_text

logger = logging.getLogger("tether.ingest")

#: Top-level records (list items, object keys, JSON Lines) read from one file.
MAX_RECORDS = 100_000
#: How deeply JSON may nest; deeper is a damaged or hostile file.
MAX_DEPTH = 50
#: A section title (a JSON key, an XML value) is cut to this many characters.
MAX_TITLE_CHARS = 200
#: An XML leaf's text up to this long is written ``name: text``; longer is a paragraph.
SHORT_TEXT_CHARS = 120
_JSON_LINES = (".jsonl", ".ndjson")


class TextBuilder:
    """A document's text assembled block by block, with the headings that title its
    parts as offsets into the final text (for :func:`heading_sections`).

    Blocks are normalized as they come and joined with a blank line (``tight``: a line
    break), so the joined text is normalized too and no offset moves afterwards. A
    :meth:`mark` titles the next block without adding a line to the text."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._size = 0
        self._headings: list[Heading] = []
        self._marks: list[tuple[str, int]] = []

    def __bool__(self) -> bool:
        return bool(self._parts)

    def block(self, text: str, headings: Sequence[Heading] = (), *, tight: bool = False) -> None:
        """Append ``text``; ``headings`` are offsets into it (then it must be normalized)."""
        if not headings:
            text = normalize_text(text)
        if not text:
            return
        start = self._append(text, "\n" if tight else "\n\n")
        self._headings += [
            Heading(h.start + start, h.body + start, h.level, h.title) for h in headings
        ]

    def heading(self, title: str, level: int) -> None:
        """Append ``title`` as a line of its own that starts a section at ``level``."""
        line = one_line(title)
        if line:
            start = self._append(line, "\n\n")
            self._headings.append(Heading(start, start + len(line) + 1, level, line))

    def mark(self, title: str, level: int) -> None:
        """Start a section titled ``title`` at the next block, adding no text."""
        self._marks.append((one_line(title), level))

    def build(self) -> tuple[str, list[Heading]]:
        """The text and its headings."""
        return "".join(self._parts), list(self._headings)

    def sections(self) -> tuple[str, tuple[Section, ...]]:
        """The text and its sections at the headings."""
        text, headings = self.build()
        return text, tuple(heading_sections(text, headings))

    def _append(self, text: str, separator: str) -> int:
        if self._parts:
            self._parts.append(separator)
            self._size += len(separator)
        start = self._size
        self._headings += [Heading(start, start, level, t) for t, level in self._marks if t]
        self._marks.clear()
        self._parts.append(text)
        self._size += len(text)
        return start


def one_line(text: str) -> str:
    """``text`` as one line, white space collapsed, cut to :data:`MAX_TITLE_CHARS`."""
    line = " ".join(normalize_text(text).split())
    return line if len(line) <= MAX_TITLE_CHARS else line[: MAX_TITLE_CHARS - 1] + "…"


def missing_reader(source: str, what: str, package: str) -> UnsupportedFileType:
    """The error of a format whose reader is not installed."""
    return UnsupportedFileType(
        source, f"reading {what} files needs {package}: pip install 'tether[formats]'"
    )


def parse_xml(data: bytes, source: str, part: str = "") -> Element:
    """The root element of the XML ``data``, parsed with defusedxml: a document declaring
    entities (billion laughs) or external references is refused. Every failure is an
    :class:`UnreadableFile` naming ``source`` (and ``part``, a member of an archive)."""
    try:
        from defusedxml import DefusedXmlException
        from defusedxml.ElementTree import ParseError, fromstring
    except ImportError as exc:
        raise missing_reader(source, "XML", "defusedxml") from exc
    where = f" {part!r}" if part else ""
    try:
        return fromstring(data)
    except DefusedXmlException as exc:
        raise UnreadableFile(source, f"has XML{where} that declares entities: refused") from exc
    except (ParseError, ValueError) as exc:
        raise UnreadableFile(source, f"has damaged XML{where} ({exc})") from exc


def local_name(tag: object) -> str:
    """An XML tag without its namespace (``{urn:x}title`` -> ``title``)."""
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


# -- JSON ---------------------------------------------------------------------------------


def load_json(file: FileBytes) -> LoadedDocument:
    """A JSON document (or JSON Lines) as ``key.sub: value`` lines, a section per record."""
    source = str(file.path)
    text = decode_text(file)
    warnings: list[str] = []
    builder = TextBuilder()
    if file.path.suffix.lower() in _JSON_LINES:
        records = _json_lines(text, source, warnings)
    else:
        records = _json_records(_parse_json(text, source))
    for count, (title, path, value) in enumerate(records):
        if count == MAX_RECORDS:
            warnings.append(f"only the first {MAX_RECORDS:,} records were read")
            logger.warning("%s: %s", source, warnings[-1])
            break
        if title is not None:
            builder.mark(title, 1)
        builder.block("\n".join(_json_lines_of(value, path, source)))
    return _document(file, builder, "application/json", warnings)


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise UnreadableFile(source, "nests too deeply to read (a damaged file?)") from exc
    except ValueError as exc:
        raise UnreadableFile(source, f"is not valid JSON ({exc})") from exc


#: A record: its section title (None: the whole file), the key path its lines start
#: with, its value.
_Record = tuple[str | None, str, Any]


def _json_records(value: Any) -> Iterator[_Record]:
    """Each top-level record: list items ("item N"), object keys, or the whole value. A
    key holding a list of objects (an API's ``{"items": [...], "total": 2}``) is a record
    per object ("items N"), as a list at the top is."""
    if isinstance(value, list):
        yield from ((f"item {n}", "", item) for n, item in enumerate(value, start=1))
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, list) and item and all(isinstance(v, dict) for v in item):
                yield from ((f"{key} {n}", str(key), v) for n, v in enumerate(item, start=1))
            else:
                yield str(key), str(key), item
    else:
        yield None, "", value


def _json_lines(text: str, source: str, warnings: list[str]) -> Iterator[_Record]:
    """Each line's record of JSON Lines ("line N"); damaged lines are skipped, with a
    warning."""
    bad: list[int] = []
    found = False
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except RecursionError as exc:
            raise UnreadableFile(source, f"line {number} nests too deeply to read") from exc
        except ValueError:
            bad.append(number)
            continue
        found = True
        yield f"line {number}", "", record
    if bad and not found:
        raise UnreadableFile(source, f"holds no valid JSON line (line {bad[0]} is not JSON)")
    if bad:
        shown = ", ".join(map(str, bad[:10])) + (", …" if len(bad) > 10 else "")
        warnings.append(f"{len(bad)} lines are not valid JSON and were skipped ({shown})")


def _json_lines_of(value: Any, path: str, source: str) -> Iterator[str]:
    """``value`` as ``path: value`` lines, walked without recursion; objects in a list are
    blocks of their own (a blank line between them)."""
    pending: list[tuple[str, Any, int] | None] = [(path, value, 0)]  # None: a blank line
    while pending:
        entry = pending.pop()
        if entry is None:
            yield ""
            continue
        key, item, depth = entry
        if depth > MAX_DEPTH:
            raise UnreadableFile(source, f"nests deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            children = [(_joined(key, str(k)), v, depth + 1) for k, v in item.items()]
            pending += reversed(children)
        elif isinstance(item, list) and any(isinstance(v, dict | list) for v in item):
            blocks: list[tuple[str, Any, int] | None] = []
            for v in item:
                blocks += [None, (key, v, depth + 1)] if blocks else [(key, v, depth + 1)]
            pending += reversed(blocks)
        elif isinstance(item, list):
            if item:
                yield _line(key, ", ".join(_scalar(v) for v in item))
        else:
            yield _line(key, _scalar(item))


def _joined(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _line(key: str, value: str) -> str:
    return f"{key}: {value}" if key else value


def _scalar(value: object) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return str(value)


def _document(
    file: FileBytes, builder: TextBuilder, mime: str, warnings: list[str], title: str = ""
) -> LoadedDocument:
    text, sections = builder.sections()
    if not text:
        raise EmptyDocument(str(file.path), "the file has no text")
    return LoadedDocument(
        title=title or file.stem,
        text=text,
        mime=mime,
        sections=sections,
        metadata={"warnings": warnings} if warnings else {},
    )


# -- XML ----------------------------------------------------------------------------------


def load_xml(file: FileBytes) -> LoadedDocument:
    """An XML document's text, short leaves as ``name: text``, a section per child of the
    root when it has several."""
    root = parse_xml(file.data, str(file.path))
    builder = TextBuilder()
    children = list(root)
    if len(children) > 1:
        builder.block(root.text or "")
        for ordinal, child in enumerate(children, start=1):
            builder.mark(_xml_title(child, ordinal), 1)
            builder.block("\n".join(_xml_lines(child)))
            builder.block(child.tail or "")
    else:
        builder.block("\n".join(_xml_lines(root)))
    title = _child_text(root, "title") or ""
    return _document(file, builder, "application/xml", [], one_line(title))


def _xml_lines(element: Element) -> Iterator[str]:
    """The text under ``element`` in document order, walked without recursion."""
    pending: list[Element | str] = [element]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            yield item
            continue
        text = _xml_text(item.text)
        attributes = ", ".join(f"{local_name(k)}={v}" for k, v in item.attrib.items())
        name = local_name(item.tag)
        if len(item) == 0 and text and len(text) <= SHORT_TEXT_CHARS and "\n" not in text:
            yield f"{name}: {text}"
            continue
        if attributes:
            yield f"{name}: {attributes}"
        if text:
            yield f"\n{text}\n"  # long text: a paragraph of its own
        after: list[Element | str] = []
        for child in item:
            after.append(child)
            if tail := _xml_text(child.tail):
                after.append(tail)
        pending += reversed(after)


def _xml_text(text: str | None) -> str:
    """Text of an XML document without the indentation of its source lines."""
    return "\n".join(line.strip() for line in (text or "").strip().splitlines())


def _xml_title(element: Element, ordinal: int) -> str:
    """A section's title: its element's name and title, name or id, else its position."""
    name = local_name(element.tag)
    for key in ("title", "name", "id"):
        value = element.get(key) or _child_text(element, key)
        if value:
            return f"{name}: {value}"
    return f"{name} {ordinal}"


def _child_text(element: Element, name: str) -> str | None:
    """The text of ``element``'s first child leaf called ``name``."""
    for child in element:
        if local_name(child.tag) == name and len(child) == 0 and (child.text or "").strip():
            return one_line(child.text or "")
    return None


# -- reStructuredText ---------------------------------------------------------------------

#: No file inclusion (``include``, ``csv-table :file:``), no raw output, no configuration
#: files read, and no message printed or raised however broken the markup is.
_RST_SETTINGS = {
    "report_level": 5,
    "halt_level": 5,
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "input_encoding": "unicode",
    "_disable_config": True,
}


def load_rst(file: FileBytes) -> LoadedDocument:
    """A reStructuredText document: section titles as nested headings, paragraphs,
    literal and doctest blocks as fenced code blocks (in the language a ``code-block``
    names), list items and table rows as lines; Sphinx's directives
    and roles as Sphinx renders them (:mod:`tether.ingest.formats.sphinx`)."""
    source = str(file.path)
    try:
        from docutils import ApplicationError
        from docutils.core import publish_doctree
        from docutils.utils import SystemMessage
    except ImportError as exc:
        raise missing_reader(source, "reStructuredText", "docutils") from exc
    from tether.ingest.formats.sphinx import sphinx_markup

    try:
        with sphinx_markup():
            document = publish_doctree(decode_text(file), settings_overrides=_RST_SETTINGS)
    except (ApplicationError, SystemMessage, RecursionError, ValueError) as exc:
        raise UnreadableFile(source, f"is reStructuredText docutils cannot read ({exc})") from exc
    builder = TextBuilder()
    _RstWriter(builder).write(document)
    _, headings = builder.build()
    title = str(document.get("title") or next((h.title for h in headings), ""))
    return _document(file, builder, "text/x-rst", [], one_line(title))


class _RstWriter:
    """Writes a docutils doctree into a :class:`TextBuilder`, without recursion."""

    def __init__(self, builder: TextBuilder) -> None:
        from docutils import nodes

        self.nodes = nodes
        self.builder = builder

    def write(self, document: Any) -> None:
        nodes = self.nodes
        titled = any(isinstance(child, nodes.title) for child in document.children)
        pending = [(child, 1 if titled else 0) for child in reversed(document.children)]
        while pending:
            node, level = pending.pop()
            pending += reversed(self._node(node, level))

    def _node(self, node: Any, level: int) -> list[tuple[Any, int]]:
        """Write ``node``'s own text; the children still to write, at their level."""
        nodes, builder = self.nodes, self.builder
        if isinstance(node, _rst_skipped(nodes)) or "contents" in node.get("classes", ()):
            return []
        if isinstance(node, nodes.section):
            return [(child, level + 1) for child in node.children]
        if isinstance(node, nodes.title) and isinstance(
            node.parent, nodes.section | nodes.document
        ):
            builder.heading(node.astext(), max(level, 1))
        elif isinstance(node, nodes.list_item):
            return self._list_item(node, level)
        elif isinstance(node, nodes.Admonition) and not isinstance(node, nodes.admonition):
            return self._admonition(node, level)
        elif isinstance(node, nodes.table):
            rows = [
                " | ".join(one_line(e.astext()) for e in r.children)
                for r in node.findall(nodes.row)
            ]
            builder.block("\n".join(rows))
        elif isinstance(node, nodes.field):
            name, body = (child.astext() for child in node.children[:2])
            builder.block(f"{name}: {body}", tight=node.parent.index(node) > 0)
        elif isinstance(node, nodes.docinfo):
            fields = [child for child in node.children if not _sphinx_metadata(child)]
            builder.block("\n".join(_rst_field(child) for child in fields))
        elif isinstance(node, nodes.literal_block | nodes.doctest_block):
            builder.block(fenced(node.astext(), _rst_language(node)))
        elif isinstance(node, nodes.TextElement | nodes.Text):
            builder.block(node.astext())
        else:
            return [(child, level) for child in node.children]
        return []

    def _admonition(self, node: Any, level: int) -> list[tuple[Any, int]]:
        """A note, a warning, a tip... as rendered: its kind first ("Note: ..."), on its
        first paragraph's line (a titled ``.. admonition::`` shows its title instead)."""
        children = list(node.children)
        label = f"{node.tagname.capitalize()}:"
        if children and isinstance(children[0], self.nodes.paragraph):
            self.builder.block(f"{label} {children.pop(0).astext()}")
        else:
            self.builder.block(label)
        return [(child, level) for child in children]

    def _list_item(self, node: Any, level: int) -> list[tuple[Any, int]]:
        """A list item as a ``- text`` line (``3. text`` in an enumerated list)."""
        nodes = self.nodes
        parent, position = node.parent, node.parent.index(node)
        marker = "-"
        if isinstance(parent, nodes.enumerated_list):
            marker = f"{int(parent.get('start', 1)) + position}."
        children = list(node.children)
        first = children.pop(0) if children and isinstance(children[0], nodes.paragraph) else None
        line = one_line(first.astext()) if first is not None else ""
        if line:
            self.builder.block(f"{marker} {line}", tight=position > 0)
        return [(child, level) for child in children]


def _rst_language(node: Any) -> str:
    """The language a literal block names (``.. code-block:: python``: docutils keeps it
    among its classes, after "code"), else ``pycon`` for a doctest block, else none."""
    if node.tagname == "doctest_block":
        return "pycon"
    classes = [c for c in node.get("classes", ()) if c != "code"]
    language = node.get("language") or (classes[0] if classes else "")
    return language if _LANGUAGE.fullmatch(language) else ""


_LANGUAGE = re.compile(r"[\w+#.-]{1,30}")


def _rst_skipped(nodes: Any) -> tuple[type, ...]:
    """Nodes that are no text of the document: messages, comments, link targets."""
    return (
        nodes.system_message,
        nodes.comment,
        nodes.raw,
        nodes.target,
        nodes.substitution_definition,
        nodes.image,
    )


#: File-wide fields Sphinx reads as settings of the page, never shows (``:orphan:``).
_SPHINX_METADATA = {"orphan", "nocomments", "nosearch", "tocdepth"}


def _sphinx_metadata(node: Any) -> bool:
    return (
        node.tagname == "field"
        and bool(node.children)
        and node.children[0].astext().strip().lower() in _SPHINX_METADATA
    )


def _rst_field(node: Any) -> str:
    """A docinfo entry as ``name: value`` (a field, or a known one such as an author)."""
    if node.tagname == "field" and len(node.children) == 2:
        return f"{node.children[0].astext()}: {one_line(node.children[1].astext())}"
    return f"{node.tagname}: {one_line(node.astext())}"


# -- RTF ----------------------------------------------------------------------------------


def load_rtf(file: FileBytes) -> LoadedDocument:
    """An RTF document's text (striprtf), one section."""
    source = str(file.path)
    try:
        from striprtf.striprtf import rtf_to_text
    except ImportError as exc:
        raise missing_reader(source, "RTF", "striprtf") from exc
    # RTF is 7-bit text with escapes for everything else; a stray 8-bit byte is read as
    # Windows-1252, the code page most RTF writers declare.
    markup = file.data.decode("cp1252", errors="replace")
    try:
        text = rtf_to_text(markup, errors="replace")
    except (ValueError, IndexError, LookupError, RecursionError) as exc:
        raise UnreadableFile(source, f"is a damaged RTF file ({exc})") from exc
    builder = TextBuilder()
    builder.block(text)
    return _document(file, builder, "application/rtf", [])
