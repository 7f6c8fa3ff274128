"""Markdown as its reader sees it: what site generators add to Markdown and take out
again when they render a page.

Documentation written in Markdown is rarely plain CommonMark. Its site generator reads
markup of its own that never reaches the reader as written: heading ids
(``## Install {#install}``: Docusaurus, Hugo, Pandoc, MkDocs' attribute lists), kramdown's
attribute lists (``{: .note}``), Jekyll's Liquid tags (``{% raw %}``, ``{% include %}``),
Hugo's shortcodes (``{{< tabs >}}``), MDX's imports and components (``import Tabs from
'@theme/Tabs';``, ``<TabItem value="linux" label="Linux">``) and admonitions (MkDocs'
``!!! note "Title"``, PyMdown's ``/// tip``, Docusaurus' ``:::tip``, GitHub's
``> [!WARNING]``), PyMdown's content tabs (``=== "Linux"``, their bodies indented as an
admonition's), snippets (``--8<-- "other.md"``) and abbreviations (``*[HTML]: ...``),
and the definitions of reference links (``[docs]: https://example.org/docs``), which
CommonMark never shows;
and MyST's (Sphinx's Markdown) directives, roles and targets: ```` ```{note} ````
is an admonition whose text is prose, not code, ```` ```{toctree} ```` is nothing,
``{ref}`the config <config>``` is "the config", and ``(config)=`` is nothing.
Indexed as they are, they put "install", "theme", "tabs" and "include" into a section's
title and its chunks, and a reader's citation shows them.

:func:`rendered_markdown` takes them out and keeps what the reader sees: the text inside
a shortcode or a component, a tab's label, an admonition's kind and title ("Tip: Pro
tip"). Code blocks and code spans are left as written: they show such markup as the
example it is. Templates that print a value (``{{ site.title }}``, Go's ``{{.ID}}``) are
left too: what they print is not in the file, and documentation about templates shows
them as text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_BACKTICKS = re.compile(r"`+")
#: An id or classes after an ATX heading's text: ``## Install {#install}``, ``{#id .tab}``.
_ATX_HEADING = re.compile(r"#{1,6}\s")
_HEADING_ATTRIBUTES = re.compile(r"\{\s*[#.][^{}]*\}")
#: kramdown's inline attribute list: ``{: .lead}``, ``{:#id}``, ``{: title="x"}``.
_ATTRIBUTE_LIST = re.compile(r"\{:[^{}\n]*\}")
#: Liquid (Jekyll) tags that never print as written: raw and its end, an include.
_LIQUID = re.compile(r"\{%-?\s*(?:end)?(?:raw|include|include_relative)\b[^%]*-?%\}")
#: A line that is one Liquid tag (Jekyll, GitBook): ``{% highlight ruby %}`` opens code
#: (``{% endhighlight %}`` closes it), GitBook's ``{% hint style="warning" %}`` is an
#: admonition and ``{% tab title="Linux" %}`` a tab's label; any other (``{% if %}``,
#: ``{% embed url="..." %}``, an end tag) shows nothing.
_LIQUID_LINE = re.compile(r"\s*\{%-?\s*(\w+)([^%]*)%\}\s*")
_HINT_STYLE = re.compile(r"\bstyle\s*=\s*[\"']?([\w-]+)")
#: A Hugo shortcode, opening or closing (not one escaped as an example: ``{{</* x */>}}``).
_SHORTCODE = re.compile(r"\{\{([<%])[ \t]*(?!/\*)(/?)[ \t]*[\w-]+((?:[^<>%}]|\}(?!\}))*)[>%]\}\}")
#: The attributes of a shortcode or a component that a reader sees as a label.
_LABEL = re.compile(r"\b(?:name|title|label|text|header)\s*=\s*(\"[^\"]*\"|'[^']*'|\{[^{}]*\})")
#: MDX: a module import or export, alone on its line.
_MDX_STATEMENT = re.compile(
    r"(?:import\s[^;\n]*?\sfrom\s+['\"][^'\"]+['\"]|export\s+(?:const|default|function)\s.*);?\s*"
)
#: MDX: a line that is only a component's tag (a capitalized name: HTML's are lower case).
_COMPONENT = re.compile(r"\s*</?[A-Z][\w.]*(?:\s[^<>]*)?/?>\s*")
#: Admonitions: MkDocs (``!!! note "Title"``, ``???+ tip``), Docusaurus / VitePress
#: (``:::tip Title`` ... ``:::``), GitHub (``> [!WARNING]``).
_BANG_ADMONITION = re.compile(
    r"(?:!!!|\?\?\?\+?)[ \t]+([\w-]+)(?:[ \t]+[\w-]+)*+(?:[ \t]+\"([^\"]*)\")?\s*"
)
_COLON_ADMONITION = re.compile(r" {0,3}:{3,}[ \t]*\{?([\w-]*)\}?(.*)")
#: PyMdown's content tabs (``=== "Linux"``, ``===+ "macOS"``): a tab's label, then its
#: body indented by four spaces, as an admonition's.
_TAB = re.compile(r"===[+!]?\s+\"([^\"]*)\"\s*")
_BODY_INDENT = "    "
#: An abbreviation's definition (``*[HTML]: Hyper Text Markup Language``: PyMdown, PHP
#: Markdown Extra): shown only as a tooltip over the word, never as a line.
_ABBREVIATION = re.compile(r" {0,3}\*\[[^\]\n]+\]:.*")
#: MyST (Sphinx's Markdown): a directive as a fenced block (```` ```{note} Title ````), its
#: option lines (``:class: tip``), a role (``{ref}`the config <config>```) and a target
#: line (``(config)=``).
_MYST_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})\{([\w:-]+)\}(.*)")
_MYST_OPTION = re.compile(r"\s*:[\w-]+:(?:\s.*)?")
_MYST_ROLE = re.compile(r"\{[\w:+-]+\}`([^`]+)`")
_MYST_TARGET = re.compile(r"\s*\([\w:.-]+\)=\s*")
_MYST_ADMONITIONS = frozenset(
    "note tip hint important warning caution attention danger error seealso admonition"
    " versionadded versionchanged deprecated margin sidebar topic dropdown".split()
)
_MYST_STEERING = frozenset("toctree tableofcontents contents index include".split())
_GITHUB_ALERT = re.compile(r"(\s*>\s*)\[!([A-Za-z]+)\]\s*$")
#: PyMdown's blocks (``/// tip | Title`` ... ``///``) and snippets (``--8<-- "file.md"``:
#: another file's text goes there, not this line).
_SLASH_BLOCK = re.compile(r"[ \t]*/{3,}[ \t]*([\w-]*)[ \t]*(?:\|(.*))?")
#: PyMdown blocks that show no label of their own: raw HTML, definitions, attributes and
#: captions (their text is the caption).
#: mkdocstrings' insertion of an object's API documentation (``::: griffe.Package``),
#: which renders under the object's name; the indented lines below it are its options.
_AUTODOC = re.compile(r" {0,3}:::[ \t]+([A-Za-z_]\w*(?:\.\w+)+)[ \t]*")
#: mkdocs-autorefs' anchor: an empty link with an id (``[](){#install}``), no text.
_EMPTY_ANCHOR = re.compile(r"\[\]\(\)\{[^{}\n]*\}")
_UNLABELLED_BLOCKS = frozenset({"html", "define", "attrs", "caption", "figure-caption"})
#: Material for MkDocs' icons (``:material-bug:``, ``:octicons-heart-fill-16:``), drawn
#: as pictures: no text.
_ICON = re.compile(r":(?:material|octicons|fontawesome|simple)-[a-z0-9-]+:")
#: PyMdown's keys (``++ctrl+alt+delete++``), drawn as key caps: the keys' names.
_KEYS = re.compile(r"\+\+([\w-]+(?:\+[\w-]+)*+)\+\+")
_SNIPPET = re.compile(r"\s*-{1,2}8<-{1,2}\s*(?:\"[^\"]*\"|'[^']*')?\s*")
#: What the markup of :func:`rendered_markdown` holds one of (else the text is as it reads).
_MARKERS = (
    *("{", "!!!", "???", ":::", "[", "import ", "<", "///", "8<", "===", "++"),
    *(":material-", ":octicons-", ":fontawesome-", ":simple-"),
)
#: A link reference definition (``[docs]: https://example.org/docs "Docs"``): where a
#: ``[text][docs]`` link goes, never shown (a footnote, ``[^1]: ...``, is shown).
_LINK_DEFINITION = re.compile(
    r" {0,3}\[(?!\^)[^\]\n]+\]:\s*\S+(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*"
)


def rendered_markdown(text: str) -> str:
    """``text`` without the site-generator markup a reader never sees (see the module)."""
    if not any(m in text for m in _MARKERS):
        return text
    out: list[str] = []
    fence: str | None = None  # an open code block: as written
    skipped: str | None = None  # an open MyST directive that steers the build: nothing
    prose: str | None = None  # an open MyST admonition: its text is prose
    depth = 0  # indented bodies open around the line (MkDocs' admonitions and tabs)
    options = False  # after an autodoc line: its indented options
    highlight = False  # the open code block is Liquid's {% highlight %}
    for line in text.split("\n"):
        if options and (not line.strip() or line[:1] in " \t"):
            out += [] if line.strip() else [""]
            continue
        options = False
        line, depth = _in_bodies(line, depth, keep=fence is not None or skipped is not None)
        tag = _LIQUID_LINE.fullmatch(line) if "{%" in line and skipped is None else None
        if tag and (fence is None or (highlight and tag.group(1) == "endhighlight")):
            line, highlight = _liquid_line(tag.group(1), tag.group(2), highlight)
            if line is None:
                continue
        opened = _FENCE.match(line)
        if fence is not None or skipped is not None:
            if fence is not None:
                out.append(line)
            if opened and _closes(line, fence or skipped or ""):
                fence = skipped = None
            continue
        if prose is not None and opened and _closes(line, prose):
            prose = None
            continue
        myst = _MYST_FENCE.match(line) if opened else None
        if myst and myst.group(2) in _MYST_STEERING:
            skipped = myst.group(1)
        elif myst and myst.group(2) in _MYST_ADMONITIONS:
            prose = myst.group(1)
            out.append(_admonition(myst.group(2), myst.group(3)))
        elif opened:
            fence = opened.group(1)
            out.append(line)
        elif autodoc := _AUTODOC.fullmatch(line):
            out.append(autodoc.group(1))
            options = True
        elif not (prose is not None and _MYST_OPTION.fullmatch(line)):
            shown = _shown_line(line)
            if _BANG_ADMONITION.fullmatch(line) or _TAB.fullmatch(line):
                depth += 1
            out += [] if shown is None else [shown]
    return "\n".join(out)


def _liquid_line(name: str, arguments: str, highlight: bool) -> tuple[str | None, bool]:
    """What a line of one Liquid tag reads as (None: nothing), and whether a
    ``{% highlight %}`` block is open after it."""
    if name == "highlight" and not highlight:
        language = arguments.strip(" -").split()
        return "```" + (language[0] if language else ""), True
    if name == "endhighlight" and highlight:
        return "```", False
    if name == "hint":
        style = _HINT_STYLE.search(arguments)
        return _admonition(style.group(1) if style else "note", None), highlight
    if name == "tab":
        return _label(arguments) or None, highlight
    return None, highlight


def _in_bodies(line: str, depth: int, *, keep: bool) -> tuple[str, int]:
    """``line`` without the indentation of the ``depth`` bodies open around it, and how
    many of them it is in: a line indented less than a body's four spaces ends that
    body (a blank line ends none). Inside a code block (``keep``) no body ends: a line of
    code may be indented less than its block."""
    if not depth or not line.strip():
        return ("" if depth else line), depth
    inside = min(depth, (len(line) - len(line.lstrip(" "))) // len(_BODY_INDENT))
    return line[len(_BODY_INDENT) * inside :], depth if keep else inside


#: Inline markup a heading's reader sees only as its text: images and links (their
#: text), strong and emphasized text (their words), backslash escapes.
_TITLE_MARKUP = (
    (re.compile(r"!?\[([^\[\]\n]*)\](?:\([^()\n]*\)|\[[^\[\]\n]*\])"), r"\1"),
    (re.compile(r"\*\*([^*\n]+)\*\*|__([^_\n]+)__"), r"\1\2"),
    (re.compile(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])|(?<!\w)_([^_\n]+)_(?!\w)"), r"\1\2"),
)
#: A backslash escape (``\_``): the character itself, kept apart from the markup above
#: (as a private-use character) while that is read.
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_ESCAPED = re.compile("[\ue021-\ue07e]")
#: A code span in a heading: its text, as an HTML page's heading reads.
_CODE_SPAN = re.compile(r"(?<!`)(`++)([^`]+)\1(?!`)")


def heading_text(title: str) -> str:
    """A Markdown heading's text as a reader sees it: ``## **Main API**`` is "Main API",
    ``## [Install](#install) the *widget*`` is "Install the widget", ``\\_`` is "_", and
    a code span is its text (``## The `--yes` flag`` is "The --yes flag"), as an HTML
    page's heading reads."""
    if not any(mark in title for mark in "*_[\\`"):
        return title

    def plain(part: str) -> str:
        part = _ESCAPE.sub(lambda m: chr(0xE000 + ord(m.group(1))), part)
        for pattern, replacement in _TITLE_MARKUP:
            part = pattern.sub(replacement, part)
        return _ESCAPED.sub(lambda m: chr(ord(m.group(0)) - 0xE000), part)

    return " ".join(_CODE_SPAN.sub(r"\2", _outside_code(title, plain)).split())


def _closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes the code block ``fence`` opened (as long, no info string)."""
    run = line.strip()
    marks = len(run) - len(run.lstrip(fence[0]))
    return bool(fence) and marks >= len(fence) and not run[marks:].strip()


def _shown_line(line: str) -> str | None:
    """What a reader sees of one line outside code (None: nothing, not even a blank)."""
    if _MDX_STATEMENT.fullmatch(line) or _COMPONENT.fullmatch(line):
        label = _label(line)
        return label if label else None
    bang = _BANG_ADMONITION.fullmatch(line)
    if bang:
        return _admonition(bang.group(1), bang.group(2))
    tab = _TAB.fullmatch(line)
    if tab:
        return _inline(tab.group(1)).strip() or None
    colon = _COLON_ADMONITION.fullmatch(line)
    if colon:
        title = colon.group(2).strip().removeprefix("[").removesuffix("]")  # (":::note[T]")
        return _admonition(colon.group(1), title) if colon.group(1) else None
    slash = _SLASH_BLOCK.fullmatch(line)
    if slash:
        kind = slash.group(1).lower()
        if kind == "tab":
            return (slash.group(2) or "").strip() or None
        return (
            _admonition(kind, slash.group(2)) if kind and kind not in _UNLABELLED_BLOCKS else None
        )
    if _SNIPPET.fullmatch(line) or _LINK_DEFINITION.fullmatch(line):
        return None
    if _ABBREVIATION.fullmatch(line):
        return None
    if _MYST_TARGET.fullmatch(line):
        return None
    alert = _GITHUB_ALERT.fullmatch(line)
    if alert:
        return f"{alert.group(1)}{alert.group(2).capitalize()}:"
    line = _without_heading_attributes(line)
    # A MyST role's text is in backticks, as a code span's is: read before code spans.
    line = _MYST_ROLE.sub(lambda m: role_text(m.group(1)), line)
    shown = _outside_code(line, _inline)
    if shown.strip() or not line.strip():
        return shown
    return None  # a line that held only markup


def _without_heading_attributes(line: str) -> str:
    """An ATX heading without the id or classes after its text (``{#install}``); any
    other line as it is. (No regular expression runs over the title: a title of many
    spaces costs no more than its length.)"""
    if not _ATX_HEADING.match(line) or not line.endswith("}"):
        return line
    at = line.rfind("{")
    head = line[:at].rstrip()
    if _HEADING_ATTRIBUTES.fullmatch(line[at:]) and _ATX_HEADING.match(head + " "):
        return head
    return line


def _inline(part: str) -> str:
    part = _SHORTCODE.sub(lambda m: _label(m.group(3)) if not m.group(2) else "", part)
    if "++" in part:
        part = _KEYS.sub(lambda m: m.group(1), part)
    if "-" in part:
        part = _ICON.sub("", part)
    if "[]()" in part:
        part = _EMPTY_ANCHOR.sub("", part)
    return _LIQUID.sub("", _ATTRIBUTE_LIST.sub("", part))


def role_text(text: str, *, called: bool = False) -> str:
    """What a Sphinx or MyST role shows: the title of ``title <target>``, else the
    target (its last name when it starts with ``~``), with ``()`` after a function's
    name (``called``)."""
    text = text.strip()
    if text.endswith(">") and "<" in text:
        title = text[: text.rfind("<")].rstrip()
        if title:
            return title
        text = text[text.rfind("<") + 1 : -1].strip()
    target = text.lstrip("!")
    shown = target.rpartition(".")[2] if target.startswith("~") else target
    shown = shown.lstrip("~")
    return shown + "()" if called and shown and not shown.endswith(")") else shown


def _label(attributes: str) -> str:
    """The label a shortcode's or a component's attributes show (a tab's name), or ""."""
    found = _LABEL.search(attributes)
    return found.group(1)[1:-1].strip() if found else ""


def _admonition(kind: str, title: str | None) -> str:
    """An admonition's first line as rendered: its title after its kind ("Tip: Pro tip"),
    or its kind alone ("Note:")."""
    name = kind.replace("-", " ").replace("_", " ").capitalize()
    title = _inline(title).strip() if title else ""
    return f"{name}: {title}" if title else f"{name}:"


def _outside_code(text: str, change: Callable[[str], str]) -> str:
    """``change`` applied to ``text`` outside its code spans (a run of backticks to the
    next run of as many: CommonMark's rule, found in one pass over the runs)."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    if len(runs) < 2:
        return change(text)
    by_length: dict[int, list[int]] = {}
    for i, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(i)
    taken = dict.fromkeys(by_length, 0)  # how far each length's runs have been paired
    parts: list[str] = []
    at = i = 0
    while i < len(runs):
        start, end = runs[i]
        same = by_length[end - start]
        while taken[end - start] < len(same) and same[taken[end - start]] <= i:
            taken[end - start] += 1
        if taken[end - start] == len(same):
            i += 1  # no closing run: these backticks are text
            continue
        close = same[taken[end - start]]
        parts += [change(text[at:start]), text[start : runs[close][1]]]
        at, i = runs[close][1], close + 1
    parts.append(change(text[at:]))
    return "".join(parts)
