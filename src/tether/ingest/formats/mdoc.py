"""Man pages written with the BSD mdoc(7) macros (OpenSSH's, tmux's, the BSDs'), read as
``man`` shows them.

mdoc names what each word is (``.Fl v`` a flag, ``.Ar file`` an argument, ``.Xr ssh 1`` a
reference) and the formatter decides how it looks. This reader prints what the page
shows: ``.Fl v`` is "-v", ``.Op Fl v Ar file`` is "[-v file]", ``.Xr ssh_config 5`` is
"ssh_config(5)", ``.Pq`` and ``.Dq`` put brackets and quotes around the rest of the line;
``.Sh`` and ``.Ss`` are the sections; a ``-tag`` list item's tag (``.It Fl p Ar port``) is a
line of its own with its text on the next line, bullets are ``- `` items, a column list a
line per row; ``.Bd -literal`` displays and ``.Dl`` lines are fenced code.
"""

from __future__ import annotations

from collections.abc import Iterator

from tether.ingest.formats.data import _document, one_line
from tether.ingest.formats.roff import MIME, NO_SPACE, PageText, source_lines, unescape
from tether.ingest.loaders import FileBytes, LoadedDocument
from tether.ingest.preformatted import fenced

#: Macros that print their arguments as they are (what they mark is the font's business).
_PLAIN = set(
    "Ar Cm Pa Ev Dv Er Ic Li Em Sy Va Fa Ft No Ql Sx Tn Cd Ad In Ms Vt Mt Lb Nd Ot Es En"
    " Ho Hc Fr".split()
)
#: Macros that enclose the rest of the line: their opening and closing characters.
_ENCLOSE = {
    "Op": ("[", "]"), "Pq": ("(", ")"), "Dq": ("\u201c", "\u201d"), "Sq": ("\u2018", "\u2019"),
    "Qq": ('"', '"'), "Aq": ("\u27e8", "\u27e9"), "Bq": ("[", "]"), "Brq": ("{", "}"),
}  # fmt: skip
#: Opening and closing parts of enclosures written as two macros (``.Oo ... .Oc``).
_OPENS = {"Oo": "[", "Po": "(", "Do": "\u201c", "So": "\u2018", "Qo": '"', "Bo": "[",
          "Bro": "{", "Ao": "\u27e8"}  # fmt: skip
_CLOSES = {"Oc": "]", "Pc": ")", "Dc": "\u201d", "Sc": "\u2019", "Qc": '"', "Bc": "]",
           "Brc": "}", "Ac": "\u27e9"}  # fmt: skip
_NAMES = {"Ux": "UNIX", "Bx": "BSD", "Ox": "OpenBSD", "Nx": "NetBSD", "Fx": "FreeBSD",
          "Dx": "DragonFly", "At": "AT&T UNIX", "Bsx": "BSD/OS"}  # fmt: skip
_CALLABLE = _PLAIN | set(_ENCLOSE) | set(_OPENS) | set(_CLOSES) | set(_NAMES) | {
    "Fl", "Xr", "Ns", "Pf", "Ap", "Ta", "Nm", "Fn", "Lk", "St", "Xo", "Xc", "Eo", "Ec"
}  # fmt: skip
#: Punctuation that takes no space before it, and that which takes none after it.
_CLOSING = {".", ",", ";", ":", ")", "]", "?", "!", "}"}
_OPENING = {"(", "[", "{"}


def load_mdoc(file: FileBytes, text: str) -> LoadedDocument:
    """An mdoc(7) page (see the module's docstring)."""
    page = _Mdoc()
    page.read(source_lines(text))
    return _document(file, page.builder, MIME, [], page.title())


