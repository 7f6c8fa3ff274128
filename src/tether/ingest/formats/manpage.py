"""Man pages: roff source with the man(7) macros, read as ``man`` shows them.

A man page is roff: lines of text, and lines that start with a dot and ask for something
(a section title, a paragraph, a word in bold). This reader keeps what a reader of the
formatted page sees and nothing of the markup:

- ``.SH`` and ``.SS`` titles are the sections (``DESCRIPTION > Route types``);
- the document's title is its name, section and one-line description (``.TH`` and the
  NAME section: "ip-route(8) - routing table management");
- a ``.TP`` or ``.TQ`` item's tag (an option, a keyword) is a line of its own and its text
  goes on the next line, so that a chunk does not end between a term and what it means;
  an ``.IP`` bullet is a ``- `` list item;
- ``.nf``/``.fi`` and ``.EX``/``.EE`` blocks (examples, layouts) are fenced code blocks;
- a ``tbl`` table (``.TS``/``.TE``) is a line per row, its cells joined by ``|``;
- font changes (``.B``, ``.BR``, ``\\fB``), spacing and layout requests are dropped, and
  escapes are the characters they print (``\\-`` a hyphen, ``\\(em`` a dash, ``\\e`` a
  backslash, strings defined with ``.ds``);
- macro definitions, conditionals and comments are no text, and nothing the page asks
  for runs: ``.so`` (another file), ``.sy`` (a command) and the like are ignored.

Pages written with the BSD mdoc(7) macros (``.Dd``, ``.Sh``, ``.It Fl v``) are read by
:mod:`tether.ingest.formats.mdoc`. The reader is linear in the page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from tether.errors import EmptyDocument
from tether.ingest.formats.data import _document, one_line
from tether.ingest.formats.roff import MIME, PageText, source_lines, unescape
from tether.ingest.loaders import FileBytes, LoadedDocument, decode_text

#: Font macros whose arguments print with spaces between, and those that alternate two
#: fonts, printing their arguments joined.
_SPACED = {"B", "I", "SM", "SB"}
_JOINED = {"BR", "BI", "IB", "IR", "RB", "RI"}
#: Requests that end the current line or paragraph.
_PARAGRAPH = {"PP", "LP", "P", "HP", "sp", "Sp", "RS", "RE", "in", "bp", "ne"}
_LINE = {"br", "ti"}
#: A ``.IP`` tag that marks a bullet.
_BULLETS = {"\u2022", "*", "-", "o", "\u00b7"}


def load_manpage(file: FileBytes) -> LoadedDocument:
    """A man page (man(7) macros; mdoc(7) ones go to :mod:`.mdoc`) as its text, its
    ``.SH``/``.SS`` titles as sections, its name and description as its title."""
    text = decode_text(file)
    if _MDOC.search(text[:8192]):
        from tether.ingest.formats.mdoc import load_mdoc

        return load_mdoc(file, text)
    page = _ManPage()
    page.read(source_lines(text))
    if not page.builder and page.redirect:
        raise EmptyDocument(
            str(file.path), f"is a link to another man page ({page.redirect}): add that page"
        )
    return _document(file, page.builder, MIME, [], page.title())


_MDOC = re.compile(r"^\.Dd\b|^\.Sh\b", re.MULTILINE)


class _ManPage(PageText):
    """The state of one page as it is read: the paragraph being filled, the code block
    being kept, the tag a ``.TP`` waits for."""

    def __init__(self) -> None:
        super().__init__()
        self.table: list[str] | None = None
        self.tag = False  # the next text is a .TP item's tag
        self.section = ""
        self.name: list[str] = []  # the NAME section's text
        self.header: tuple[str, str] = ("", "")
        self.redirect = ""

    def title(self) -> str:
        """ "name(section) - description", from ``.TH`` and the NAME section."""
        name, section = self.header
        described = " ".join(self.name).strip()
        names, dash, description = described.partition(" - ")
        name = name or names.split(",")[0].strip()
        title = f"{name}({section})" if section else name
        return one_line(f"{title} - {description}" if dash and description else title)

    def read(self, lines: Iterator[tuple[str, str, list[str]]]) -> None:
        for kind, text, args in lines:
            if kind == "text":
                self.text(text)
            else:
                self.request(text, args, lines)
        if self.table is not None:
            self.tbl("TE")  # (a table the page never closed)
        self.flush()
        self.end_code()

    # -- text --------------------------------------------------------------------------

    def text(self, raw: str) -> None:
        shown = unescape(raw, self.strings)
        if self.table is not None:
            self.table.append(shown)
        elif self.code is not None:
            self.code.append(shown.rstrip())
        elif not raw.strip():
            self.flush()  # a blank line ends a paragraph
        else:
            self.words_in(shown)

    def words_in(self, shown: str) -> None:
        if self.tag:
            self.tag = False
            self.block(shown.strip())
            self.tight = True  # the item's text follows its tag
            return
        if self.section.upper() == "NAME":
            self.name.append(shown.strip())
        self.words.append(shown.strip())

    # -- requests ----------------------------------------------------------------------

    def request(
        self, name: str, args: list[str], lines: Iterator[tuple[str, str, list[str]]]
    ) -> None:
        if name in _SPACED or name in _JOINED:
            shown = [unescape(a, self.strings) for a in args]
            if shown:
                self.text_shown(" ".join(shown) if name in _SPACED else "".join(shown))
        elif name in ("SH", "SS"):
            self.heading(name, args, lines)
        elif name in ("TP", "TQ"):
            self.flush()
            self.tag = True
            # (a tag that got no text of its own shares the next one's: both name it)
            self.tight = self.tight or name == "TQ"
        elif name == "IP":
            self.item(args)
        else:
            self.layout(name, args)

    def text_shown(self, shown: str) -> None:
        """Text a macro prints, already unescaped."""
        if self.code is not None:
            self.code.append(shown)
        elif self.table is None:
            self.words_in(shown)

    def heading(
        self, name: str, args: list[str], lines: Iterator[tuple[str, str, list[str]]]
    ) -> None:
        self.flush()
        self.end_code()
        self.tag = False
        title = " ".join(unescape(a, self.strings) for a in args).strip()
        if not title:  # (the title on the next line)
            kind, text, _ = next(lines, ("text", "", []))
            title = unescape(text, self.strings).strip() if kind == "text" else ""
        if name == "SH":
            self.section = title
        self.builder.heading(title, 1 if name == "SH" else 2)
        self.tight = False

    def item(self, args: list[str]) -> None:
        """``.IP [tag]``: a bullet's ``- ``, a number's ``1.``, else the tag on its line."""
        self.flush()
        tag = unescape(args[0], self.strings).strip() if args else ""
        if tag in _BULLETS:
            self.words.append("-")
        elif re.fullmatch(r"\(?\d{1,3}[.)]?", tag):
            self.words.append(tag if tag.endswith((".", ")")) else f"{tag}.")
        elif tag:
            self.block(tag)
            self.tight = True

    def layout(self, name: str, args: list[str]) -> None:
        """Requests that only lay text out, start or end a block, or define strings."""
        if name in _PARAGRAPH:
            self.flush()
            if self.code is not None and name in ("sp", "Sp"):
                self.code.append("")
        elif name in _LINE:
            if self.code is None and self.words:
                self.words.append("\n")
        elif name in ("nf", "EX", "Vb"):  # (.Vb/.Ve: pod2man's verbatim blocks)
            self.flush()
            if self.code is None:
                self.code = []
        elif name in ("fi", "EE", "Ve"):
            self.end_code()
        elif name == "TH":
            shown = [unescape(a, self.strings) for a in args[:2]]
            self.header = (shown[0].lower() if shown else "", shown[1] if len(shown) > 1 else "")
        elif name in ("ds", "as") and args:
            self.strings.define(args[0], " ".join(args[1:]), append=name == "as")
        elif name == "so" and args:
            self.redirect = f".so {args[0]}"
        elif name in ("TS", "TE"):
            self.tbl(name)
        elif name in ("UE", "ME") and args:
            self.text_shown(unescape(args[0], self.strings))

    def tbl(self, name: str) -> None:
        """A ``tbl`` table: its options and column formats skipped, a line per row."""
        if name == "TS":
            self.flush()
            self.table = []
            return
        rows, self.table = self.table or [], None
        self.block("\n".join(table_rows(rows)))


def table_rows(lines: list[str]) -> list[str]:
    """A ``tbl`` table's data rows as ``cell | cell`` lines: the options line (ending in
    ``;``) and the format lines (up to one ending in ``.``) are left out, and so are
    horizontal rules (``_``, ``=``)."""
    options = 1 if lines and lines[0].rstrip().endswith(";") else 0
    at = options
    while at < len(lines):
        at += 1
        if lines[at - 1].rstrip().endswith("."):
            break
    else:
        at = options  # no format lines: every line after the options is data
    found = re.search(r"tab\s*\((.)\)", lines[0]) if options else None
    tab = found.group(1) if found else "\t"
    rows = []
    for line in lines[at:]:
        cells = [c.strip() for c in line.split(tab)]
        if all(c in ("", "_", "=") for c in cells) or line.strip() in ("T{", "T}"):
            continue
        rows.append(" | ".join(c for c in cells if c not in ("T{", "T}")))
    return rows
