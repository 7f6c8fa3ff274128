"""roff, the language of man pages, as lines and as the characters it prints.

:func:`source_lines` cuts a page into text lines and requests (``.SH NAME`` is the request
``SH`` with the argument ``NAME``), joining continued lines and dropping what is no
text: comments, macro definitions (``.de``), ignored blocks (``.ig``) and conditionals
(``.if``, ``.ie``, ``.el``, with their ``\\{ ... \\}`` blocks). :func:`unescape` turns a
line's escapes into the characters they print. Nothing is ever run or read: a page's
``.so``, ``.sy`` or ``.pso`` is a request like any other, which the readers ignore.
"""

from __future__ import annotations

from collections.abc import Iterator

from tether.ingest.formats.data import TextBuilder
from tether.ingest.preformatted import fenced

#: What a man page is, as a media type.
MIME = "text/troff"

#: Requests whose lines up to a closing ``..`` (or the name given) are a definition.
_DEFINITIONS = {"de", "de1", "dei", "am", "am1", "ami", "ig"}
_CONDITIONALS = {"if", "ie", "el", "while"}
#: A string expanded inside a string this deep is left out (a page cannot loop).
_DEPTH = 8
#: Escapes followed by a delimited argument that prints nothing here (motions, widths,
#: overstrikes, drawing, device controls).
_DELIMITED = set("hvwoDlLbxXRSZAB")

#: Special characters by their roff names (``\\(em``, ``\\[em]``).
GLYPHS = {
    "em": "\u2014", "en": "\u2013", "hy": "-", "mi": "-", "bu": "\u2022", "aq": "'",
    "dq": '"', "lq": "\u201c", "rq": "\u201d", "oq": "\u2018", "cq": "\u2019", "co": "\u00a9",
    "rg": "\u00ae", "tm": "\u2122", "mu": "\u00d7", "di": "\u00f7", "+-": "\u00b1",
    "<=": "\u2264", ">=": "\u2265", "!=": "\u2260", "->": "\u2192", "<-": "\u2190",
    "==": "\u2261", "~=": "\u2248", "de": "\u00b0", "ga": "`", "aa": "\u00b4", "ti": "~",
    "ha": "^", "rs": "\\", "sl": "/", "ba": "|", "br": "|", "ul": "_", "ru": "_", "pl": "+",
    "eq": "=", "Fo": "\u00ab", "Fc": "\u00bb", "fo": "\u2039", "fc": "\u203a", "sc": "\u00a7",
    "ps": "\u00b6", "ct": "\u00a2", "Po": "\u00a3", "Eu": "\u20ac", "ye": "\u00a5",
    "mc": "\u00b5", "ss": "\u00df", "'a": "\u00e1", "'e": "\u00e9", "'i": "\u00ed",
    "'o": "\u00f3", "'u": "\u00fa", "`a": "\u00e0", "`e": "\u00e8", ":a": "\u00e4",
    ":o": "\u00f6", ":u": "\u00fc", "~n": "\u00f1", ",c": "\u00e7", "^a": "\u00e2",
    "^e": "\u00ea", "^o": "\u00f4", "lh": "\u261c", "rh": "\u261e", "sq": "\u25a1",
    "OK": "\u2713", "tdi": "\u00f7", "pc": "\u00b7", "vb": "|", "at": "@", "sh": "#",
}  # fmt: skip
#: One-character escapes and what they print ("" for nothing).
_SIMPLE = {
    "e": "\\", "\\": "\\", "-": "-", "&": "", "%": "", ":": "", "|": "", "^": "", "c": "",
    "d": "", "u": "", "{": "", "}": "", "p": "", "r": "", "a": "", "z": "", "k": "",
    " ": " ", "0": " ", "~": " ", "'": "'", "`": "`", ".": ".", "t": "\t", "E": "\\",
    ",": "", "/": "",
}  # fmt: skip


#: Characters a page's strings may print in all: strings that name strings that name
#: strings (``.ds a \\*b\\*b``, ``.ds b \\*c\\*c``...) print nothing past it.
_EXPANSION_BUDGET = 1 << 20