class _Mdoc(PageText):
    def __init__(self) -> None:
        super().__init__()
        self.lists: list[str] = []  # the kinds of the open .Bl lists
        self.name = ""
        self.section = ("", "")  # .Dt's name and section
        self.description = ""
        self.spaced = True  # .Sm off: the words of macro lines run together

    def title(self) -> str:
        name, section = self.section
        name = (self.name or name).strip()
        title = f"{name}({section})" if section else name
        return one_line(f"{title} - {self.description}" if self.description else title)

    def read(self, lines: Iterator[tuple[str, str, list[str]]]) -> None:
        for kind, text, args in lines:
            if kind == "text":
                self.text(unescape(text, self.strings))
            else:
                self.macro(text, args)
        self.flush()
        self.end_code()

    def text(self, shown: str) -> None:
        if self.code is not None:
            self.code.append(shown.rstrip())
        elif not shown.strip():
            self.flush()
        else:
            self.words.append(shown.strip())

    def macro(self, name: str, args: list[str]) -> None:
        if name in ("Sh", "Ss"):
            self.flush()
            self.end_code()
            self.builder.heading(self.inline(args), 1 if name == "Sh" else 2)
            self.tight = False
        elif name in ("Pp", "Lp", "sp", "Bl", "El", "Ed", "Bd", "br"):
            self.blocks(name, args)
        elif name == "It":
            self.item(args)
        elif name in ("Dt", "Nd") or (name == "Nm" and args and not self.name):
            self.header(name, args)
        elif name == "Sm":
            self.spaced = bool(args) and args[0] == "on" if args else not self.spaced
        elif name in ("D1", "Dl"):
            self.flush()
            shown = self.inline(args)
            self.block(fenced(shown) if name == "Dl" else shown)
        elif name in _CALLABLE:
            self.text(self.inline([name, *args]))
        # (anything else, .Os, .Dd, roff requests, lays out or dates the page: no text)

    def header(self, name: str, args: list[str]) -> None:
        if name == "Dt":
            self.section = (args[0].lower() if args else "", args[1] if len(args) > 1 else "")
        elif name == "Nd":
            self.description = self.inline(args)
            self.text(f"{self.name} - {self.description}")
        else:
            self.name = unescape(args[0], self.strings)  # (printed by .Nd after it)

    def blocks(self, name: str, args: list[str]) -> None:
        """Paragraphs, lists and displays."""
        self.flush()
        if name == "Bl":
            kind = next((a[1:] for a in args if a.startswith("-") and a != "-compact"), "tag")
            self.lists.append(kind)
        elif name == "El":
            if self.lists:
                self.lists.pop()
            self.tight = False
        elif name == "Bd" and any(a in ("-literal", "-unfilled") for a in args):
            self.code = []
        elif name == "Ed":
            self.end_code()
        elif name == "sp" and self.code is not None:
            self.code.append("")

    def item(self, args: list[str]) -> None:
        """``.It``: a tag on its line (its text after it), a bullet, a number, a row."""
        self.flush()
        kind = self.lists[-1] if self.lists else "tag"
        if kind in ("bullet", "dash", "hyphen", "item"):
            self.words.append("-")
            self.tight = True
        elif kind == "enum":
            self.words.append("1.")
            self.tight = True
        elif kind == "column":
            self.tight = True
            self.block(self.inline(args).replace("\t", " | "))
            self.tight = True
        else:
            self.block(self.inline(args))
            self.tight = True

    def inline(self, args: list[str]) -> str:
        """What a line of mdoc macros and words prints."""
        out = _Inline(self).words(args, 0, len(args))
        text = " ".join(out) if self.spaced else NO_SPACE.join(out)
        text = text.replace(f" {NO_SPACE} ", "").replace(NO_SPACE, "")
        return text.replace(" \t ", "\t")


#: Enclosures inside enclosures (``.Op Ar a Op Ar b``) deeper than this print as words.
_NESTING = 32


class _Inline:
    """One line's macros and words, each macro taking the words that follow it."""

    def __init__(self, page: _Mdoc) -> None:
        self.page = page
        self.depth = 0

    def words(self, args: list[str], i: int, end: int) -> list[str]:
        out: list[str] = []
        while i < end:
            token = args[i]
            if token in _CALLABLE:
                printed, i = self.macro(token, args, i + 1, end)
                out += printed
            else:
                out += self.word(unescape(token, self.page.strings))
                i += 1
        return out

    def word(self, shown: str) -> list[str]:
        if shown in _CLOSING:
            return [NO_SPACE, shown]
        if shown in _OPENING:
            return [shown, NO_SPACE]
        return [shown]

    def macro(self, name: str, args: list[str], i: int, end: int) -> tuple[list[str], int]:
        """What macro ``name`` prints, and where the line goes on."""
        if name in _ENCLOSE and self.depth < _NESTING:
            self.depth += 1
            opening, closing = _ENCLOSE[name]
            last = end  # (closing punctuation at the line's end goes after the enclosure)
            while last > i and args[last - 1] in _CLOSING:
                last -= 1
            inner = self.words(args, i, last)
            self.depth -= 1
            after = [part for p in args[last:end] for part in (NO_SPACE, p)]
            return [opening, NO_SPACE, *inner, NO_SPACE, closing, *after], end
        if name in _OPENS or name in _CLOSES:
            return ([_OPENS[name], NO_SPACE] if name in _OPENS else [NO_SPACE, _CLOSES[name]]), i
        if name in _NAMES:
            return [_NAMES[name]], i
        if name in ("Ns", "Ap", "Pf", "Ta", "Xo", "Xc", "Eo", "Ec"):
            return self.joiner(name, args, i)
        stop = next((k for k in range(i, end) if args[k] in _CALLABLE), end)
        own = [unescape(a, self.page.strings) for a in args[i:stop]]
        return self.printed(name, own), stop

    def joiner(self, name: str, args: list[str], i: int) -> tuple[list[str], int]:
        if name == "Ap":
            return [NO_SPACE, "'", NO_SPACE], i
        if name == "Ta":
            return ["\t"], i
        if name == "Pf" and i < len(args):
            return [unescape(args[i], self.page.strings), NO_SPACE], i + 1
        return ([NO_SPACE] if name == "Ns" else []), i

    def printed(self, name: str, own: list[str]) -> list[str]:
        """What a macro prints of its own words (``own``)."""
        words = [w for w in own if w not in _CLOSING]
        trailing = [w for w in own if w in _CLOSING]
        tail = [part for w in trailing for part in (NO_SPACE, w)]
        if name == "Fl":
            return ["-" + w for w in words] + tail if words else ["-", *tail]
        if name == "Xr" and len(words) >= 2:
            return [f"{words[0]}({words[1]})", *words[2:], *tail]
        if name == "Nm":
            return (words or [self.page.name]) + tail
        if name == "Fn" and words:
            return [f"{words[0]}({', '.join(words[1:])})", *tail]
        if name == "Lk" and words:
            return [" ".join(words[1:]) or words[0], *tail]
        if name == "Ar" and not words:
            return ["file ...", *tail]
        return words + tail
