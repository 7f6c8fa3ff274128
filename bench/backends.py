"""SQLite and PostgreSQL side by side: SciFact quality and latency, and N reader
processes with one writer, in one run.

    .venv/bin/python bench/backends.py [../shared/datasets/scifact] [--readers 4] [--seconds 30]

The SciFact corpus (5,183 abstracts, about 9,300 chunks) is indexed once into a SQLite
file with the local embedding model (all-MiniLM-L6-v2, the default; several minutes on 2
cores), then copied, vectors included, into a PostgreSQL 16 + pgvector database started
from the pgserver wheel. Both answer the 300 test claims:

- ``search`` hybrid and lexical: nDCG@10, recall@100, p50/p95 ms (query embedding
  included, the same model on both);
- ``retrieve`` (the whole pipeline): the share of claims answered grounded.

Then N reader processes search (lexical + vector, query vectors precomputed) while one
writer process adds documents (texts and vectors of the corpus again, under new ids),
for ``--seconds`` on each backend: reader queries/s, p50/p95 ms, writer documents/s.
Ratios are PostgreSQL / SQLite.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tether import Settings, Tether
from tether.eval.beir import eval_workspace, evaluate, index_dataset, load_beir
from tether.models import Scope
from tether.retrieve.fts import compile_match
from tether.retrieve.vector import VectorIndex
from tether.store import ChunkVectors, NewChunk, NewDocument, Store, open_store
from tether.store.postgres.local import LocalPostgres


def copy_store(source: Store, target: Store, model: str) -> int:
    """Every document of ``source`` with its chunks and ``model`` vectors into
    ``target`` (through the store interface); how many chunks."""
    snapshot = source.load_vectors(model)
    vectors = {chunk_id: (dims, blob) for chunk_id, dims, blob in snapshot.rows}
    copied = 0
    for document in source.list_documents():
        target.ensure_workspace(document.workspace_id)
        chunks = source.chunks_of(document.id)
        dims = vectors[chunks[0].id][0] if chunks and chunks[0].id in vectors else 0
        blobs = ChunkVectors(model, dims, [vectors[c.id][1] for c in chunks]) if dims else None
        target.insert_document(_new_document(document), [_new_chunk(c) for c in chunks], blobs)
        copied += len(chunks)
    return copied


def _new_document(d: Any, *, id: str | None = None) -> NewDocument:
    tags = d.tags
    return NewDocument(
        id or d.id, d.workspace_id, d.title, d.source_path if id is None else None,
        d.source_type, d.mime,
        d.content_hash if id is None else f"{d.content_hash}-{id}", d.file_size, d.metadata,
        project_id=tags.project_id if tags else None, domain=tags.domain if tags else None,
        status=d.status, chunking=d.chunking,
    )  # fmt: skip


def _new_chunk(c: Any) -> NewChunk:
    return NewChunk(
        c.ordinal, c.content, c.section_title, c.char_start, c.char_end, c.page,
        c.content_hash, token_count=c.token_count, page_label=c.page_label,
    )  # fmt: skip


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def quality(db: str, dataset: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Tether(db, settings=Settings()) as tether:
        evaluate(tether, dataset, mode="hybrid")  # warm: model, vectors, caches
        for mode in ("hybrid", "lexical"):
            report = evaluate(tether, dataset, mode=mode, pipeline=mode == "hybrid")
            out[mode] = report
    return out


def _reader(
    db: str, workspace: str, model: str, work: list[tuple[str, Any]], seconds: float, out: Any
) -> None:
    store = open_store(db)
    vectors = store.native_vectors(model)
    if vectors is None:
        vectors = VectorIndex(store, model)
    scope = Scope.workspace(workspace)
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < deadline:
        match, query = work[i % len(work)]
        started = time.perf_counter()
        store.search_lexical_scores(scope, match, 300)
        vectors.search(scope, query, 300)
        times.append((time.perf_counter() - started) * 1000)
        i += 1
    store.close()
    out.put(times)


WRITES = "bench-writes"  # the writer's workspace, emptied after each run


def _writer(db: str, workspace: str, model: str, seconds: float, out: Any) -> None:
    store = open_store(db)
    store.ensure_workspace(WRITES)
    source = store.list_documents(workspace_id=workspace)[:500]
    snapshot = {c: (d, b) for c, d, b in store.load_vectors(model).rows}
    added, deadline, n = 0, time.perf_counter() + seconds, 0
    while time.perf_counter() < deadline:
        document = source[n % len(source)]
        chunks = store.chunks_of(document.id)
        dims = snapshot[chunks[0].id][0]
        blobs = ChunkVectors(model, dims, [snapshot[c.id][1] for c in chunks])
        new_id = f"copy-{os.getpid()}-{n}"
        copy = dataclasses.replace(_new_document(document, id=new_id), workspace_id=WRITES)
        store.insert_document(copy, [_new_chunk(c) for c in chunks], blobs)
        added += 1
        n += 1
    store.close()
    out.put(added)


def _empty_writes(db: str) -> None:
    store = open_store(db)
    with store.write():
        for document in store.list_documents(workspace_id=WRITES):
            store.delete_document(document.id)
    store.close()


def concurrency(
    db: str, workspace: str, model: str, work: list[tuple[str, Any]], readers: int, seconds: float
) -> dict[str, float]:
    _empty_writes(db)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    args = (db, workspace, model, work, seconds, out)
    procs = [ctx.Process(target=_reader, args=args) for _ in range(readers)]
    procs.append(ctx.Process(target=_writer, args=(db, workspace, model, seconds, out)))
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    _empty_writes(db)  # the store as it was, for the next backend
    times = [t for r in results if isinstance(r, list) for t in r]
    added = next(r for r in results if isinstance(r, int))
    return {
        "queries_per_s": len(times) / seconds,
        "p50": _percentile(times, 0.5),
        "p95": _percentile(times, 0.95),
        "documents_per_s": added / seconds,
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default="../shared/datasets/scifact")
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--keep", help="a SQLite file to index into once and reuse")
    parser.add_argument("--no-quality", action="store_true", help="readers + writer only")
    parser.add_argument("--json", type=Path, help="also write every number here as JSON")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    out: dict[str, Any] = {"command": sys.argv, "readers": args.readers, "seconds": args.seconds}
    dataset = load_beir(args.dataset)
    workspace = eval_workspace(dataset)
    with tempfile.TemporaryDirectory(prefix="tether-backends-") as tmp:
        sqlite_db = args.keep or str(Path(tmp) / "scifact.db")
        model = index_into_sqlite(sqlite_db, dataset)
        with LocalPostgres(Path(tmp) / "pg") as pg:
            pg_db = pg.new_database("scifact")
            copy_into_postgres(sqlite_db, pg_db, model)
            dbs = {"sqlite": sqlite_db, "postgres": pg_db}
            if not args.no_quality:
                out["quality"] = compare_quality(dbs, dataset)
            work = reader_work(sqlite_db, dataset)
            out["load"] = compare_load(dbs, workspace, model, work, args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


def index_into_sqlite(sqlite_db: str, dataset: Any) -> str:
    """Index SciFact into the SQLite file (a kept one is reused); the embedding model."""
    started = time.perf_counter()
    with Tether(sqlite_db, settings=Settings()) as tether:
        index_dataset(tether, dataset)
        model = tether._searcher.embedder.model  # type: ignore[union-attr]
        print(f"indexed into SQLite in {time.perf_counter() - started:.0f} s", flush=True)
    return model


def copy_into_postgres(sqlite_db: str, pg_db: str, model: str) -> None:
    started = time.perf_counter()
    source, target = open_store(sqlite_db), open_store(pg_db)
    chunks = copy_store(source, target, model)
    source.close()
    target.close()
    print(f"copied {chunks} chunks into PostgreSQL in"
          f" {time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip


def compare_quality(dbs: dict[str, str], dataset: Any) -> dict[str, Any]:
    """SciFact on each backend, printed side by side; the reports as JSON."""
    reports = {name: quality(db, dataset) for name, db in dbs.items()}
    print_quality(reports)
    return {
        name: {mode: r.to_dict() for mode, r in by_mode.items()}
        for name, by_mode in reports.items()
    }


def reader_work(sqlite_db: str, dataset: Any) -> list[tuple[str, Any]]:
    """The readers' queries: 200 claims as FTS5 MATCH expressions with their vectors."""
    with Tether(sqlite_db, settings=Settings()) as tether:
        embedder = tether._searcher.embedder
        claims = list(dataset.queries.values())[:200]
        queries = embedder.embed(claims)  # type: ignore[union-attr]
    work = [(compile_match(c), q) for c, q in zip(claims, queries, strict=True)]
    return [(m, q) for m, q in work if m]


