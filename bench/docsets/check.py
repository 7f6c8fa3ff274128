#!/usr/bin/env python3
"""Validate a ``bench/docsets/<set>`` question set against its fetched documents.

Usage::

    python3 bench/docsets/fetch.py SET_DIR                  # once, to get SET_DIR/docs/
    python3 bench/docsets/check.py SET_DIR                  # full check
    python3 bench/docsets/check.py SET_DIR --schema-only    # no documents needed

The format is described in ``bench/docsets/README.md``. Checks:

* ``manifest.json`` is well formed (``fetch.py``'s loader) and ``questions.json`` follows
  the schema: version 2, ``workspace``, ``session`` (id, documents), ``documents`` (name,
  file, title), ``questions`` with the fields of their kind; unique ids; known documents;
  the documents are exactly the manifest's files, with ``file`` = ``docs/<name>.<html|md|txt>``
  (for man pages ``docs/<name>.<section>``, for Info files ``docs/<name>.info`` or, for part N
  of a split manual, ``docs/<name>.info-N``); the manifest may pin one package or several;
  the session is a non-empty proper subset of them;
* counts: at least 34 answerable (24 asked in the session, 6 in the workspace), 16
  unanswerable (with both scopes), 16 cross-scope;
* an answerable question asked in the session has its document in the session; a
  cross-scope question is asked in the session and its document is not in the session;
  the answer snippet is shorter than 160 characters and not pasted into the question;

and, unless ``--schema-only``:

* every document has the SHA-256 of the manifest;
* every snippet occurs in its document's text, and in the page's main content: not only in
  navigation, sidebars, breadcrumbs, headers or footers (HTML), nor only in an Info menu or
  index (format ``info``), nor only across a block boundary such as a heading and the
  paragraph under it;
* a cross-scope snippet occurs in no session document;
* an unanswerable question's ``absent_terms`` occur in no document of the workspace.

Text of a document: for HTML, the visible text from the stdlib ``html.parser`` (``<head>``,
``<script>``, ``<style>`` and the like skipped; block tags give line breaks); for Markdown
and plain text (reStructuredText sources), the file's text; for man pages (format ``man``),
the text of a small roff-to-text conversion (``man_text``: request lines dropped but their text
arguments kept, font escapes removed, special characters written out); for GNU Info files
(format ``info``), the text a reader sees in ``info`` (``info_text``: the 0x1F separators, the
``File: ..., Node: ...`` header lines, the ``Indirect:`` and tag tables and the trailing
``Local Variables:`` block dropped, the invisible ``^@^H[index^@^H]`` markers removed, menus
kept; the main content leaves out the menu entries, and so the indexes, and the ``dir``
entries of the preamble; its blocks are the paragraphs). Matching: NFKC, whitespace
collapsed, case-folded; as a fallback, all whitespace ignored. Absent terms are matched on the
whitespace-collapsed text, at word boundaries when the term is made of plain words.

Exit status 0 when everything passes, 1 on any failure, 2 on bad usage or missing inputs.
Standard library only; Python 3.11+.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fetch  # noqa: E402  (this folder's fetch.py, stdlib only)
from fetch import DocSet  # noqa: E402

KINDS = ("answerable", "unanswerable", "cross_scope")
SCOPES = ("session", "workspace")
MAX_ANSWER = 160
MIN_ANSWERABLE = 34
MIN_ANSWERABLE_SESSION = 24
MIN_ANSWERABLE_WORKSPACE = 6
MIN_UNANSWERABLE = 16
MIN_CROSS = 16
TOP_KEYS = {"version", "description", "workspace", "session", "documents", "questions"}
ID_RE = re.compile(r"[A-Za-z0-9._-]+")
BASE = {"id", "kind", "scope", "question"}
FIELDS: dict[str, tuple[set[str], set[str]]] = {  # kind -> (required, optional)
    "answerable": (BASE | {"document", "answer"}, {"note"}),
    "unanswerable": (BASE | {"absent_terms", "note"}, set()),
    "cross_scope": (BASE | {"document", "answer"}, {"note"}),
}

# --- HTML text ----------------------------------------------------------------------------

SKIP_TAGS = {"head", "script", "style", "noscript", "template", "svg", "iframe", "object"}
VOID_TAGS = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
    "source", "track", "wbr",
}  # fmt: skip
BLOCK_TAGS = {
    "address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "dialog",
    "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3",
    "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section",
    "summary", "table", "tbody", "td", "tfoot", "th", "thead", "title", "tr", "ul",
}  # fmt: skip
CHROME_TAGS = {"nav", "header", "footer", "aside"}
CHROME_ROLES = {"navigation", "contentinfo", "complementary", "banner", "search", "menu", "menubar"}
# A class token or id that says "navigation, sidebar, breadcrumb, footer, related links,
# menu, search".
CHROME_WORD = re.compile(
    r"(?:^|[-_])(?:nav|menu)(?:$|[-_])|navigation|navbar|menubar|sidebar|breadcrumb|footer"
    r"|related|search",
    re.I,
)
# A class token that is a state or layout flag of the element ("sidebar-visible" on
# mdBook's <html>, "no-sidebar" on the Apache manual's <body>), not a name of chrome.
STATE_WORD = re.compile(
    r"(?:^|[-_])(?:visible|hidden|open|closed|collapsed|expanded|active|has|with|no|is)"
    r"(?:$|[-_])",
    re.I,
)
BLOCK_SEP = "\x1e"  # marks a block boundary while the text is assembled


def is_chrome(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    if tag in CHROME_TAGS:
        return True
    if tag in {"html", "body"}:  # the page itself, whatever state its class names
        return False
    a = {k: (v or "") for k, v in attrs}
    if a.get("role", "").strip().lower() in CHROME_ROLES:
        return True
    tokens = a.get("class", "").split() + a.get("id", "").split()
    return any(CHROME_WORD.search(t) and not STATE_WORD.search(t) for t in tokens)


class PageText(HTMLParser):
    """Visible text of a page, all of it and without the page chrome (menus, sidebars...)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.all: list[str] = []
        self.main: list[str] = []
        self._stack: list[tuple[str, bool, bool, bool]] = []  # (tag, skipped, chrome, main)
        self._skip = 0
        self._chrome = 0
        # Inside the main landmark (<main>, role="main"), chrome around it does not count
        # (Read the Docs' theme holds it in <div class="wy-nav-content">): the chrome
        # count where each open landmark started.
        self._bases: list[int] = []

    def _break(self) -> None:
        self.all.append(BLOCK_SEP)
        self.main.append(BLOCK_SEP)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in BLOCK_TAGS:
            self._break()
        if tag in VOID_TAGS:
            return
        skipped = tag in SKIP_TAGS
        chrome = is_chrome(tag, attrs)
        main = tag == "main" or any(
            k == "role" and (v or "").strip().lower() == "main" for k, v in attrs
        )
        if main:
            self._bases.append(self._chrome)
        self._stack.append((tag, skipped, chrome, main))
        self._skip += skipped
        self._chrome += chrome

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in BLOCK_TAGS:
            self._break()

    def handle_endtag(self, tag: str) -> None:
        if tag in BLOCK_TAGS:
            self._break()
        if not any(t == tag for t, _, _, _ in self._stack):
            return  # a stray end tag
        while self._stack:  # close what the page left open (<li>, <p>) on the way
            t, skipped, chrome, main = self._stack.pop()
            self._skip -= skipped
            self._chrome -= chrome
            if main:
                self._bases.pop()
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self.all.append(data)
        if self._chrome <= (self._bases[-1] if self._bases else 0):
            self.main.append(data)


