"""What in an HTML page is a site's furniture rather than its content, told by an
element's tag, role, class and id (see :mod:`tether.ingest.html`, rules 2 and 3).

A class name is read in parts, split at anything but letters and digits ("md-nav__link"
holds "nav"); an id only whole, since generators make ids from headings. A class that
names a state ("sidebar-visible") names nothing, and what holds the page (``<html>``,
``<body>``, ``<main>``, ``<article>``) is never furniture. A block is judged when it ends
by what it showed (:class:`Block`: mostly links, or links between bars, and no words of
its own). A link classed as the way to
the previous or next page ("previous_page", "next-page") is furniture, as is Bootstrap's
"pager" or "pagination" (whole: "pagination-centered" only centres text).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

#: Class or id parts that name a page's header, outside any article or section: dropped
#: when the block ends, unless it held a heading (a simple page's title is in it).
_HEADER_NAMES = {"header", "masthead", "tagline", "topbar", "titlearea"}  # Doxygen's banner
_NOT_CONTENT_ROLES = frozenset(
    # "button": a link or a span acting as one ("Follow", "Sign in", "Got it!").
    "button navigation banner contentinfo search menu menubar complementary".split()
)
_NOT_CONTENT_NAMES = frozenset(
    "nav navbar navigation menu menubar sidebar sphinxsidebar breadcrumb breadcrumbs footer"
    " related cookie cookies consent banner skiplink searchbox headerlink skip"
    " navheader navfooter"  # DocBook's "Prev | Up | Next" bars
    # About an article, not in it: its author, votes, share links, feedback form.
    " avatar byline share sharing social vote votes feedback rating subscribe"
    # The page's own contents list: Docusaurus' "tableOfContents", Furo's "toc-tree".
    " toc tableofcontents".split()
)
#: Whole ids that name a site's furniture (an id is read whole, never in parts: generators
#: make ids from headings, and a section titled "Cookies" is content).
_NOT_CONTENT_IDS = frozenset(
    "nav navbar navigation menu sidebar breadcrumb breadcrumbs footer site-footer site-header"
    " banner cookie-banner searchbox"
    # The page's own contents list, with its label (Node's "Table of contents"); MediaWiki's
    # tagline ("From cppreference.com"), the line under its title (a breadcrumb), its
    # "Jump to: navigation, search", its category links and its side and top menus.
    " toc table-of-contents sitesub contentsub jump-to-nav catlinks mw-navigation mw-panel"
    " mw-head"
    # Bootstrap's "Previous | Next" links (whole: "pagination-centered" only centres text).
    " pager pagination".split()
)
_NAME_PARTS = re.compile(r"[^a-z0-9]+")
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
#: Elements that are the page, or an article in it: content, whatever their class says.
_PAGE_TAGS = {"html", "body", "main", "article"}
#: Parts of a class name that make it a state or a layout flag of the element that holds
#: the page ("sidebar-visible" on mdBook's ``<html>``, "no-sidebar" on the Apache manual's
#: ``<body>``, "has-toc", "nav-open"), not the name of a sidebar or a menu.
_STATE_PARTS = frozenset(
    "visible hidden open opened closed collapsed expanded active shown show toggled enabled"
    " disabled has with without no is ignore exclude".split()  # pandoc's "toc-ignore"
)
#: Furniture names a class may be made of with another word, without a separator:
#: "navigationbar" (Qt's breadcrumb), "navpath", "menutrigger", "printfooter".
_AFFIXED = ("navigation", "nav", "menu", "sidebar", "footer", "breadcrumbs", "breadcrumb")
_LISTS = {"ul", "ol", "dl"}
#: Class parts that make a link a way to the page before or after ("previous_page",
#: "next-page", "left-prev"): on a link only, as "next-steps" may name a section.
_PAGING = frozenset({"prev", "previous", "next"})
#: The words of navigation itself: a bar of "Next", "Up" and "Contents" has none of its own.
NAVIGATION_WORDS = frozenset(
    "next previous prev up home top contents index back forward go to return skip main"
    " content page table of jump".split()
)


def is_not_content(
    tag: str,
    attrs: list[tuple[str, str | None]],
    *,
    in_quotation: bool = False,
    in_section: bool = False,
) -> bool:
    """Whether an element is a site's navigation, banner or footer, or an article's byline,
    votes or share links: not page content. ``in_section``: the element is inside a
    section of the text (see :func:`is_section`)."""
    # A page-level <header> is a banner, but simple pages keep their <h1> in it: it stays
    # (its menus are <nav>, dropped anyway). A <footer> holds no title: the page's is the
    # site's, an article's is about the article; a quotation's names its source.
    if tag == "nav" or (tag == "footer" and not in_quotation):
        return True
    values = {name: (value or "").lower() for name, value in attrs}
    if values.get("role", "").strip() in _NOT_CONTENT_ROLES:
        return True
    if tag == "a" and values.get("href", "").strip().startswith("javascript:"):
        return True  # a control made of a link: rustdoc's "[−]", "Expand all", "Print"
    if tag in _PAGE_TAGS:  # the page's or an article's content, whatever its class says
        return False  # ("sidebar-visible", "no-sidebar": the page's state, not a sidebar)
    classes = [name for name in values.get("class", "").split() if not _states(name)]
    # A section's id is made from its heading (docutils: <div class="section"
    # id="sidebar"> holds the section titled "Sidebar"), and so is a heading's (MkDocs:
    # <h2 id="footer">Footer</h2>).
    sectioned = tag in _HEADINGS or tag == "section" or "section" in classes
    if not sectioned and values.get("id", "").strip() in _NOT_CONTENT_IDS:
        return True
    parts = {part for name in classes for part in _NAME_PARTS.split(name)}
    if tag == "a" and not _PAGING.isdisjoint(parts):
        return True  # xfpt's "<-previous next->", Furo's "next-page"
    if in_section and parts & _NOT_CONTENT_NAMES == {"sidebar"}:
        return False  # reStructuredText's ".. sidebar::" (and its title): part of the text
    if tag in _LISTS and parts & _NOT_CONTENT_NAMES <= {"toc"} and "toc" in classes:
        return False  # texi2html writes any bullet list so: its links will judge it
    if not _NOT_CONTENT_IDS.isdisjoint(classes):  # "table-of-contents", whole
        return True
    return not _NOT_CONTENT_NAMES.isdisjoint(parts) or any(map(_affixed, parts))


def is_section(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    """Whether an element is a section of the text, named by its heading: a ``<section>``
    or a ``<div>`` classed "section" (docutils, DocBook, Texinfo) that has an id. A site's
    sidebar sits beside the content, never inside one of its sections."""
    if tag not in {"section", "div"}:
        return False
    values = dict(attrs)
    if not (values.get("id") or "").strip():
        return False
    return tag == "section" or "section" in (values.get("class") or "").lower().split()


def _affixed(part: str) -> bool:
    """Whether a class word is a furniture name joined to another word of three letters
    or more ("navigationbar", "printfooter"; not "canvas" or "menus")."""
    return any(
        part.startswith(name) or part.endswith(name)
        for name in _AFFIXED
        if len(part) >= len(name) + 3
    )


def _states(name: str) -> bool:
    """Whether a class name says what state an element is in or what it holds
    ("sidebar-visible", "nav-open", "has-sidebar", "no-toc"), not what it is."""
    return not _STATE_PARTS.isdisjoint(_NAME_PARTS.split(name))


def is_main(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    """Whether an element is the page's main landmark: ``<main>`` or ``role="main"``."""
    return tag == "main" or any(
        n == "role" and (v or "").strip().lower() == "main" for n, v in attrs
    )


