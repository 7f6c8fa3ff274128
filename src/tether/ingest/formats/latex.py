"""LaTeX sources (papers, theses, books): the text a reader of the typeset document reads.

Read as source code, a paper is its preamble, its commands and its comments. This reader
keeps what the typeset page shows:

- ``\\title`` is the document's title; ``\\part`` to ``\\paragraph`` (starred or not) are
  its sections; the preamble, before ``\\begin{document}``, is left out;
- ``\\emph{text}``, ``\\textbf{text}`` and every command that wraps text keep the text;
  ``\\href{url}{text}`` is its text, ``\\url{...}`` its address, a footnote its text in
  brackets; labels, references, citations, figures' files, lengths and definitions are
  nothing (``\\input`` and ``\\include`` are never followed);
- ``itemize`` and ``enumerate`` items are ``- `` lines, a ``description`` item its term
  before a colon; a ``tabular`` a line per row, cells joined by ``|``; ``verbatim``,
  ``lstlisting`` and ``minted`` blocks are fenced code; mathematics stays as written,
  without its ``$`` signs;
- TeX's spellings are the characters they print (``--`` an en dash, ``\\%`` a percent
  sign, ``~`` a space, quotes from ``````...''``).

It is linear in the file (nested arguments are unwrapped a bounded number of times).
"""

from __future__ import annotations

import re

from tether.ingest.formats.data import TextBuilder, _document, one_line
from tether.ingest.loaders import FileBytes, LoadedDocument, decode_text
from tether.ingest.preformatted import fenced

MIME = "application/x-latex"
_SECTIONS = {"part": 1, "chapter": 1, "section": 2, "subsection": 3, "subsubsection": 4,
             "paragraph": 5}  # fmt: skip
_VERBATIM = re.compile(
    r"\\begin\{(verbatim|lstlisting|minted|Verbatim|alltt)\*?\}(?:\[[^\]\n]*\])?(?:\{[^}\n]*\})?"
    r"\n?(.*?)\\end\{\1\*?\}",
    re.DOTALL,
)
_COMMENT = re.compile(r"(?<!\\)%.*")
#: Commands that print nothing, with their arguments.
_DROPPED = (
    "label ref eqref pageref autoref cref Cref citeauthor nocite"
    " includegraphics input include bibliography bibliographystyle usepackage documentclass"
    " newcommand renewcommand providecommand newenvironment renewenvironment setlength"
    " addtolength setcounter addtocounter vspace hspace pagestyle thispagestyle hypersetup"
    " author date thanks index glossary graphicspath definecolor lstset geometry"
).split()
_DROP = re.compile(r"\\(?:" + "|".join(_DROPPED) + r")\b\*?")
_HEADING = re.compile(r"\\(" + "|".join(_SECTIONS) + r")\*?\s*(?:\[[^\]]*\])?\s*\{")
#: What bare commands print.
_SYMBOLS = {
    "ldots": "\u2026", "dots": "\u2026", "LaTeX": "LaTeX", "TeX": "TeX", "item": "\n- ",
    "par": "\x02", "newline": "\n", "S": "\u00a7", "copyright": "\u00a9", "textbackslash": "\\",
    "quad": " ", "qquad": " ", "times": "\u00d7", "pm": "\u00b1", "leq": "\u2264",
    "geq": "\u2265", "neq": "\u2260", "to": "\u2192", "rightarrow": "\u2192", "infty": "\u221e",
}  # fmt: skip
_PLACEHOLDER = "\x00{}\x00"


def load_latex(file: FileBytes) -> LoadedDocument:
    """A LaTeX file's text as typeset (see the module's docstring)."""
    source = decode_text(file)
    title = _argument(source, source.find("\\title")) if "\\title" in source else ""
    codes: list[str] = []

    def keep(match: re.Match[str]) -> str:
        codes.append(fenced(match.group(2).rstrip("\n")))
        return "\n\n" + _PLACEHOLDER.format(len(codes) - 1) + "\n\n"

    body = _VERBATIM.sub(keep, source)
    body = _COMMENT.sub("", body)
    start = body.find("\\begin{document}")
    if start >= 0:
        end = body.find("\\end{document}", start)
        body = body[start + len("\\begin{document}") : end if end >= 0 else len(body)]
    builder = TextBuilder()
    for kind, text in _parts(body):
        if kind == "heading":
            level, heading = text.split("\x01", 1)
            builder.heading(_plain(heading), int(level))
        else:
            for block in re.split(r"\n[ \t]*\n", text):
                shown = _restore(_plain(block), codes)
                builder.block(shown.strip())
    return _document(file, builder, MIME, [], one_line(_plain(title)) or file.stem)