def compare_load(
    dbs: dict[str, str],
    workspace: str,
    model: str,
    work: list[tuple[str, Any]],
    args: argparse.Namespace,
) -> dict[str, dict[str, float]]:
    """N readers + 1 writer on each backend in turn, printed as they finish."""
    print(
        f"\n{args.readers} reader processes (lexical top 300 + vector top 300 in the"
        f" corpus workspace) + 1 writer adding documents, {args.seconds:.0f} s each"
    )
    load = {}
    for backend, db in dbs.items():
        r = concurrency(db, workspace, model, work, args.readers, args.seconds)
        load[backend] = r
        print(
            f"{backend:10} {r['queries_per_s']:7.1f} queries/s  p50 {r['p50']:6.1f} ms"
            f"  p95 {r['p95']:6.1f} ms  writer {r['documents_per_s']:6.1f} docs/s",
            flush=True,
        )
    s, p = load["sqlite"], load["postgres"]
    qps = p["queries_per_s"] / s["queries_per_s"]
    docs = p["documents_per_s"] / max(s["documents_per_s"], 1e-9)
    print(f"ratio postgres/sqlite: queries/s {qps:.2f}x, writer {docs:.2f}x")
    return load


def print_quality(reports: dict[str, dict[str, Any]]) -> None:
    print("\nSciFact (300 claims; query embedding included)")
    print(
        f"{'backend':10} {'mode':8} {'nDCG@10':>8} {'R@100':>7} {'p50 ms':>8} {'p95 ms':>8}"
        f" {'grounded':>9}"
    )
    for backend, by_mode in reports.items():
        for mode, r in by_mode.items():
            grounded = f"{r.pipeline.grounded:.3f}" if r.pipeline else ""
            print(
                f"{backend:10} {mode:8} {r.ndcg_at_10:8.4f} {r.recall_at_100:7.4f}"
                f" {r.latency_ms_p50:8.1f} {r.latency_ms_p95:8.1f} {grounded:>9}"
            )
    for mode in ("hybrid", "lexical"):
        s, p = reports["sqlite"][mode], reports["postgres"][mode]
        ratio = p.latency_ms_p50 / s.latency_ms_p50
        print(
            f"ratio postgres/sqlite {mode}: p50 {ratio:.2f}x,"
            f" nDCG@10 {p.ndcg_at_10 - s.ndcg_at_10:+.4f}"
        )


if __name__ == "__main__":
    main()