#: Class parts that name a declaration's code: Haddock's ``<p class="src">`` signature
#: ("decode :: FromJSON a => ByteString -> Maybe a"), whose types are all links.
_CODE_NAMES = frozenset({"src", "signature", "synopsis", "decl", "declaration", "prototype"})


def code_named(attrs: list[tuple[str, str | None]]) -> bool:
    """Whether an element's class names it a declaration's code: a block holding it is
    content, however many of its words are links."""
    return any(
        n == "class" and not _CODE_NAMES.isdisjoint(_NAME_PARTS.split((v or "").lower()))
        for n, v in attrs
    )


#: A site's front page, as a link names it: an index file or nothing after the folders.
_FRONT_PAGE = re.compile(r"(?:\.{1,2}/)*(?:index\.(?:html?|php|shtml))?", re.IGNORECASE)


def front_page(href: str | None) -> bool:
    """Whether a link leads to a site's front page: its root ("http://www.exim.org",
    "/") or the index file of a folder above ("../../index.html", "../"), not a page of
    its own ("/forum/", "intro.html") or a place on the same page."""
    try:
        url = urlsplit((href or "").strip())
    except ValueError:
        return False
    if url.scheme not in {"", "http", "https"}:
        return False
    path = url.path
    if url.netloc or path.startswith("/"):
        return _FRONT_PAGE.fullmatch(path.lstrip("/")) is not None
    return bool(path) and _FRONT_PAGE.fullmatch(path) is not None


def title_named(attrs: list[tuple[str, str | None]]) -> bool:
    """Whether an element's class names it a title: a block holding it is no banner."""
    return any(n == "class" and "title" in _NAME_PARTS.split((v or "").lower()) for n, v in attrs)