def _parts(body: str) -> list[tuple[str, str]]:
    """The body cut at its sectioning commands: ``("heading", "level\\x01title")`` and
    ``("text", source)`` in order."""
    parts: list[tuple[str, str]] = []
    at = 0
    for match in _HEADING.finditer(body):
        if match.start() < at:
            continue
        parts.append(("text", body[at : match.start()]))
        close = _closing(body, match.end() - 1)
        parts.append(("heading", f"{_SECTIONS[match.group(1)]}\x01{body[match.end() : close]}"))
        at = close + 1
    parts.append(("text", body[at:]))
    return parts


def _closing(text: str, open_at: int) -> int:
    """Where the brace group opening at ``open_at`` closes (the text's end if never)."""
    depth = 0
    for i in range(open_at, len(text)):
        c = text[i]
        if c == "\\":
            continue
        if c == "{" and text[i - 1] != "\\":
            depth += 1
        elif c == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _argument(text: str, at: int) -> str:
    """The first brace group after ``at``."""
    open_at = text.find("{", at)
    return text[open_at + 1 : _closing(text, open_at)] if open_at >= 0 else ""


def _plain(source: str) -> str:
    """What a stretch of LaTeX prints."""
    text = _drop_commands(source)
    text = re.sub(r"\\begin\{(?:tabular|tabularx|longtable)\}(?:\{[^}]*\})*", "", text)
    text = re.sub(r"\\(?:begin|end)\{[^}]*\}(?:\[[^\]]*\])?", "\n", text)
    text = re.sub(r"\\item\s*\[([^\]]*)\]", r"\n- \1:", text)
    text = re.sub(r"\\href\s*\{[^{}]*\}", "", text)
    for _ in range(16):  # (innermost first: \emph{\textbf{x}} in two passes)
        unwrapped = _WRAPPING.sub(_unwrapped, text)
        if unwrapped == text:
            break
        text = unwrapped
    text = re.sub(r"\\([a-zA-Z]+)\*?", lambda m: _SYMBOLS.get(m.group(1), ""), text)
    text = re.sub(r"\\[\[\]()]", "", text)  # (display and inline mathematics' delimiters)
    text = re.sub(r"\\\\\s*", "\n", text).replace("&", " | ")
    text = re.sub(r"\\([%$#_{}& ])", r"\1", text).replace("{", "").replace("}", "")
    text = text.replace("---", "\u2014").replace("--", "\u2013").replace("~", " ")
    text = text.replace("``", "\u201c").replace("''", "\u201d").replace("$", "")
    text = re.sub(r"[ \t]+", " ", text)
    # One paragraph of the source is one block, its lines kept (items, rows); \par splits.
    return re.sub(r"\n(?:[ \t]*\n)+", "\n", text).replace("\x02", "\n\n")


_WRAPPING = re.compile(r"\\([a-zA-Z]+)\*?\s*(?:\[[^\]]*\])?\{([^{}]*)\}")


def _unwrapped(match: re.Match[str]) -> str:
    """A command's text argument as printed (a footnote in brackets, a citation's keys
    in square brackets, as a bibliography style numbers them)."""
    name, argument = match.groups()
    if name == "footnote":
        return f" ({argument})"
    if name in ("cite", "citep", "citet"):
        return f"[{argument}]"
    return argument


def _drop_commands(text: str) -> str:
    """``text`` without the commands of :data:`_DROPPED` and their arguments."""
    out: list[str] = []
    at = 0
    for match in _DROP.finditer(text):
        if match.start() < at:
            continue
        out.append(text[at : match.start()])
        i = match.end()
        while True:  # its [options] and {arguments}, however many
            j = i
            while j < len(text) and text[j] in " \t":
                j += 1
            if j < len(text) and text[j] == "[":
                close = text.find("]", j)
                i = len(text) if close < 0 else close + 1
            elif j < len(text) and text[j] == "{":
                i = _closing(text, j) + 1
            else:
                break
        at = i
    out.append(text[at:])
    return "".join(out)


def _restore(text: str, codes: list[str]) -> str:
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], text)
