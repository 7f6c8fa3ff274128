"""Zip files read with bounds: Office files, OpenDocument and EPUB are zip files, and a
zip file a few kB long can declare gigabytes (a zip bomb) or millions of members.

:func:`open_zip` refuses an archive whose table of contents declares more than
:data:`MAX_MEMBERS` members or more than :data:`MAX_UNPACKED` bytes in all (or more than
:data:`MAX_RATIO` times its own size, past a small floor); :func:`read_member` reads one
member and stops at the size it declared, whatever the compressed stream says, so a member
that lies about its size fails instead of growing. Both raise
:class:`~tether.errors.UnreadableFile` naming the file and the bound. The worker process's memory
limit and ``rag.file_timeout`` still bound whatever gets past these.
"""

from __future__ import annotations

import io
import zipfile

from tether.errors import UnreadableFile

#: Members an archive may hold.
MAX_MEMBERS = 20_000
#: Bytes its members may declare in all.
MAX_UNPACKED = 512 * 2**20
#: How many times its own size its members may declare (past :data:`RATIO_FLOOR`).
MAX_RATIO = 200
RATIO_FLOOR = 64 * 2**20


def open_zip(data: bytes, source: str) -> zipfile.ZipFile:
    """The archive in ``data``, its table of contents checked against the bounds above."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise UnreadableFile(source, f"is not a readable zip file ({exc})") from exc
    members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        archive.close()
        raise UnreadableFile(source, f"holds {len(members):,} files (at most {MAX_MEMBERS:,})")
    declared = sum(member.file_size for member in members)
    bound = min(MAX_UNPACKED, max(RATIO_FLOOR, MAX_RATIO * len(data)))
    if declared > bound:
        archive.close()
        raise UnreadableFile(
            source,
            f"unpacks to {declared:,} bytes from {len(data):,} (at most {bound:,}): a zip"
            " bomb, or a file too large to read",
        )
    return archive


def read_member(archive: zipfile.ZipFile, name: str, source: str) -> bytes:
    """Member ``name``'s bytes, never more than it declared."""
    try:
        info = archive.getinfo(name)
        with archive.open(info) as member:
            data = member.read(info.file_size + 1)
    except KeyError as exc:
        raise UnreadableFile(source, f"has no {name!r} inside") from exc
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise UnreadableFile(source, f"has a damaged {name!r} ({exc})") from exc
    if len(data) > info.file_size:
        raise UnreadableFile(source, f"{name!r} unpacks past the size it declares")
    return data