def header_named(attrs: list[tuple[str, str | None]]) -> bool:
    """Whether an element's class or id names a page header, masthead or tagline."""
    values = {name: (value or "").lower() for name, value in attrs}
    parts = {*_NAME_PARTS.split(values.get("class", "")), *_NAME_PARTS.split(values.get("id", ""))}
    return not _HEADER_NAMES.isdisjoint(parts)


#: A block whose text is at least this share link text, with two links or more, is
#: navigation (jusText and boilerpipe call a paragraph with a third of its text in links
#: boilerplate; this asks for more, so that a "see also" sentence stays).
_LINK_DENSITY = 0.7
#: What the HTML parser counts as it shows text (indexes into its running counts): visible
#: characters, those inside links, links, headings, links to translations, code blocks,
#: words outside links that are not navigation's own ("next", "up", "index"), all words,
#: and separators outside links ("[", "|", "»").
CHARS, LINK_CHARS, LINKS, HEADINGS, TRANSLATIONS, CODE = range(6)
OWN_WORDS, WORDS, SEPARATORS = range(6, 9)
#: Counts that a dropped block gives back: what it showed no longer counts around it.
SHOWN = (CHARS, LINK_CHARS, LINKS, TRANSLATIONS, OWN_WORDS, WORDS, SEPARATORS)
WORD = re.compile(r"[^\W\d_]{2,}")
SEPARATOR_RUN = re.compile(r"[\s\[\]|·»›«‹]+")
#: A paragraph or a table with this many words of its own outside links, making this
#: share of its words, is prose or data, however many of its words are links.
_OWN_WORDS, _OWN_SHARE = 3, 0.25
PROSE_BLOCKS = {"p", "table"}


class Block:
    """A block the HTML parser judges when it ends (:mod:`tether.ingest.html`, rule 4):
    where its text starts in the output, and the parser's running counts when it opened."""

    __slots__ = ("at", "counts", "header", "prose", "tag")

    def __init__(self, tag: str, at: int, counts: list[int], header: bool) -> None:
        self.tag, self.at, self.header = tag, at, header
        self.counts = list(counts)
        self.prose = False  # kept for words of its own: its links are text around it

    def furniture(self, counts: list[int]) -> bool:
        """Whether the block, now ended, is navigation or a page header (never when it
        held a heading)."""
        n = [now - then for now, then in zip(counts, self.counts, strict=True)]
        if n[HEADINGS] or n[CODE]:  # a title or a code block (linked identifiers) is content
            return False
        if self.header:
            # After the page's first heading, a header with words of its own beside its
            # links ("See also: bind, listen": haproxy's keyword lines) is text; a bar of
            # "Next: ..., Up: ..." (texi2any) has only navigation's words.
            return not (self.counts[HEADINGS] and n[OWN_WORDS] >= 2)
        if n[TRANSLATIONS] and n[LINKS] >= 2:
            return True
        if self.tag in PROSE_BLOCKS and n[OWN_WORDS] >= max(_OWN_WORDS, _OWN_SHARE * n[WORDS]):
            # A sentence that names its cross-references ("See Section 3.8.1"), a table
            # of linked parameters and what they do: its words of its own make it text.
            self.prose = True
            return False
        # Mostly links, or links between brackets and bars ("[ << ] | [ >> ] | [Top]").
        links, chars = n[LINK_CHARS], n[CHARS]
        if n[LINKS] < 2 or not chars:
            return False
        return links >= _LINK_DENSITY * chars or links + n[SEPARATORS] >= chars


#: A line that only says when the page last changed: "This page last modified on
#: 2022-01-20 21:38:08 UTC" (SQLite), "Last updated on Jan 5, 2023." (Sphinx), "Last
#: update: 2023-01-05" (MkDocs), "This page was last edited on 5 May 2023, at 10:00
#: (UTC)." (MediaWiki): nothing after the words but a date, a time and a zone.
_DATE_WORD = (
    r"(?:\d[\d:/.,-]*|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?"
    r"|(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?|at|on|[ap]\.?m\.?"
    r"|\(?(?:utc|gmt|z|cet|cest|bst|est|edt|cst|cdt|pst|pdt)\)?)"
)
_DATE_STAMP = re.compile(
    r"(?i)(?:(?:this |the )?(?:page|document|article|file|site|content|topic)\s+)?"
    r"(?:was\s+|has\s+been\s+)?(?:last\s+(?:modified|updated|edited|changed|revised|reviewed)"
    r"|last\s+update|(?:modified|updated)\s+(?:on|at|:))"
    rf"[\s:]*(?=[^.]*\d){_DATE_WORD}(?:\s+{_DATE_WORD})*\.?"
)


def date_stamp(text: str) -> bool:
    """Whether ``text`` (one block's, white space collapsed) only says when its page last
    changed: page metadata, not content (see :data:`_DATE_STAMP`)."""
    return len(text) <= 120 and bool(_DATE_STAMP.fullmatch(text.strip()))
