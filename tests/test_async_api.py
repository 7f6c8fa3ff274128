"""``Tether.asearch`` and ``Tether.aadd``: ``search`` and ``add`` for asyncio, on a real
store, with their blocking work on worker threads so that the event loop goes on."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tether import (
    ConfigurationError,
    Filters,
    IndexingFailed,
    InvalidArgument,
    Scope,
    ScopeError,
    Tether,
)
from tether.testing import HashEmbedder

PUMP = "# Pump\n\nThe pump primes in ten seconds when the intake valve is open.\n"
SENSOR = "# Sensor\n\nHold the reset pin for five seconds to reset the humidity sensor.\n"


class GatedEmbedder(HashEmbedder):
    """Embeds once ``gate`` is open, and the event loop opens it: an embedding run on the
    loop's own thread would wait in vain (``waited_in_vain``: for ``patience`` seconds)."""

    def __init__(self, patience: float = 5.0) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()  # open, until a test closes it
        self.patience = patience
        self.threads: set[int] = set()
        self.waited_in_vain = False

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        self.threads.add(threading.get_ident())
        if not self.gate.wait(self.patience):
            self.waited_in_vain = True
        return super().embed_batch(texts)


@pytest.fixture
def embedder() -> GatedEmbedder:
    return GatedEmbedder()


@pytest.fixture
def t(tmp_path: Path, embedder: GatedEmbedder) -> Iterator[Tether]:
    with Tether(db=tmp_path / "async.db", embedder=embedder) as tether:
        tether.add(text=PUMP, title="Pump", workspace_id="lumen", session_id="chat")
        tether.add(text=SENSOR, title="Sensor", workspace_id="lumen", tags={"domain": "climate"})
        yield tether


async def _while_the_loop_runs(embedder: GatedEmbedder, call: asyncio.Future) -> object:
    """Await ``call`` with the embedder's gate closed, opened by a task of this loop."""

    async def open_gate() -> None:
        await asyncio.sleep(0.05)
        embedder.gate.set()

    embedder.gate.clear()
    opener = asyncio.create_task(open_gate())
    result = await call
    await opener
    return result


def test_asearch_gives_what_search_gives(t: Tether) -> None:
    for arguments in (
        {"query": "pump primes", "workspace_id": "lumen"},
        {"query": "pump primes", "session_id": "chat", "mode": "lexical"},
        {"query": "reset the sensor", "scope": "workspace", "workspace_id": "lumen", "k": 1},
        {"query": "reset", "workspace_id": "lumen", "filters": Filters(domains=("climate",))},
        {"query": "pump primes", "workspace_id": "lumen", "judge": True},
    ):
        expected = t.search(**arguments)  # type: ignore[arg-type]
        found = asyncio.run(t.asearch(**arguments))  # type: ignore[arg-type]
        assert [h.chunk_id for h in found] == [h.chunk_id for h in expected], arguments
        assert [h.score for h in found] == pytest.approx([h.score for h in expected])
        assert found.scope == expected.scope and found.k == expected.k
        assert found.evidence == expected.evidence


def test_asearch_judges_and_keeps_the_scope_rule(t: Tether) -> None:
    hits = asyncio.run(t.asearch("pump primes", session_id="chat", judge=True))
    assert hits.scope == Scope.session("chat")
    assert hits.evidence is not None and set(hits.evidence) == {h.chunk_id for h in hits}
    assert all(0.0 <= value <= 1.0 for value in hits.evidence.values())
    assert asyncio.run(t.asearch("pump primes", session_id="chat", min_relevance=1.0)) == []


def test_aadd_gives_what_add_gives(t: Tether, tmp_path: Path) -> None:
    note = tmp_path / "valve.md"
    note.write_text("# Valve\n\nOpen the intake valve a quarter turn before priming.\n")
    first = asyncio.run(t.aadd([note], workspace_id="lumen", session_id="chat"))
    assert [(r.status, r.chunk_count > 0) for r in first] == [("indexed", True)]
    again = asyncio.run(t.aadd(note, workspace_id="lumen", session_id="chat"))
    assert [r.status for r in again] == ["skipped"]
    typed = asyncio.run(
        t.aadd(text="Torque the cap to 4 Nm.", title="Cap", workspace_id="w", document_id="cap")
    )
    assert typed[0].document_id == "cap"
    assert {d.id for d in t.documents(workspace_id="w")} == {"cap"}
    assert t.search("valve quarter turn", session_id="chat")[0].title == "Valve"


def test_aadd_reports_progress_and_failures_as_add_does(t: Tether, tmp_path: Path) -> None:
    bad = tmp_path / "tool.exe"
    bad.write_bytes(b"MZ\x90\x00")
    seen: list[str] = []
    results = asyncio.run(
        t.aadd(
            [bad],
            on_error="collect",
            progress=lambda done, total, result: seen.append(result.status),
        )
    )
    assert [r.status for r in results] == ["failed"] and seen == ["failed"]
    with pytest.raises(IndexingFailed):
        asyncio.run(t.aadd([bad]))


def test_aadd_and_asearch_leave_the_event_loop_free(t: Tether, embedder: GatedEmbedder) -> None:
    """The embedding waits for a task of the loop: it could only run if the loop was free
    while adding and searching."""

    async def both() -> None:
        loop_thread = threading.get_ident()
        added = await _while_the_loop_runs(
            embedder, t.aadd(text="The filter is rinsed weekly.", title="Filter")
        )
        assert added[0].status == "indexed"  # type: ignore[index]
        hits = await _while_the_loop_runs(
            embedder, t.asearch("how often is the filter rinsed", mode="vector")
        )
        assert hits and hits[0].title == "Filter"  # type: ignore[index]
        assert loop_thread not in embedder.threads

    embedder.threads.clear()
    asyncio.run(both())
    assert not embedder.waited_in_vain
    assert embedder.threads  # it did embed (the gate was not bypassed)


def test_many_asearches_run_side_by_side(t: Tether) -> None:
    async def many() -> list[list[str]]:
        queries = ["pump primes", "reset the sensor"] * 4
        results = await asyncio.gather(*(t.asearch(q, workspace_id="lumen") for q in queries))
        return [[h.title for h in hits][:1] for hits in results]

    assert asyncio.run(many()) == [["Pump"], ["Sensor"]] * 4


def test_errors_come_out_of_the_await(t: Tether) -> None:
    with pytest.raises(InvalidArgument):
        asyncio.run(t.asearch("pump", k=0))
    with pytest.raises(ScopeError, match="contradicts session"):
        asyncio.run(t.asearch("pump", scope="global", session_id="chat"))
    with pytest.raises(InvalidArgument):
        asyncio.run(t.aadd())


def test_a_same_thread_connection_is_refused_with_the_fix(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "same-thread.db")
    with Tether(db=connection) as t:
        with pytest.raises(ConfigurationError, match="check_same_thread=False"):
            asyncio.run(t.asearch("pump"))
        with pytest.raises(ConfigurationError, match="check_same_thread=False"):
            asyncio.run(t.aadd(text="x"))
    connection.close()
