"""How file paths are stored: losslessly, even a file name that is not UTF-8."""

from __future__ import annotations

#: The escape of :func:`stored_path`: U+FFFF, a noncharacter no file name needs.
_PATH_ESCAPE = "\uffff"


def stored_path(path: str | None) -> str | None:
    """``path`` as the store keeps it: as it is, unless it holds bytes that are not UTF-8
    (a file name Python decoded with surrogateescape, U+DC80-U+DCFF), which SQLite
    cannot store. Each such byte is written as U+FFFF and two hex digits, and U+FFFF
    itself as two of them: lossless (:func:`read_path` undoes it), and a folder prefix
    stays a prefix."""
    if path is None or not any(c == _PATH_ESCAPE or "\ud800" <= c <= "\udfff" for c in path):
        return path
    out = []
    for c in path:
        if "\udc80" <= c <= "\udcff":
            out.append(f"{_PATH_ESCAPE}{ord(c) - 0xDC00:02x}")
        elif "\ud800" <= c <= "\udfff":  # not from surrogateescape: no byte to give back
            out.append(f"{_PATH_ESCAPE}u{ord(c):04x}")
        elif c == _PATH_ESCAPE:
            out.append(_PATH_ESCAPE * 2)
        else:
            out.append(c)
    return "".join(out)


def read_path(text: str | None) -> str | None:
    """The path :func:`stored_path` stored as ``text``."""
    if text is None or _PATH_ESCAPE not in text:
        return text
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != _PATH_ESCAPE:
            out.append(c)
            i += 1
        elif text[i + 1 : i + 2] == _PATH_ESCAPE:
            out.append(_PATH_ESCAPE)
            i += 2
        elif text[i + 1 : i + 2] == "u":
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
        else:
            out.append(chr(0xDC00 + int(text[i + 1 : i + 3], 16)))
            i += 3
    return "".join(out)
