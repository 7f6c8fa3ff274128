"""HTML pages as text: the page's main content, with headings as ``#`` lines.

A documentation page or an article carries a site around its content: menus, a
breadcrumb ("Lumen Labs › Support › Data export"), sidebars, "previous | next" bars, a
search box, banners, cookie notes and a footer. Indexed as content, those lines make
chunks of their own and lend every page the same words. What is dropped follows the
page's own markup, in the order a screen reader would find the main content:

1. the page's main landmark, when it has one (``<main>`` or ``role="main"``): only the
   text inside it is kept (a page whose landmark holds almost nothing keeps everything:
   a landmark that is a stray match or empty says nothing), whatever the elements
   around it are called (Read the Docs' theme holds it in ``<div class="wy-nav-content">``);
2. anywhere, landmarks that are not content: ``<nav>``, ``<footer>`` (the page's, and an
   article's own: its author, votes and share links; one inside a ``<blockquote>`` or
   ``<figure>``, a quotation's source, stays), and elements whose ``role`` is
   navigation, banner, contentinfo, search, menu or complementary (a page-level
   ``<header>`` without that role stays: simple pages put their ``<h1>`` in it).
   Hidden elements stay: a tab panel or an accordion's answer is shown by a click;
3. anywhere but on ``<main>`` and ``<article>``, elements whose class names them as such
   (a part of a class name, split at ``-`` and ``_``: nav, navbar, menu, sidebar,
   breadcrumb, footer, related, cookie, consent, banner, skip, skiplink, searchbox,
   headerlink, toc, tableofcontents; and what a help centre or a blog puts around an
   article: avatar, byline, share, social, votes, feedback, rating, subscribe; not
   "author", which DocBook gives a bibliography's names; nav, menu, sidebar, footer or
   breadcrumb joined to a word: "navigationbar", "printfooter"), as generators and themes
   that do not use landmarks mark them (a ``<section class="related-articles">`` too);
   an id, or a whole class name, only when it is one of the names of
   ``_NOT_CONTENT_IDS`` (``footer``, ``sidebar``, ``table-of-contents``), and never on a
   section: a generator makes ids from headings ("Cookies", "Sidebar"). A class name
   that says what state an element is in or what it holds ("sidebar-visible", "has-toc",
   "nav-open") names no furniture, and the page's ``<html>`` and ``<body>`` are never
   furniture: mdBook writes ``<html class="sidebar-visible">`` on every page and the
   Apache manual ``<body class="no-sidebar">``, pages that used to come out empty. A
   sidebar inside a section of the text (reStructuredText's ``.. sidebar::``) is text:
   a site's sidebar sits beside the sections. In a heading, what a screen reader skips
   (``aria-hidden``: a "TOC" link) is no part of the title, and a first heading outside
   any article, section or landmark that is one link to the site's front page is the
   site's name ("Django 3.2 documentation"), not a section of the page;
4. when a block ends (a ``<div>``, ``<p>``, list, table or ``<header>``) holding no
   heading, no element whose class names a title (Doxygen's ``<div class="title">``) and
   no code block (a ``<pre>``, or an element whose class names a declaration: Haddock's
   ``<p class="src">`` signature, its types all links): a block that is mostly links, two
   or more (a breadcrumb "Apache > HTTP Server > Documentation", a menu, a page's own
   table of contents), or links with nothing but brackets and bars between them
   ("[ << ] | [ >> ] | [Top]"), unless it is a paragraph or a table with words of its own outside
   its links (three or more, a quarter of its words, not navigation's own "next" or
   "index"): a sentence that names its cross-references, a table of linked parameters and
   what they do; a language list (two links or more, one of them to a translation:
   ``hreflang``); and, outside any article or section, a ``<header>`` or a block whose
   class or id names a header, masthead or tagline (a banner: "Small. Fast. Reliable."),
   unless it follows the page's first heading and has two words of its own beside its
   links (haproxy's "See also: maxconn, grace"; not texi2any's "Next: ..., Up: ...").
   A list whose class is "toc" is judged so too, not hidden (texi2html classes every list
   so). The text of form controls (``<select>`` options, ``<button>`` labels, anything
   whose ``role`` is button, a link that runs a script: ``href="javascript:..."``) is
   never content, nor is a paragraph that credits the program that made the page ("This
   document was generated on ... using texi2any.") or only says when the page last
   changed ("This page last modified on 2022-01-20 21:38:08 UTC"), nor a link to a place
   on the same page that says only "More...". A page Doxygen made is read as Doxygen means
   it (:mod:`tether.ingest.doxygen`): its code examples as code blocks, its prototypes as
   one line of code, without the hover cards of the names in its examples and the lines
   that point into its source listings.

Headings become section titles (``#`` lines), list items ``- `` lines (a paragraph that
opens an item stays on its line), a table row one line with its cells apart (`` | ``;
a short cell's paragraphs on that line), a definition list's terms lines of their own, each
definition on the line after its term (a chunk does not end between an option and what it
does), and a ``<pre>``
block a fenced code block (as in Markdown) that keeps its line breaks and indentation
whole: chunks are then cut around code rather than inside it, and a passage that ends
with a command ("git rebase --abort") ends a block, not a sentence.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from tether.ingest import doxygen
from tether.ingest.chunking import Heading
from tether.ingest.furniture import (
    CHARS,
    CODE,
    HEADINGS,
    LINK_CHARS,
    LINKS,
    NAVIGATION_WORDS,
    OWN_WORDS,
    PROSE_BLOCKS,
    SEPARATOR_RUN,
    SEPARATORS,
    SHOWN,
    TRANSLATIONS,
    WORD,
    WORDS,
    Block,
    code_named,
    date_stamp,
    front_page,
    header_named,
    is_main,
    is_not_content,
    is_section,
    title_named,
)
from tether.ingest.preformatted import fenced
from tether.text import normalize_text

_BLOCK_TAGS = frozenset(
    "address article aside blockquote br dd div dl dt figcaption figure footer form header hr"
    " li main nav ol p pre section table tbody tfoot thead tr ul".split()
)
_SKIP_TAGS = {
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "head",
    "iframe",
    "object",
    # Form controls: a search box's "Search Documentation" option, a "Copy" button.
    "select",
    "option",
    "button",
    "textarea",
}
#: A table cell with up to this many characters, no heading, list, code or table, is one line
#: of its row whatever paragraphs it holds (Sphinx writes every cell as <td><p>...</p>).
_CELL_CHARS = 400
#: Blocks judged when they end (see :class:`~tether.ingest.furniture.Block`).
_JUDGED_BLOCKS = {"div", "p", "ul", "ol", "dl", "table", "header"}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
#: Elements without an end tag: never pushed on a nesting stack.
_VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
#: What a ``<head>`` may hold: any other element starts the body, as ``<body>`` does.
_HEAD_TAGS = {"title", "meta", "link", "style", "script", "base", "noscript", "template"}
_MAIN_LANDMARK = re.compile(r"<main[\s>]|\brole\s*=\s*[\"']?main\b", re.I)
#: A main landmark holding less than this share of the page's text (and little text) is
#: taken for a stray match, not the page's content.
_MAIN_SHARE, _MAIN_CHARS = 0.2, 200

# Marks the start of a heading line while the page text is assembled. Sections come from
# the parser's own headings, never from re-reading the text as Markdown, so a ``# comment``
# line in a <pre> block or a paragraph starting with "#" is not taken for a heading.
_HEADING_MARK = "\ue000"
#: Marks a line of a ``<pre>`` block, whose indentation is kept (code stays code).
_PRE_LINE = "\ue001"
#: Mark where a ``<pre>`` block opens and closes (fenced once its text is known).
_PRE_OPEN, _PRE_CLOSE = "\ue002", "\ue003"
_MARKS = (_HEADING_MARK, _PRE_LINE, _PRE_OPEN, _PRE_CLOSE)
#: What a table cell holding it keeps on lines of its own: headings, code, list items.
_STRUCTURE = (*_MARKS, "\n- ")
_PRE_BLOCK = re.compile(f"{_PRE_OPEN}\n(.*?){_PRE_CLOSE}", re.DOTALL)


class _Nesting:
    """Open elements below one element (hidden or main): pushed on start tags, popped to
    the matching start on end tags (as a browser closes an unclosed ``<li>``)."""

    def __init__(self) -> None:
        self.open: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.open)

    def start(self, tag: str) -> None:
        if tag not in _VOID:
            self.open.append(tag)

    def end(self, tag: str) -> None:
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag) :]


#: A link to a place on the same page that says only this leads to the details below.
_MORE = frozenset({"more...", "more…", "more »", "read more...", "read more…", "[more]"})
#: A generator's credit line, up to this many characters.
_CREDIT_CHARS = 200
_CREDIT = re.compile(
    r"(?i)(?:this (?:document|page|manual|file) was generated\b|generated (?:on|at) \w.*\bby\b)"
    r"[^.]*\b(?:using|by|with) [\w-]+(?: v?\d[\w.]*)?\.?$"  # a program, its version
)


class _HTMLText(HTMLParser):
    """Visible text as Markdown-like lines: headings become ``#`` lines, list items ``- ``;
    with ``main_only``, only the text inside the page's main landmark."""

    def __init__(self, *, main_only: bool = False, doxygen_page: bool = False) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._doxygen = doxygen_page  # read its code examples and prototypes as code
        self._fragment = _Nesting()  # an open Doxygen code example, and what it holds
        self._prototype = _Nesting()  # an open Doxygen prototype table
        self.title = ""
        self._hidden = _Nesting()  # an element whose text is not content, and its children
        self._main = _Nesting()
        self._main_only = main_only
        self._articles = _Nesting()  # open <article>/<section>: their header is content
        self._quotations = _Nesting()  # open <blockquote>/<figure>: their footer is content
        self._sections = _Nesting()  # open sections of the text (see ``is_section``)
        self._in_title = False
        self._title_done = False
        self._heading: int | None = None
        self._heading_at = 0  # index in ``out`` where the open heading starts
        self._heading_counts: list[int] = []  # the running counts when it opened
        self._heading_home = False  # whether a link in it leads to a site's front page
        # Each open list item: where it starts in ``out``, and the characters shown then.
        self._items: list[tuple[int, int]] = []
        # Where a list item's marker or a definition's start was written, while nothing
        # has been shown after it: a block opening there stays on that line.
        self._lead: int | None = None
        self._term_end: int | None = None  # where the last ``<dt>`` closed
        self._cells: list[int] = []  # cells so far in each open table row
        self._cell_at: int | None = None  # where the open table cell starts in ``out``
        self._anchor_at: int | None = None  # where an open link to the same page starts
        self._pre = 0
        self._fenced: list[bool] = []  # per open <pre>: whether it is fenced
        self._blocks: list[Block] = []  # open blocks judged when they end
        self._prose = 0  # of which paragraphs and tables
        self._counts = [0] * 9  # shown so far: see CHARS ... SEPARATORS
        self._links = _Nesting()  # open <a href> elements

    def _shown(self) -> bool:
        return not self._hidden and (not self._main_only or bool(self._main))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            # The page title lives in <head>; an <svg><title> (an icon's tooltip) is not it.
            in_head = all(t == "head" for t in self._hidden.open)
            self._in_title = not self._title_done and in_head
        if self._hidden.open == ["head"] and tag not in _HEAD_TAGS:
            self._hidden.end("head")  # what a head cannot hold ends one left open (RDoc)
        if self._hidden:
            self._hidden.start(tag)
            return
        quoted, sectioned = bool(self._quotations), bool(self._sections)
        # Outside the main landmark nothing is kept, and what holds it is not furniture
        # whatever its class says (Read the Docs' theme: <div class="wy-nav-content">).
        judged = not self._main_only or bool(self._main)
        if (
            tag in _SKIP_TAGS
            or (judged and is_not_content(tag, attrs, in_quotation=quoted, in_section=sectioned))
            or (self._doxygen and doxygen.hover_card(tag, attrs))
        ):
            self._hidden.start(tag)
            return
        if self._doxygen and self._doxygen_start(tag, attrs):
            return
        if self._heading is not None and ("aria-hidden", "true") in attrs:
            self._hidden.start(tag)  # in a title, what a screen reader skips (a "TOC" link)
            return
        if sectioned or is_section(tag, attrs):
            self._sections.start(tag)
        if self._main or is_main(tag, attrs):
            self._main.start(tag)
        if tag in {"article", "section"}:
            self._articles.start(tag)
        if quoted or tag in {"blockquote", "figure"}:
            self._quotations.start(tag)
        if self._shown():
            self._judge_later(tag, attrs)
            self._open(tag)
            if tag not in _HEADINGS and not self._links and title_named(attrs):
                self._counts[HEADINGS] += 1  # a page's title (Doxygen's <div class="title">)
            elif tag != "a" and not self._links and code_named(attrs):
                self._counts[CODE] += 1  # a declaration (Haddock's <p class="src">)

    def _doxygen_start(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        """A Doxygen code example opens as a ``<pre>`` (its lines are ``<div>`` elements)
        and a prototype table as one line of code: True when ``tag`` was taken so."""
        if self._fragment or self._prototype:
            (self._fragment or self._prototype).start(tag)
            if tag in {"td", "tr"} and self._prototype and self._shown():
                self.out.append(" ")
            return tag in {"div", "table", "tbody", "tr", "td", "th"}
        if self._pre or not self._shown():
            return False
        if doxygen.code_fragment(tag, attrs):
            self._fragment.start(tag)
            self._open("pre")
            return True
        if doxygen.prototype(tag, attrs):
            self._prototype.start(tag)
            self._counts[CODE] += 1  # a declaration: the block holding it is content
            self.out.append("\n\n")
            return True
        return False

    def _judge_later(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._links or (tag == "a" and any(n == "href" for n, _ in attrs)):
            if tag == "a":
                if self._heading is not None:
                    self._heading_home = any(n == "href" and front_page(v) for n, v in attrs)
                self._counts[LINKS] += 1
                self._counts[TRANSLATIONS] += any(n == "hreflang" for n, _ in attrs)
                if any(n == "href" and (v or "").startswith("#") for n, v in attrs):
                    self._anchor_at = len(self.out)
            self._links.start(tag)
        if tag in _JUDGED_BLOCKS and not self._pre:
            header = not self._articles and (tag == "header" or header_named(attrs))
            self._blocks.append(Block(tag, len(self.out), list(self._counts), header))
            self._prose += tag in PROSE_BLOCKS or header  # (a header's words judge it too)

    def _open(self, tag: str) -> None:
        if tag in _HEADINGS:
            self._heading = _HEADINGS[tag]
            self._heading_at = len(self.out)
            self._heading_counts, self._heading_home = list(self._counts), False
            self.out.append("\n\n" + _HEADING_MARK + "#" * self._heading + " ")
        elif tag == "br" and self._heading is not None:
            self.out.append(" ")  # a heading stays on one line
        elif tag == "li":
            self._items.append((len(self.out), self._counts[CHARS]))
            self.out.append("\n- ")
            self._lead = len(self.out)
        elif tag == "dt" and self._term_end is not None:
            # A second name of the same thing ("-f", "--force") on the next line.
            after = "".join(self.out[self._term_end :]).strip()
            self.out.append("" if not after else "\n")
        elif tag == "dd":
            # A definition follows its term on the next line, not a paragraph away.
            self.out.append("" if "".join(self.out[-4:]).rstrip(" ").endswith("\n") else "\n")
            self._lead = len(self.out)
        elif tag in {"p", "div"} and self._leads():
            return  # "- The item's paragraph", not "-" and the paragraph below it
        elif tag == "pre":
            self._lead = None
            self._pre += 1
            self._counts[CODE] += 1
            fenced = self._pre == 1 and self._heading is None
            self._fenced.append(fenced)
            self.out.append("\n\n" + (_PRE_OPEN + "\n" if fenced else "") + _PRE_LINE)
        elif tag in _BLOCK_TAGS:
            self._lead = None  # (a table, a quotation: the item's text is not on its line)
            self.out.append("\n\n" if tag in {"p", "div", "section", "article", "table"} else "\n")
            if tag == "tr":
                self._end_cell()  # (a cell left open)
                self._cells.append(0)
            elif tag == "table":
                self._cell_at = None  # a cell holding a table keeps its rows apart
        elif tag in {"td", "th"}:
            self._end_cell()
            # A row is one line, its cells apart: "none | No networking in the container."
            if self._cells:
                self._cells[-1] += 1
            self.out.append(" | " if self._cells and self._cells[-1] > 1 else " ")
            self._cell_at = len(self.out)

    def _end_cell(self) -> None:
        """Put a short cell's paragraphs on its row's line."""
        at, self._cell_at = self._cell_at, None
        if at is None or at > len(self.out):
            return
        text = "".join(self.out[at:])
        if len(text) <= _CELL_CHARS and not any(m in text for m in _STRUCTURE):
            self.out[at:] = [" ".join(text.split())]

    def _leads(self) -> bool:
        """Whether nothing but white space was shown since a list item's marker or a
        definition's start."""
        if self._lead is None:
            return False
        if "".join(self.out[self._lead :]).strip():
            self._lead = None
        return self._lead is not None

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self._shown() or tag not in {"br", "hr"}:
            return
        self.out.append(" " if self._heading is not None else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._in_title:
            self._title_done = True
            self._in_title = False
        if self._hidden:
            self._hidden.end(tag)
            return
        if self._fragment or self._prototype:
            nesting = self._fragment or self._prototype
            nesting.end(tag)
            if not nesting and nesting is self._prototype:  # the prototype ends
                self.out.append("\n\n")
            elif not nesting:  # the example ends
                self._close("pre")
            elif tag == "div" and self._fragment:
                self.out.append("\n" + _PRE_LINE)  # a line of the example ends
            if tag in {"div", "table", "tbody", "tr", "td", "th"}:
                return
        shown = self._shown()
        self._main.end(tag)
        self._articles.end(tag)
        self._quotations.end(tag)
        self._sections.end(tag)
        if shown:
            self._links.end(tag)
            self._close(tag)
            self._judge(tag)

    def _judge(self, tag: str) -> None:
        """End the open blocks down to ``tag``'s (as a browser closes what is left open),
        dropping each that is navigation or a page header."""
        if tag not in _JUDGED_BLOCKS or all(b.tag != tag for b in self._blocks):
            return
        while self._blocks:
            block = self._blocks.pop()
            self._prose -= block.tag in PROSE_BLOCKS or block.header
            if block.furniture(self._counts) or self._credit(block):
                del self.out[block.at :]
                # Its text and links no longer count in the blocks around it.
                for count in SHOWN:
                    self._counts[count] = block.counts[count]
            elif block.prose:  # its links are words of a sentence to the blocks around it
                self._counts[LINK_CHARS] = block.counts[LINK_CHARS]
                self._counts[LINKS] = block.counts[LINKS]
            if block.tag == tag:
                return

    def _end_heading(self) -> None:
        """Close the open heading: an empty one is no heading, and neither is the site's
        name outside the page's text (a heading that is one link to the site's front
        page: Django's "Django 3.2 documentation", Exim's "Exim Internet Mailer")."""
        if self._heading is not None and self._site_name():
            del self.out[self._heading_at :]
            for count in SHOWN:
                self._counts[count] = self._heading_counts[count]
            self._heading = None
            return
        self._counts[HEADINGS] += 1
        if self._heading is not None and not "".join(self.out[self._heading_at + 1 :]).strip():
            del self.out[self._heading_at :]
        self._heading = None
        self.out.append("\n\n")

    def _site_name(self) -> bool:
        """Whether the open heading, the page's first, outside any article, section or
        main landmark, is one link to the site's front page and nothing else."""
        if not self._heading_home or self._articles or self._sections or self._main:
            return False
        if self._heading_counts[HEADINGS]:
            return False  # the site's name comes before the page's first heading
        chars, link_chars, links = (
            self._counts[i] - self._heading_counts[i] for i in (CHARS, LINK_CHARS, LINKS)
        )
        return links == 1 and 0 < chars == link_chars

    def _credit(self, block: Block) -> bool:
        """Whether a paragraph, now ended, is a generator's credit ("This document was
        generated on February 5, 2023 using texi2any."): Texinfo's tools end every page
        with one, outside any footer; or the page's date stamp (:func:`date_stamp`)."""
        if block.tag not in {"p", "div"}:
            return False
        if self._counts[CHARS] - block.counts[CHARS] > _CREDIT_CHARS:
            return False
        text = " ".join("".join(self.out[block.at :]).split())
        return bool(block.tag == "p" and _CREDIT.match(text)) or date_stamp(text)

    def _close(self, tag: str) -> None:
        if tag == "a" and self._anchor_at is not None:
            # A link to a place on the same page that shows one sign is a permalink
            # marker ("#", "¶", "§") or a footnote's way back ("↩"), not text (an
            # operator of two, SQLite's "->", stays).
            shown = "".join(self.out[self._anchor_at :]).strip().rstrip("\ufe0e\ufe0f")
            if (len(shown) == 1 and not shown.isalnum()) or shown.lower() in _MORE:
                del self.out[self._anchor_at :]  # (or a jump to the details: "More...")
            self._anchor_at = None
        elif tag == "tr" and self._cells:
            self._end_cell()
            self._cells.pop()
        elif tag in {"td", "th"}:
            self._end_cell()
        elif tag == "li" and self._items:
            at, shown = self._items.pop()
            if self._counts[CHARS] == shown:  # (furniture dropped inside gave its count back)
                del self.out[at:]  # an item whose text was all furniture (a menu's links)
        if tag in _HEADINGS:
            self._end_heading()
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            fenced = self._fenced.pop() if self._fenced else False
            self.out.append(("\n" + _PRE_CLOSE if fenced else "") + "\n\n")
        elif tag in _BLOCK_TAGS:
            self.out.append("\n")
            if tag == "dt":
                self._term_end = len(self.out)

    def handle_data(self, data: str) -> None:
        for mark in _MARKS:  # (private-use characters: an icon font's glyphs use them)
            data = data.replace(mark, "")
        if self._in_title:
            self.title += data
            return
        if not self._shown():
            return
        if self._fragment.open == ["div"] and not data.strip():
            return  # between the lines of a Doxygen example: they end lines themselves
        if self._pre and self._heading is None:
            self.out.append(data.replace("\n", "\n" + _PRE_LINE))
        else:
            # Collapse layout whitespace the way a browser does.
            collapsed = re.sub(r"\s+", " ", data)
            self.out.append(collapsed)
        visible = len(data.strip())
        if not visible:
            return
        self._lead = None
        counts = self._counts
        counts[CHARS] += visible
        # Words matter to a paragraph or a table judged when it ends (see _Block.furniture).
        words = WORD.findall(data) if self._prose and not self._pre else ()
        counts[WORDS] += len(words)
        if self._links:
            counts[LINK_CHARS] += visible
            return
        counts[OWN_WORDS] += sum(1 for word in words if word.lower() not in NAVIGATION_WORDS)
        if SEPARATOR_RUN.fullmatch(data):
            counts[SEPARATORS] += visible


def _parse(markup: str, *, main_only: bool) -> _HTMLText:
    parser = _HTMLText(main_only=main_only, doxygen_page=doxygen.made_by_doxygen(markup))
    parser.feed(markup)
    parser.close()
    return parser


def _pre_line(line: str) -> str:
    return line.rstrip().replace(_PRE_LINE, "")


def _fenced(block: re.Match[str]) -> str:
    return fenced(block.group(1))


def _line(line: str) -> str:
    """A line of text, its white space collapsed; a table row with no text in its cells
    ("|", "| |": a layout row, a spacer) is no line."""
    words = line.split()
    return "" if words and all(w == "|" for w in words) else " ".join(words)


def html_document(markup: str) -> tuple[str, str, list[Heading]]:
    """(title, text, headings) of an HTML page: the visible text of its main content (see
    the module's docstring), headings as ``#`` lines."""
    parser = _parse(markup, main_only=False)
    if _MAIN_LANDMARK.search(markup):
        main = _parse(markup, main_only=True)
        kept, whole = len("".join(main.out).strip()), len("".join(parser.out).strip())
        if kept >= _MAIN_CHARS or kept >= _MAIN_SHARE * whole:
            parser = main
    lines = [  # a <pre> line keeps its indentation; any other collapses its white space
        _pre_line(line) if line.startswith(_PRE_LINE) else _line(line)
        for line in "".join(parser.out).split("\n")
    ]
    if parser._doxygen:
        lines = doxygen.source_references_dropped(lines)
    fenced = _PRE_BLOCK.sub(_fenced, "\n".join(lines))
    # A <pre> never closed (a cut-off page, an HTML block cut at a blank line) is no fence.
    marked = normalize_text(fenced.replace(_PRE_OPEN, "").replace(_PRE_CLOSE, ""))
    headings: list[Heading] = []
    text_lines: list[str] = []
    offset = 0
    for line in marked.split("\n"):
        if line.startswith(_HEADING_MARK):
            line = line[len(_HEADING_MARK) :]
            hashes, _, title = line.partition(" ")
            title = " ".join(title.split())
            line = f"{hashes} {title}"
            headings.append(Heading(offset, offset + len(line) + 1, len(hashes), title))
        text_lines.append(line)
        offset += len(line) + 1
    # The title is character data already decoded by the parser: no second unescape.
    return " ".join(parser.title.split()), "\n".join(text_lines), headings
