"""A real store for the framework adapters' tests (``test_llamaindex``, ``test_haystack``):
every scope holds documents that match :data:`QUESTION`, so a retriever that looked in the
wrong scope shows up as a foreign document id."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import make_settings
from tether import Tether
from tether.testing import HashEmbedder

SESSION = "chat-1"
OTHER_SESSION = "chat-2"
EMPTY_SESSION = "chat-empty"
WORKSPACE = "lumen"
OTHER_WORKSPACE = "acme"
QUESTION = "what is the sensor policy?"
UNANSWERABLE = "volcanic eruptions in iceland"


@dataclass
class Library:
    t: Tether
    docs: dict[str, list[str]] = field(default_factory=dict)  # scope name -> document ids

    def ids(self, *names: str) -> set[str]:
        return {doc_id for name in names for doc_id in self.docs[name]}


def _add(t: Tether, text: str, title: str, where: dict[str, Any]) -> str:
    (result,) = t.add(text=text, title=title, **where)
    assert result.status == "indexed" and result.document_id
    return result.document_id


HERE = {"workspace_id": WORKSPACE, "session_id": SESSION}
THERE = {"workspace_id": OTHER_WORKSPACE, "session_id": OTHER_SESSION}
#: (scope name, text, title, where it goes); "session" is "warranty" and "setup" together.
DOCUMENTS = [
    (
        "warranty",
        "The sensor warranty policy covers the battery for two years.",
        "Sensor notes",
        {**HERE, "tags": {"domain": "warranty"}},
    ),
    (
        "setup",
        "The sensor setup policy says: calibrate the dial before first use.",
        "Setup notes",
        {**HERE, "tags": {"domain": "setup"}},
    ),
    (
        "workspace",
        "Workspace handbook: the sensor escalation policy sends tickets to tier two.",
        "Handbook",
        {"workspace_id": WORKSPACE},
    ),
    ("global", "Returns policy: a sensor may be returned within 30 days.", "Returns", {}),
    ("other", "The pump sensor policy: replace the gasket every spring.", "Pump manual", THERE),
    ("other", "Pump sensor service policy: the filter is washed monthly.", "Pump service", THERE),
]


def fill(t: Tether) -> Library:
    t.create_session(SESSION, workspace_id=WORKSPACE)
    t.create_session(OTHER_SESSION, workspace_id=OTHER_WORKSPACE)
    t.create_session(EMPTY_SESSION, workspace_id=WORKSPACE)
    lib = Library(t)
    for name, text, title, where in DOCUMENTS:
        lib.docs.setdefault(name, []).append(_add(t, text, title, where))
    lib.docs["session"] = lib.docs["warranty"] + lib.docs["setup"]
    return lib


@contextmanager
def open_library(db_path: Path) -> Iterator[Library]:
    """The library in a real SQLite file, with vectors from the shipped HashEmbedder."""
    with Tether(db=db_path, settings=make_settings(), embedder=HashEmbedder()) as t:
        yield fill(t)