@dataclass
class Text:
    """A document's text, normalized for matching."""

    full: str  # everything visible
    main: str  # without the page chrome
    blocks: list[str] = field(default_factory=list)  # main content, one entry per block
    outside: str = "navigation/sidebar/footer text"  # what the main content leaves out


def norm(text: str) -> str:
    """The format's matching form: NFKC, runs of whitespace as one space, case-folded."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


def contains(haystack: str, needle: str, *, spaced: bool = False) -> bool:
    """Does normalized ``needle`` occur in normalized ``haystack``? Unless ``spaced``, also
    accept a match that ignores whitespace altogether (the format's fallback)."""
    if needle in haystack:
        return True
    return not spaced and needle.replace(" ", "") in haystack.replace(" ", "")


def html_text(markup: str) -> Text:
    parser = PageText()
    parser.feed(markup)
    parser.close()
    full = "".join(parser.all).replace(BLOCK_SEP, "\n")
    main_raw = "".join(parser.main)
    blocks = [norm(b) for b in main_raw.split(BLOCK_SEP) if b.strip()]
    return Text(norm(full), norm(main_raw.replace(BLOCK_SEP, "\n")), blocks)


# --- man page (roff, man(7)) text --------------------------------------------------------

# Special characters, \(xx and \[xx], as a man viewer writes them (others are dropped).
ROFF_CHARS = {
    "em": "\u2014", "en": "\u2013", "hy": "-", "bu": "\u2022", "aq": "'", "dq": '"',
    "lq": "\u201c", "rq": "\u201d", "oq": "\u2018", "cq": "\u2019", "co": "\u00a9",
    "rg": "\u00ae", "tm": "\u2122", "mu": "\u00d7", "di": "\u00f7", "+-": "\u00b1",
    "<=": "\u2264", ">=": "\u2265", "!=": "\u2260", "->": "\u2192", "<-": "\u2190",
    "de": "\u00b0", "ti": "~", "ha": "^", "rs": "\\", "sl": "/", "ba": "|", "or": "|",
    "lB": "[", "rB": "]", "lC": "{", "rC": "}", "la": "\u27e8", "ra": "\u27e9",
}  # fmt: skip
ROFF_ESCAPE = re.compile(
    r"""\\(?:
        f(?:\(..|\[[^\]]*\]|.)        # font: \fB \fI \fR \fP \f(CW \f[B]
      | \((?P<c2>..)                # special character \(em
      | \[(?P<cn>[^\]]*)\]          # special character \[em]
      | \*(?:\(..|\[[^\]]*\]|.)      # string (none defined in man(7) pages we read)
      | s[-+]?\d                    # point size
      | [nk](?:\(..|\[[^\]]*\]|.)     # register, mark
      | [hvwoLlDbxXzZ]'[^']*'       # motions and the like, with a quoted argument
      | (?P<one>.)                  # one character: \- \e \& \% \~ ...
    )""",
    re.X | re.S,
)
ROFF_ONE = {
    "-": "-", "e": "\\", "\\": "\\", "&": "", "%": "", "|": "", "^": "", ")": "", "c": "",
    "~": " ", " ": " ", "0": " ", "t": "\t", "'": "\u00b4", "`": "`", ".": ".", "/": "", ",": "",
    "{": "", "}": "", ":": "", "!": "", "a": "",
}  # fmt: skip
# man(7) macros whose arguments are words shown as they are, space-separated ...
ROFF_WORDS = {"TH", "SH", "SS", "B", "I", "SM", "SB"}
# ... and whose arguments alternate two fonts, so they are shown joined (.BR ip (8) -> ip(8))
ROFF_ALTERNATING = {"BR", "BI", "IR", "IB", "RB", "RI"}
# Requests and macros that start a new block (paragraph, heading, list item, display)
ROFF_BREAKS = {
    "TH", "SH", "SS", "PP", "P", "LP", "TP", "TQ", "IP", "HP", "sp", "RS", "RE", "TS", "TE",
    "EX", "EE", "nf", "fi", "UR", "UE", "MT", "ME",
}  # fmt: skip


def roff_inline(text: str) -> str:
    """A roff text line without its escapes: fonts removed, special characters written out."""

    def sub(m: re.Match[str]) -> str:
        if m.group("one") is not None:
            one = m.group("one")
            return ROFF_ONE.get(one, one)  # an unknown escape shows its character
        name = m.group("c2") or m.group("cn")
        return ROFF_CHARS.get(name, "") if name is not None else ""

    return ROFF_ESCAPE.sub(sub, text)


def roff_args(rest: str) -> list[str]:
    """The arguments of a request line: space-separated, "quoted" (with "" for a quote)."""
    args: list[str] = []
    i, n = 0, len(rest)
    while i < n:
        while i < n and rest[i] in " \t":
            i += 1
        if i >= n:
            break
        if rest[i] == '"':
            i += 1
            arg = []
            while i < n:
                if rest.startswith('""', i):
                    arg.append('"')
                    i += 2
                elif rest[i] == '"':
                    i += 1
                    break
                else:
                    arg.append(rest[i])
                    i += 1
            args.append("".join(arg))
        else:
            j = i
            while j < n and rest[j] not in " \t":
                j += 2 if rest[j] == "\\" else 1  # "\ " is a space inside the argument
            args.append(rest[i:j])
            i = j
    return args


def man_text(source: str) -> tuple[str, list[str]]:
    """The text of a man page (roff with the man(7) macros) and its blocks.

    Comments (``.\\"``, ``\\"`` to the end of a line) are dropped. A request line is dropped
    but a text macro keeps its arguments (``.B ip route`` shows "ip route", ``.BR foo (8)``
    "foo(8)", ``.SH``, ``.SS``, ``.TH`` their words, ``.IP`` its tag); layout requests (``.TP
    .PP .RS .RE .nf .fi .sp .br .in .ti``...) show nothing. ``tbl`` tables (``.TS``/``.TE``)
    lose their format lines. Escapes: fonts (``\\fB \\fI \\fR \\fP \\f(CW``) removed,
    ``\\-`` is "-", ``\\(em`` an em dash, ``\\e`` a backslash, ``\\&`` and ``\\%`` nothing.
    A block ends at a blank line, a heading, a paragraph or list macro (and the tag of a
    ``.TP`` item), or a display or table boundary."""
    lines: list[str] = []
    blocks: list[list[str]] = [[]]

    def brk() -> None:
        if blocks[-1]:
            blocks.append([])

    def emit(text: str) -> None:
        lines.append(text)
        if text.strip():
            blocks[-1].append(text)

    table = ""  # "" outside a table; "spec" while reading its format lines; "data" after
    tag_pending = False  # the next text line is a .TP tag, a block of its own
    # a line ending in an unescaped backslash goes on on the next line
    source = re.sub(r"(?<!\\)((?:\\\\)*)\\\n", r"\1", source)
    for raw in source.splitlines():
        if raw.startswith(('.\\"', "'\\\"")):  # a comment line
            continue
        line = re.sub(r'(?<!\\)((?:\\\\)*)\\".*', r"\1", raw)  # a comment to the end of the line
        if table == "spec":  # options ("...;") and format lines, the last ending in "."
            if line.rstrip().endswith("."):
                table = "data"
            continue
        if line[:1] in (".", "'"):
            name, _, rest = line[1:].strip().partition(" ")
            name = name.strip()
            if name in ROFF_BREAKS:
                brk()
            if name == "TS":
                table = "spec"
                continue
            if name == "TE":
                table = ""
                continue
            if name in ("TP", "TQ"):
                tag_pending = True
                continue
            args = roff_args(rest)
            if name in ROFF_WORDS:
                text = " ".join(roff_inline(a) for a in args)
            elif name in ROFF_ALTERNATING:
                text = "".join(roff_inline(a) for a in args)
            elif name == "IP" and args:
                text = roff_inline(args[0])
                emit(text)
                brk()
                continue
            else:  # layout (.PP .RS .RE .nf .fi .sp .br .in .ti .ad .PD ...) or unknown
                continue
            if not text.strip():
                continue  # ".B" alone sets the font of the next line, which shows it
            emit(text)
            if name in ("TH", "SH", "SS"):
                brk()
        elif not line.strip():
            emit("")
            brk()
            continue
        else:
            emit(roff_inline(line.replace("\t", " ") if table else line))
        if tag_pending:
            tag_pending = False
            brk()
    text = "\n".join(lines)
    return text, ["\n".join(b) for b in blocks if b]


# --- GNU Info (makeinfo output) text ----------------------------------------------------

INFO_SEPARATOR = "\x1f"  # starts each node and each table of an Info file
# the first line of a node: "File: sed.info,  Node: Top,  Next: Introduction,  Up: (dir)"
INFO_NODE_HEADER = re.compile(r"File: [^,\n]*,\s+Node: ")
# what follows a separator but is no node, and which info does not show
INFO_TABLES = ("Tag Table:", "End Tag Table", "Indirect:", "Local Variables:")
# makeinfo's invisible markers, "\0\b[index\0\b]" before an index's menu (and the like)
INFO_MARKER = re.compile(r"\x00\x08\[[^\x00]*\x00\x08\]")
INFO_MENU = "* Menu:"  # the line that starts a node's menu (an index is a menu too)


def info_without_menu(body: str) -> str:
    """A node's text without its menu entries: after the node's ``* Menu:`` line, each line
    that starts with ``* `` is an entry (``* Name::  comment``, ``* Name: Node.``, an index's
    ``* term:  Node.  (line 12)``) and the indented lines right under it go on with it; both
    go, as does the ``* Menu:`` line. Menu comments and any text after the menu stay (a menu
    is usually, but not always, at the end of its node). The entries for the system's
    ``dir`` menu, between ``START-INFO-DIR-ENTRY`` and ``END-INFO-DIR-ENTRY`` in the
    preamble, go too."""
    out: list[str] = []
    in_menu = in_entry = in_dir = False
    for line in body.split("\n"):
        if line.rstrip() in ("START-INFO-DIR-ENTRY", "END-INFO-DIR-ENTRY"):
            in_dir = line.startswith("START")
            continue
        if in_dir:  # an entry for the system's dir menu, in the preamble
            continue
        if not in_menu and line.rstrip() == INFO_MENU:
            in_menu = True
            out.append("")
            continue
        if in_menu:
            if line.startswith("* "):
                in_entry = True
                continue
            if in_entry and line[:1] in (" ", "\t") and line.strip():
                continue
            in_entry = False
        out.append(line)
    return "\n".join(out)


def info_text(source: str) -> tuple[str, str, list[str]]:
    """The text of a GNU Info file as ``info`` shows it: (all of it, its main content, the
    main content's blocks).

    The file is split at the 0x1F separators. A part that starts with a ``File: ...,  Node:
    ...`` header line is a node: the header line is dropped, the rest kept. The parts that
    hold the ``Indirect:`` table of a split manual, the ``Tag Table:``, ``End Tag Table`` and
    the trailing Emacs ``Local Variables:`` block are dropped, as are makeinfo's invisible
    ``\0\b[index\0\b]`` markers; the rest (the preamble before the first node, with its
    copyright and dir entries; headings and their underlines; menus and indexes;
    ``*Note ...::`` cross references) is kept as it is. The main content leaves out the menu
    entries of each node and the preamble's ``dir`` entries (``info_without_menu``), and so
    the indexes, whose entries are menu entries. A block is a paragraph: the lines between
    two blank lines of one node."""
    full: list[str] = []
    main: list[str] = []
    blocks: list[str] = []
    for i, part in enumerate(INFO_MARKER.sub("", source).split(INFO_SEPARATOR)):
        body = part.lstrip("\n")
        if i > 0 and body.startswith(INFO_TABLES):
            continue
        if i > 0 and INFO_NODE_HEADER.match(body):
            body = body.partition("\n")[2]
        full.append(body)
        content = info_without_menu(body)
        main.append(content)
        blocks += [b for b in re.split(r"\n[ \t]*\n", content) if b.strip()]
    return "\n".join(full), "\n".join(main), blocks


def document_text(path: Path, fmt: str) -> Text:
    raw = path.read_text(encoding="utf-8", errors="replace")
    if fmt == "html":
        return html_text(raw)
    if fmt == "man":
        text, blocks = man_text(raw)
        t = norm(text)
        return Text(t, t, [norm(b) for b in blocks])
    if fmt == "info":
        full, main, blocks = info_text(raw)
        return Text(norm(full), norm(main), [norm(b) for b in blocks], "a menu, index or dir entry")
    t = norm(raw)
    return Text(t, t, [t])


# --- checks -------------------------------------------------------------------------------


class Report:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.stats: Counter[str] = Counter()
        self.shared: list[str] = []  # snippets that also occur in another document

    def err(self, msg: str) -> None:
        self.errors.append(msg)


@dataclass
class QuestionSet:
    workspace: str = ""
    session_id: str = ""
    session: list[str] = field(default_factory=list)
    documents: dict[str, dict] = field(default_factory=dict)
    questions: list[dict] = field(default_factory=list)


def _is_text(value: object, minimum: int = 1) -> bool:
    return isinstance(value, str) and len(value.strip()) >= minimum


def check_top(data: object, ds: DocSet, rep: Report) -> QuestionSet:
    qs = QuestionSet()
    if not isinstance(data, dict):
        rep.err("questions.json: the top level must be an object")
        return qs
    for key in sorted(TOP_KEYS - set(data)):
        rep.err(f"questions.json: missing key {key!r}")
    for key in sorted(set(data) - TOP_KEYS):
        rep.err(f"questions.json: unknown key {key!r}")
    if data.get("version") != 2:
        rep.err(f"questions.json: version must be 2 (got {data.get('version')!r})")
    if not _is_text(data.get("description"), 10):
        rep.err("questions.json: 'description' must be a real description")
    if _is_text(data.get("workspace")):
        qs.workspace = data["workspace"]
    else:
        rep.err("questions.json: 'workspace' must be a non-empty string")
    check_documents(data.get("documents"), ds, qs, rep)
    check_session(data.get("session"), qs, rep)
    return qs


def check_documents(docs: object, ds: DocSet, qs: QuestionSet, rep: Report) -> None:
    """``documents``: exactly the manifest's files, each at ``docs/<name>.<suffix>``;
    the well-formed ones go into ``qs.documents``."""
    stored = {f.name: ds.path(f).relative_to(ds.root).as_posix() for f in ds.files}
    manifest_names = [f.name for f in ds.files]
    if not isinstance(docs, list) or not docs:
        rep.err("questions.json: 'documents' must be a non-empty list")
        docs = []
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or set(d) != {"name", "file", "title"}:
            rep.err(f"documents[{i}]: must be an object with exactly name, file, title")
            continue
        name = d["name"]
        if name in qs.documents:
            rep.err(f"documents[{i}]: duplicate name {name!r}")
        if name not in manifest_names:
            rep.err(f"documents[{i}]: {name!r} is not a file of manifest.json")
        want = stored.get(name, f"docs/{name}.{ds.suffix}")
        if d["file"] != want:
            rep.err(f"documents[{i}]: file must be {want!r} (got {d['file']!r})")
        if not _is_text(d["title"]):
            rep.err(f"documents[{i}]: 'title' must be a non-empty string")
        qs.documents[str(name)] = d
    for name in manifest_names:
        if name not in qs.documents:
            rep.err(f"manifest file {name!r} is not listed in documents")


def check_session(session: object, qs: QuestionSet, rep: Report) -> None:
    """``session``: an id and a non-empty proper subset of the documents, into ``qs``."""
    if not isinstance(session, dict) or set(session) != {"id", "documents"}:
        rep.err("questions.json: 'session' must be an object with exactly id, documents")
        return
    if _is_text(session["id"]):
        qs.session_id = session["id"]
    else:
        rep.err("session: 'id' must be a non-empty string")
    members = session["documents"]
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        rep.err("session: 'documents' must be a list of document names")
        return
    for name in sorted({m for m in members if members.count(m) > 1}):
        rep.err(f"session: document {name!r} listed twice")
    for name in members:
        if name not in qs.documents:
            rep.err(f"session: unknown document {name!r}")
    qs.session = list(dict.fromkeys(members))
    if not 0 < len(qs.session) < len(qs.documents):
        rep.err(
            f"session: holds {len(qs.session)} of {len(qs.documents)} documents "
            "(must be a non-empty proper subset)"
        )


def check_question(q: object, i: int, qs: QuestionSet, seen: set[str], rep: Report) -> None:
    if not isinstance(q, dict):
        rep.err(f"questions[{i}]: not an object")
        return
    qid = q.get("id")
    if not isinstance(qid, str) or not ID_RE.fullmatch(qid):
        rep.err(f"questions[{i}]: 'id' must be a string of [A-Za-z0-9._-]")
        return
    if qid in seen:
        rep.err(f"{qid}: duplicate id")
    seen.add(qid)
    kind = q.get("kind")
    if kind not in FIELDS:
        rep.err(f"{qid}: kind {kind!r} not one of {KINDS}")
        return
    required, optional = FIELDS[kind]
    missing = required - set(q)
    extra = set(q) - required - optional
    if missing:
        rep.err(f"{qid}: missing field(s) {sorted(missing)}")
    if extra:
        rep.err(f"{qid}: field(s) {sorted(extra)} not allowed for kind {kind}")
    if missing:
        return
    scope = q["scope"]
    if scope not in SCOPES:
        rep.err(f"{qid}: scope {scope!r} not one of {SCOPES}")
    elif kind == "cross_scope" and scope != "session":
        rep.err(f"{qid}: a cross_scope question is asked in the session (scope 'session')")
    if not _is_text(q["question"], 10):
        rep.err(f"{qid}: 'question' must be a real question")
    if "note" in q and not _is_text(q["note"]):
        rep.err(f"{qid}: 'note' must be a non-empty string")
    if kind == "unanswerable":
        terms = q["absent_terms"]
        if not isinstance(terms, list) or not terms or not all(_is_text(t) for t in terms):
            rep.err(f"{qid}: 'absent_terms' must be a non-empty list of non-empty strings")
        qs.questions.append(q)
        return
    doc, answer = q["document"], q["answer"]
    if doc not in qs.documents:
        rep.err(f"{qid}: unknown document {doc!r}")
    elif kind == "answerable" and scope == "session" and doc not in qs.session:
        rep.err(f"{qid}: asked in the session but its document {doc!r} is not in the session")
    elif kind == "cross_scope" and doc in qs.session:
        rep.err(f"{qid}: cross-scope, but its document {doc!r} is in the session")
    if not _is_text(answer):
        rep.err(f"{qid}: 'answer' must be a non-empty string")
    elif len(answer) >= MAX_ANSWER:
        rep.err(f"{qid}: answer is {len(answer)} characters (limit < {MAX_ANSWER})")
    elif isinstance(q["question"], str) and contains(norm(q["question"]), norm(answer)):
        rep.err(f"{qid}: the answer snippet is pasted verbatim into the question")
    qs.questions.append(q)


def check_counts(qs: QuestionSet, rep: Report) -> Counter[tuple[str, str]]:
    per: Counter[tuple[str, str]] = Counter(
        (q["kind"], q["scope"]) for q in qs.questions if q.get("scope") in SCOPES
    )
    kinds = Counter(q["kind"] for q in qs.questions)
    wants = (
        (kinds["answerable"], MIN_ANSWERABLE, "answerable questions"),
        (per["answerable", "session"], MIN_ANSWERABLE_SESSION, "answerable, asked in the session"),
        (per["answerable", "workspace"], MIN_ANSWERABLE_WORKSPACE, "answerable, in the workspace"),
        (kinds["unanswerable"], MIN_UNANSWERABLE, "unanswerable questions"),
        (per["unanswerable", "session"], 1, "unanswerable, asked in the session"),
        (per["unanswerable", "workspace"], 1, "unanswerable, asked in the workspace"),
        (kinds["cross_scope"], MIN_CROSS, "cross_scope questions"),
    )
    for got, minimum, what in wants:
        if got < minimum:
            rep.err(f"too few questions: {what}: {got} (need at least {minimum})")
    return per


def load_texts(ds: DocSet, rep: Report) -> dict[str, Text] | None:
    texts: dict[str, Text] = {}
    missing: list[str] = []
    for f in ds.files:
        path = ds.path(f)
        if not path.exists():
            missing.append(str(path))
            continue
        got = fetch.sha256_file(path)
        if got != f.sha256:
            rep.err(f"{path}: sha256 {got} differs from the manifest's {f.sha256}")
        texts[f.name] = document_text(path, ds.format)
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        print(
            f"error: document(s) not found: {', '.join(missing[:3])}{more}\n"
            f"  run: python3 {(HERE / 'fetch.py').as_posix()} {ds.root}",
            file=sys.stderr,
        )
        return None
    return texts


def term_pattern(term: str) -> re.Pattern[str]:
    """Whitespace-collapsed, case-folded; at word boundaries when the term is plain words."""
    t = norm(term)
    if re.fullmatch(r"\w+(?: \w+)*", t):
        return re.compile(rf"\b{re.escape(t)}\b")
    return re.compile(re.escape(t))


def check_snippet(q: dict, texts: dict[str, Text], rep: Report) -> None:
    qid, doc = q["id"], q["document"]
    text = texts.get(doc)
    if text is None:
        return
    snippet = norm(q["answer"])
    if contains(text.main, snippet):
        rep.stats["snippets found in the main content"] += 1
        if not contains(text.main, snippet, spaced=True):
            rep.stats["  of which only when ignoring whitespace"] += 1
    elif contains(text.full, snippet):
        rep.err(f"{qid}: snippet occurs in {doc} only in {text.outside}")
        return
    else:
        elsewhere = [n for n, t in texts.items() if contains(t.main, snippet)]
        rep.err(
            f"{qid}: snippet not found in {doc}"
            + (f" (it is in {', '.join(elsewhere[:5])})" if elsewhere else "")
        )
        return
    if not any(contains(b, snippet) for b in text.blocks):
        rep.err(f"{qid}: snippet spans a block boundary in {doc}; keep it within one block")
    others = [n for n, t in texts.items() if n != doc and contains(t.main, snippet)]
    if others:
        rep.shared.append(f"{qid} (also in {', '.join(others[:3])})")


def check_texts(qs: QuestionSet, texts: dict[str, Text], rep: Report) -> None:
    for q in qs.questions:
        if q["kind"] == "unanswerable":
            for term in q["absent_terms"]:
                if not _is_text(term):
                    continue
                pat = term_pattern(term)
                hits = [n for n, t in texts.items() if pat.search(t.full)]
                if hits:
                    rep.err(
                        f"{q['id']}: absent term {term!r} occurs in {len(hits)} document(s): "
                        + ", ".join(hits[:5])
                    )
                else:
                    rep.stats["absent terms verified absent from the workspace"] += 1
            continue
        if q["document"] not in texts or not _is_text(q["answer"]):
            continue
        check_snippet(q, texts, rep)
        if q["kind"] == "cross_scope":
            snippet = norm(q["answer"])
            hits = [n for n in qs.session if n in texts and contains(texts[n].full, snippet)]
            if hits:
                rep.err(f"{q['id']}: cross-scope snippet also occurs in session document(s) {hits}")
            else:
                rep.stats["cross-scope snippets absent from the session"] += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Validate a bench/docsets question set.")
    ap.add_argument("set_dir", help="the set's folder (manifest.json, questions.json, docs/)")
    ap.add_argument(
        "--schema-only", action="store_true", help="skip the document checks (nothing fetched)"
    )
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    loaded = load_set(Path(args.set_dir))
    if loaded is None:
        return 2
    ds, qpath, data = loaded

    rep = Report()
    qs = check_top(data, ds, rep)
    check_questions(data, qs, rep)
    per = check_counts(qs, rep)
    if not args.schema_only:
        texts = load_texts(ds, rep)
        if texts is None:
            return 2
        check_texts(qs, texts, rep)
    print_summary(qpath, ds, qs, per, rep)
    return print_verdict(rep, schema_only=args.schema_only)


def load_set(root: Path) -> tuple[DocSet, Path, object] | None:
    """The set's manifest, the path of its questions and their JSON; None, said on
    stderr, when either cannot be read."""
    try:
        ds = fetch.load_manifest(root)
    except fetch.ManifestError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    qpath = root / "questions.json"
    try:
        data = json.loads(qpath.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        print(f"error: cannot read {qpath}: {e}", file=sys.stderr)
        return None
    return ds, qpath, data


def check_questions(data: object, qs: QuestionSet, rep: Report) -> None:
    seen: set[str] = set()
    raw_questions = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(raw_questions, list):
        rep.err("questions.json: 'questions' must be a list")
        raw_questions = []
    for i, q in enumerate(raw_questions):
        check_question(q, i, qs, seen, rep)


def print_summary(
    qpath: Path, ds: DocSet, qs: QuestionSet, per: Counter[tuple[str, str]], rep: Report
) -> None:
    """The set, its questions by kind and scope, and what the text checks counted."""
    print(
        f"{qpath}: set {ds.name} ({ds.format}, {ds.apt_specs}), {len(qs.documents)} documents, "
        f"session {qs.session_id!r} with {len(qs.session)}, workspace {qs.workspace!r}"
    )
    print(f"  {'kind':14s} {'session':>8s} {'workspace':>10s} {'total':>6s}")
    for kind in KINDS:
        s, w = per[kind, "session"], per[kind, "workspace"]
        print(f"  {kind:14s} {s:8d} {w:10d} {s + w:6d}")
    print(
        f"  {'all':14s} {sum(per[k, 'session'] for k in KINDS):8d} "
        f"{sum(per[k, 'workspace'] for k in KINDS):10d} {sum(per.values()):6d}"
    )
    for key, value in rep.stats.items():
        print(f"  {key}: {value}")
    if rep.shared:
        print(f"  snippets also in another document (allowed): {'; '.join(rep.shared)}")


def print_verdict(rep: Report, *, schema_only: bool) -> int:
    """FAILED and every problem, or OK; the exit status."""
    if rep.errors:
        print(f"FAILED: {len(rep.errors)} problem(s)")
        for e in rep.errors:
            print(f"  - {e}")
        return 1
    print("OK" + (" (schema only)" if schema_only else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
