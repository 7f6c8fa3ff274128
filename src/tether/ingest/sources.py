"""What can be indexed: paths and texts, checked when they are handed over.

:func:`coerce_sources` turns what a caller gave (a path, a :class:`TextSource`, or an
iterable of them) into a list of sources, raising :class:`~tether.errors.InvalidArgument`
at once for anything else; :func:`smallest_first` is the order indexing runs in, so the
first results (and progress) come sooner.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.errors import InvalidArgument
from tether.ingest.formats import by_extension, sniff
from tether.models import Tags

if TYPE_CHECKING:
    from tether.ingest.loaders import FileBytes

TEXT_MIMES = ("text/plain", "text/markdown")


@dataclass(frozen=True)
class PathSource:
    """A file to index, with the tags, status and metadata its document gets.

    The file is read once, through one descriptor: its text and size come from the same
    bytes. ``content``: those bytes, already read (the library folder passes the bytes
    it hashed); the file is then not opened at all, and ``path`` is stored as given, not
    resolved (resolving it again could follow a link swapped in since it was read).
    ``source``: a stable key stored instead of the path (``"upload:manual.pdf"``), for a
    file whose path says nothing about it (an upload saved to a temporary folder): the
    same key in the same workspace is the same document, skipped when unchanged."""

    path: str | Path
    tags: Tags | Mapping[str, Any] | None = None
    status: str | None = None
    metadata: dict[str, Any] | None = None
    content: bytes | None = field(default=None, repr=False)
    source: str | None = None

    @property
    def label(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class TextSource:
    """A text to index. ``document_id`` or ``source`` (a stable key such as
    ``"artifact:42"``) identify it across re-indexes; without either, identical text in
    the same workspace is the same document."""

    text: str
    title: str
    mime: str = "text/plain"
    document_id: str | None = None
    source: str | None = None
    metadata: dict[str, Any] | None = None
    tags: Tags | Mapping[str, Any] | None = None
    status: str | None = None

    def __post_init__(self) -> None:
        for name in ("text", "title"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise InvalidArgument(f"TextSource.{name} must be str, not {type(value).__name__}")

    @property
    def label(self) -> str:
        return self.title


Source = PathSource | TextSource


def text_source(
    text: object,
    *,
    title: str | None,
    mime: str,
    document_id: str | None,
    source: str | None,
    metadata: dict[str, Any] | None,
    tags: Tags | Mapping[str, Any] | None,
    status: str | None,
) -> TextSource:
    """The :class:`TextSource` of ``add(text=...)``, its arguments checked."""
    if not isinstance(text, str):
        raise InvalidArgument(f"text must be str, not {type(text).__name__}")
    if mime not in TEXT_MIMES:
        raise InvalidArgument(f"mime must be one of {TEXT_MIMES}, not {mime!r}")
    return TextSource(
        text,
        title or source or document_id or "Untitled",
        mime=mime,
        document_id=document_id,
        source=source,
        metadata=metadata,
        tags=tags,
        status=status,
    )


def coerce_sources(
    sources: object, tags: Tags | Mapping[str, Any] | None = None, status: str | None = None
) -> list[Source]:
    """The sources of an add or submit, checked now: paths, TextSources or PathSources.
    ``tags`` and ``status`` go to every plain path; a plain path that is a folder stands
    for the files under it that tether reads (:func:`files_in_folder`)."""
    single = str | os.PathLike | TextSource | PathSource
    if isinstance(sources, single):
        many: list[Any] = [sources]
    elif isinstance(sources, Iterable) and not isinstance(sources, bytes):
        many = list(sources)
    else:
        raise InvalidArgument(
            f"sources must be a path, a TextSource or a list of them, not {type(sources).__name__}"
        )
    items: list[Source] = []
    for source in many:
        if isinstance(source, TextSource | PathSource):
            items.append(source)
        elif isinstance(source, str | os.PathLike):
            paths = files_in_folder(Path(source)) if _is_folder(source) else [source]
            items += [PathSource(path, tags=tags, status=status) for path in paths]
        else:
            raise InvalidArgument(
                f"a source must be a path or a TextSource, not {type(source).__name__}"
                f" ({source!r:.60})"
            )
    return items


def _is_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder; a path the system cannot even look up (a name too
    long) is not, and fails as its own source when it is read."""
    try:
        return Path(path).is_dir()
    except OSError:
        return False


def files_in_folder(folder: Path) -> list[Path]:
    """The files under ``folder`` (at any depth, in name order) whose names say they are
    of a format tether reads. Hidden names and symbolic links are left out, as the
    library folder's scan leaves them out. InvalidArgument when there is none."""
    found: list[Path] = []
    for top, folders, names in os.walk(folder):  # (symbolic links to folders: not followed)
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        files = [Path(top) / name for name in sorted(names) if not name.startswith(".")]
        found += [f for f in files if not f.is_symlink() and by_extension(f) is not None]
    if not found:
        raise InvalidArgument(
            f"{folder} is a folder without a file of a format tether reads (the formats:"
            " `tether formats`, or tether.ingest.formats.supported_extensions())"
        )
    return found


def smallest_first(items: list[Source]) -> list[int]:
    """The positions of ``items``, smallest source first (texts by length, files by size;
    an unreadable file counts as empty, so it fails fast, first)."""
    return sorted(range(len(items)), key=lambda i: _size(items[i]))


def _size(item: Source) -> int:
    if isinstance(item, TextSource):
        return len(item.text)
    if item.content is not None:
        return len(item.content)
    try:
        return os.path.getsize(item.path)
    except OSError:
        return 0


def attachment_sources(source: Source, attachments: Sequence[FileBytes]) -> list[Source]:
    """The files inside ``source`` that are documents of their own, as sources with its
    tags and status (named ``<file>#<name>``, or ``<its key>#<name>``): those of a format
    tether reads, by their name or their content (a ``.zip`` attached to a message is
    left out, not failed)."""
    key = source.source if isinstance(source, PathSource) else None
    attachments = [f for f in attachments if by_extension(f.path) or sniff(f.data)]
    return [
        PathSource(
            file.path,
            tags=source.tags,
            status=source.status,
            content=file.data,
            source=None if key is None else f"{key}#{file.path.name.rpartition('#')[2]}",
        )
        for file in attachments
    ]