class Strings:
    """A page's strings (``.ds name value``), expanded where ``\\*(xx`` names them, within
    :data:`_EXPANSION_BUDGET` characters for the page."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {"R": "\u00ae", "Tm": "\u2122", "lq": "\u201c",
                                       "rq": "\u201d"}  # fmt: skip
        self.spent = 0

    def define(self, name: str, value: str, *, append: bool = False) -> None:
        value = value[1:] if value.startswith('"') else value  # (a leading quote keeps spaces)
        self.values[name] = (self.values.get(name, "") if append else "") + value[:4096]

    def get(self, name: str) -> str:
        return self.values.get(name, "")


class PageText:
    """What a man page reader writes: paragraphs filled from words, blocks of code kept
    line by line, and whether the next block goes on the line after the one before (an
    item's text after its tag)."""

    def __init__(self) -> None:
        self.builder = TextBuilder()
        self.strings = Strings()
        self.words: list[str] = []  # the paragraph being filled, a line break as "\n"
        self.code: list[str] | None = None  # the lines of a no-fill block, when in one
        self.tight = False

    def block(self, text: str) -> None:
        if text:
            self.builder.block(text, tight=self.tight)
        self.tight = False

    def flush(self) -> None:
        """Write the paragraph being filled (words marked to run together, joined)."""
        if not self.words:
            return
        paragraph = " ".join(self.words).replace(" \n ", "\n")
        self.words = []
        self.block(paragraph.replace(f" {NO_SPACE} ", "").replace(NO_SPACE, "").strip())

    def end_code(self) -> None:
        if self.code is not None:
            lines, self.code = self.code, None
            self.block(fenced("\n".join(lines)))


#: A mark between two words that run together (mdoc's ``Ns``, a closing bracket).
NO_SPACE = "\x00"


def source_lines(text: str) -> Iterator[tuple[str, str, list[str]]]:
    """The page's lines: ``("text", line, [])`` or ``("request", name, arguments)``,
    continued lines joined, and comments, definitions and conditionals left out."""
    lines = _joined(text.split("\n"))
    for line in lines:
        if not line.startswith((".", "'")):
            yield "text", _uncommented(line), []
            continue
        body = line[1:].lstrip(" \t")
        if not body or body.startswith(('\\"', "\\#")):
            continue
        name, _, rest = body.partition(" ")
        if "\t" in name:
            name, _, tail = name.partition("\t")
            rest = f"{tail} {rest}"
        if name in _DEFINITIONS:
            _skip_definition(lines, name, macro_args(_uncommented(rest)))
        elif name in _CONDITIONALS:
            _skip_block(lines, rest)
        else:
            yield "request", name, macro_args(_uncommented(rest))


def _joined(lines: list[str]) -> Iterator[str]:
    """Lines, each one that ends in an escaped newline (an odd run of backslashes) joined
    to the next."""
    held = ""
    for line in lines:
        run = len(line) - len(line.rstrip("\\"))
        if run % 2:
            held += line[:-1]
            continue
        yield held + line
        held = ""
    if held:
        yield held


def _skip_definition(lines: Iterator[str], name: str, args: list[str]) -> None:
    """Skip a macro definition or an ignored block, up to its end line (``..``, or the
    end macro its request names)."""
    index = 0 if name == "ig" else 1
    end = args[index] if len(args) > index else "."
    for line in lines:
        if line.startswith((".", "'")) and line[1:].strip().split(" ")[0] == end:
            return


def _skip_block(lines: Iterator[str], rest: str) -> None:
    """Skip a conditional's ``\\{ ... \\}`` block when it opens one (the condition is
    never evaluated: what it prints depends on the output device, not the text)."""
    depth = rest.count("\\{") - rest.count("\\}")
    while depth > 0:
        line = next(lines, None)
        if line is None:
            return
        depth += line.count("\\{") - line.count("\\}")


def _uncommented(line: str) -> str:
    """``line`` up to a ``\\"`` or ``\\#`` comment (an escaped backslash is no comment's
    start)."""
    if '\\"' not in line and "\\#" not in line:
        return line
    i = line.find("\\")
    while 0 <= i < len(line) - 1:
        if line[i + 1] in '"#':
            return line[:i].rstrip()
        i = line.find("\\", i + 2)
    return line


def macro_args(rest: str) -> list[str]:
    """A request's arguments: words apart at spaces, a double-quoted one whole (``""``
    inside it is a quote), an escaped space (``\\ ``) no separator."""
    args: list[str] = []
    i, n = 0, len(rest)
    while i < n:
        while i < n and rest[i] in " \t":
            i += 1
        if i >= n:
            break
        if rest[i] == '"':
            word, i = _quoted(rest, i + 1)
        else:
            start = i
            while i < n and rest[i] not in " \t":
                i += 2 if rest[i] == "\\" else 1
            word = rest[start:i]
        args.append(word)
    return args


def _quoted(rest: str, i: int) -> tuple[str, int]:
    out = []
    n = len(rest)
    while i < n:
        if rest[i] == '"':
            if i + 1 < n and rest[i + 1] == '"':
                out.append('"')
                i += 2
                continue
            return "".join(out), i + 1
        out.append(rest[i])
        i += 1
    return "".join(out), n


def unescape(text: str, strings: Strings | None = None, depth: int = 0) -> str:
    """What ``text`` prints: escapes as their characters (``\\-`` "-", ``\\(em`` "—",
    ``\\e`` a backslash, ``\\*(xx`` a string), font, size and motion escapes as nothing."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        j = text.find("\\", i)
        if j < 0 or j + 1 >= n:
            out.append(text[i:] if j < 0 else text[i:j])
            break
        out.append(text[i:j])
        shown, i = _escape(text, j + 1, strings, depth)
        out.append(shown)
    return "".join(out)


def _escape(text: str, i: int, strings: Strings | None, depth: int) -> tuple[str, int]:
    """The escape whose letter is at ``i``: what it prints, and where the text goes on."""
    c = text[i]
    i += 1
    if c in _SIMPLE:
        return _SIMPLE[c], i
    if c in "fFmM":
        return "", _name(text, i)[1]
    if c in "([":
        name, i = _name(text, i - 1)
        return _glyph(name), i
    if c == "*":
        name, i = _name(text, i)
        if strings is None or depth >= _DEPTH or strings.spent > _EXPANSION_BUDGET:
            return "", i
        expanded = unescape(strings.get(name), strings, depth + 1)
        strings.spent += len(expanded)
        return expanded, i
    if c in "ngV$":
        if c == "n" and i < len(text) and text[i] in "+-":
            i += 1
        return "", _name(text, i)[1]
    if c == "s":
        return "", _size_end(text, i)
    if c == "N" and i < len(text):
        code, i = _delimited(text, i)
        return (chr(int(code)) if code.isdigit() and int(code) < 0x110000 else ""), i
    if c in _DELIMITED and i < len(text):
        return "", _delimited(text, i)[1]
    return c, i  # an escaped character that is no escape prints itself


def _name(text: str, i: int) -> tuple[str, int]:
    """A name after an escape: ``(xx``, ``[name]`` or one character."""
    if i >= len(text):
        return "", i
    if text[i] == "(":
        return text[i + 1 : i + 3], i + 3
    if text[i] == "[":
        end = text.find("]", i)
        end = len(text) if end < 0 else end
        return text[i + 1 : end], end + 1
    return text[i], i + 1


def _glyph(name: str) -> str:
    if name in GLYPHS:
        return GLYPHS[name]
    if name.startswith(("u", "char")):
        digits = name[1:] if name.startswith("u") else name[4:]
        base = 16 if name.startswith("u") else 10
        try:
            return chr(int(digits.split("_")[0], base))
        except (ValueError, OverflowError):
            return ""
    return ""


def _size_end(text: str, i: int) -> int:
    """Where a size escape (``\\s+2``, ``\\s(12``, ``\\s[12]``, ``\\s'12'``, ``\\s0``)
    ends: one digit, or two when the first is 1, 2 or 3 (roff's old two-digit sizes)."""
    if i < len(text) and text[i] in "+-":
        i += 1
    if i < len(text) and text[i] == "(":
        return i + 3
    if i < len(text) and text[i] == "[":
        return _name(text, i)[1]
    if i < len(text) and text[i] == "'":
        return _delimited(text, i)[1]
    if i < len(text) and text[i].isdigit():
        i += 1
        if text[i - 1] in "123" and i < len(text) and text[i].isdigit():
            i += 1
    return i


def _delimited(text: str, i: int) -> tuple[str, int]:
    """The argument between the delimiter at ``i`` and its next occurrence."""
    delimiter = text[i]
    end = text.find(delimiter, i + 1)
    end = len(text) if end < 0 else end
    return text[i + 1 : end], end + 1
