"""A ``<pre>`` block of an HTML page (or a reStructuredText literal block) as text: a
fenced code block (as in Markdown), or prose when it reads as sentences (a plain-text
e-mail, a text file served as a page)."""

from __future__ import annotations

import re

_BACKTICKS = re.compile("`{3,}")
#: A ``<pre>`` block that reads as prose (see :func:`_reads_as_prose`) is not fenced.
_PROSE_CHARS, _PROSE_SHARE = 200, 0.85
_SENTENCE_ENDS = re.compile(r"[.!?][\"')\]]*\s")
_PROMPT = re.compile(r"^[ \t]*(?:\$|>>>|\.\.\.|[A-Za-z]:\\>?|PS>) ", re.MULTILINE)
_COLUMNS = re.compile(r"^[ \t]*\S.*\S {3,}\S", re.MULTILINE)
_PLAIN_WORD = re.compile(r"[\"'(]?[^\W\d_][^\W\d_'’-]*(?:['’-][^\W\d_]+)*[\"')]?[.,;:!?]?[\"')]?")


def fenced(code: str, info: str = "") -> str:
    """A ``<pre>`` block's text between fences (longer than any backtick run inside; the
    opening one followed by ``info``, the code's language), nothing when it shows no
    text; prose kept in a ``<pre>`` (a plain-text e-mail, a text file served as a page)
    stays prose, line breaks and all."""
    code = code.strip("\n")
    if not code.strip():
        return ""
    if _reads_as_prose(code):
        return code
    fence = "`" * max([3, *(len(run) + 1 for run in _BACKTICKS.findall(code))])
    return f"{fence}{info}\n{code}\n{fence}"


def _reads_as_prose(text: str) -> bool:
    """Whether a ``<pre>`` block reads as sentences: at least :data:`_PROSE_CHARS`
    characters, two sentence ends, no prompt (``$ ``, ``>>> ``) or columns, and nearly
    every word a plain word (code has operators, brackets, paths and options between its
    words; a diagram, dashes)."""
    words = text.split()
    if len(text) < _PROSE_CHARS or len(_SENTENCE_ENDS.findall(text + " ")) < 2:
        return False
    if _PROMPT.search(text) or len(_COLUMNS.findall(text)) > 1:
        return False  # a terminal session, or text laid out in columns
    plain = sum(1 for word in words if _PLAIN_WORD.fullmatch(word))
    return plain >= _PROSE_SHARE * len(words)
