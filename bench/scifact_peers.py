"""SciFact: tether against its peers, quality and latency on the same chunks and vectors.

    .venv/bin/python bench/scifact_peers.py --store /tmp/scifact_bench.db --limit 30 --rounds 1
    .venv/bin/python bench/scifact_peers.py --store scifact.db --json peers.json
    .venv/bin/python bench/scifact_peers.py     # indexes SciFact first (about 10 min on 2 cores)

SciFact test split (5,183 abstracts, 300 judged claims). ``--store``: a tether SQLite store
holding it with the local model's vectors (``tether eval --db``), copied to a temporary
directory, never modified; the copy's FTS5 index is optimized (``INSERT INTO
rag_chunks_fts(rag_chunks_fts) VALUES('optimize')``: a store that went through write
benchmarks carries a fragmented index, a fresh one is compact). Without ``--store``,
``tether.eval.beir.index_dataset`` indexes the corpus into a temporary store first.

Every system gets the same chunk texts and vectors, read from that store, and the same
query vectors (the claims embedded once by tether's configured embedder, as its search
embeds a query): **query embedding is excluded everywhere**. Each answers the top ``--k``
(100) chunks per claim: tether ``search(scope="workspace", mode=...)`` (its embedder a
lookup); bm25s (``tokenize`` in the timed call, English stopwords, PyStemmer when
importable); LanceDB (a table on disk: native FTS, flat exact cosine with no ANN index,
hybrid by ``RRFReranker``); Chroma (in-memory, HNSW, cosine, approximate); LangChain
``BM25Retriever``, FAISS retriever (exact), their ``EnsembleRetriever`` (0.5/0.5).

Quality at document level: a chunk maps to its corpus id, a document ranks by its best
chunk, then ``tether.eval.beir`` nDCG@10 and recall@100 (of the documents in the top-``k``
chunks). Latency: ``--warm`` untimed queries, then every claim timed over ``--rounds``
passes, p50/p95 of all calls; systems one after another in this process, ``--threads``
BLAS/OpenMP threads (threadpoolctl, faiss). stdout: tether / peer ratios (below 1: tether is
faster), then the rows; stderr: progress. ``--json PATH`` writes rows, comparisons and
metadata (command line, versions, chunk count); ``run()`` returns the same dict.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tether import Embedder, Settings, Tether
from tether.embed import embedder_from_settings, from_blob
from tether.eval.beir import eval_workspace, index_dataset, load_beir, ndcg_at, recall_at

os.environ.setdefault("LANCEDB_LOG", "error")  # no per-query Rust deprecation warnings

SYSTEMS = ("tether", "bm25s", "lancedb", "chroma", "langchain")
DEFAULT_DATASET = Path(__file__).resolve().parent.parent.parent / "shared/datasets/scifact"
#: For each tether mode, the peers it is compared with: (system, mode).
PEERS = {
    "lexical": [("bm25s", "lexical"), ("LanceDB", "lexical"), ("LangChain", "lexical")],
    "vector": [("LanceDB", "vector"), ("Chroma", "vector"), ("LangChain", "vector")],
    "hybrid": [("LanceDB", "hybrid"), ("LangChain", "hybrid")],
}
PACKAGES = ("tether numpy bm25s PyStemmer lancedb pylance pyarrow chromadb langchain-core"
            " langchain-community langchain-classic rank-bm25 faiss-cpu sentence-transformers"
            " torch threadpoolctl").split()  # fmt: skip


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Chunks:  # row i: chunk i's SciFact corpus id, text and unit vector
    docs: list[str]
    texts: list[str]
    vectors: np.ndarray


@dataclass
class Claims:
    texts: list[str]
    relevant: list[dict[str, int]]
    vectors: np.ndarray


@dataclass
class Bench:
    chunks: Chunks
    claims: Claims
    k: int
    rounds: int
    warm: int
    rows: list[dict[str, Any]]
    builds: dict[str, float]

    def measure(self, system: str, mode: str, search: Callable[[int], Any],
                to_docs: Callable[[Any], list[str]], note: str) -> None:  # fmt: skip
        """Warm, then time ``search(claim index)`` for every claim, ``rounds`` times;
        score the first round's answers (``to_docs``: corpus ids in chunk order)."""
        n = len(self.claims.texts)
        for i in range(min(self.warm, n)):
            search(i)
        times: list[float] = []
        ndcg: list[float] = []
        recall: list[float] = []
        for round_ in range(self.rounds):
            for i in range(n):
                started = time.perf_counter()
                answer = search(i)
                times.append((time.perf_counter() - started) * 1000)
                if round_ == 0:
                    ranked = list(dict.fromkeys(to_docs(answer)))  # max-pooling: best chunk
                    ndcg.append(ndcg_at(ranked, self.claims.relevant[i], 10))
                    recall.append(recall_at(ranked, self.claims.relevant[i], 100))
        p50, p95 = np.percentile(times, [50, 95])
        row = {"system": system, "mode": mode, "ndcg@10": float(np.mean(ndcg)),
               "recall@100": float(np.mean(recall)), "p50_ms": float(p50), "p95_ms": float(p95),
               "timed_calls": len(times), "note": note}  # fmt: skip
        self.rows.append(row)
        log(f"  {system} {mode}: nDCG@10 {row['ndcg@10']:.4f}, p50 {p50:.2f} ms, p95 {p95:.2f} ms")


def prepare_store(store: Path | None, dataset_dir: Path, workdir: Path, settings: Settings) -> Path:
    """Our own store: a copy of ``store`` or SciFact indexed anew; FTS5 optimized."""
    db = workdir / "scifact.db"
    if store is not None:
        if not store.is_file():
            raise SystemExit(f"error: no store at {store}")
        log(f"copying {store} to {db}")
        for suffix in ("", "-wal"):
            if Path(f"{store}{suffix}").exists():
                shutil.copyfile(f"{store}{suffix}", f"{db}{suffix}")
    else:
        log("indexing SciFact with the local model (about 10 minutes on 2 cores)")
        with Tether(db=db, settings=settings) as t:
            done = index_dataset(t, load_beir(dataset_dir), progress=lambda n: log(f"  {n:,}"))
        if done.failed:
            log(f"  {len(done.failed)} corpus entries could not be indexed")
    started = time.perf_counter()
    conn = sqlite3.connect(db, isolation_level=None)  # autocommit
    conn.execute("INSERT INTO rag_chunks_fts(rag_chunks_fts) VALUES('optimize')")
    conn.close()
    log(f"FTS5 optimize: {time.perf_counter() - started:.1f}s")
    return db


def read_chunks(db: Path, settings: Settings, model: str, workspace: str) -> Chunks:
    """Every chunk of ``workspace`` with its ``model`` vector, through the store API."""
    rows: list[tuple[str, str, np.ndarray]] = []  # (corpus id, text, vector)
    with Tether(db=db, settings=settings) as t:
        snapshot = t.store.load_vectors(model)
        blobs = {chunk_id: (dims, blob) for chunk_id, dims, blob in snapshot.rows}
        for document in t.store.list_documents(workspace_id=workspace):
            for chunk in t.store.chunks_of(document.id):
                if chunk.id not in blobs:
                    raise SystemExit(f"error: chunk {chunk.id} has no {model} vector")
                title = chunk.section_title
                rows.append((document.id.removeprefix(f"{workspace}:"),
                             f"{title}\n{chunk.content}" if title else chunk.content,
                             from_blob(blobs[chunk.id][1], blobs[chunk.id][0])))  # fmt: skip
    if not rows:
        raise SystemExit(f"error: the store holds no chunks in workspace {workspace!r}")
    docs, texts, vectors = zip(*rows, strict=True)
    return Chunks(list(docs), list(texts), np.stack(vectors).astype(np.float32))


class LookupEmbedder(Embedder):
    """Answers the claims with their precomputed vectors: a dict lookup, no model."""

    def __init__(self, model: str, table: dict[str, np.ndarray]) -> None:
        self.model, self.table = model, table

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.table[text]


def run_tether(b: Bench, db: Path, settings: Settings, model: str, workspace: str) -> None:
    table = dict(zip(b.claims.texts, b.claims.vectors, strict=True))
    prefix = f"{workspace}:"
    rag = settings.rag
    lexical_depth, vector_depth = rag.depths(b.k)  # what a hybrid search for the top k reads
    notes = {
        "hybrid": f"{rag.fusion} of FTS5 top-{lexical_depth} + vector top-{vector_depth}",
        "lexical": "FTS5 bm25, porter unicode61", "vector": "exact cosine, in-memory matrix",
    }  # fmt: skip
    with Tether(db=db, settings=settings, embedder=LookupEmbedder(model, table)) as t:
        for mode in ("hybrid", "lexical", "vector"):

            def search(i: int, m: Any = mode) -> Any:
                return t.search(b.claims.texts[i], scope="workspace", workspace_id=workspace,
                                k=b.k, mode=m)  # fmt: skip

            if (ran := search(0).debug.get("method")) != mode:
                raise SystemExit(f"error: tether search(mode={mode!r}) ran {ran!r}")
            b.measure("tether", mode, search,
                      lambda hits: [h.document_id.removeprefix(prefix) for h in hits],
                      notes[mode])  # fmt: skip


def run_bm25s(b: Bench) -> None:
    import bm25s

    has_stemmer = importlib.util.find_spec("Stemmer") is not None
    stemmer = importlib.import_module("Stemmer").Stemmer("english") if has_stemmer else None
    started = time.perf_counter()
    tokens = bm25s.tokenize(b.chunks.texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    b.builds["bm25s"] = time.perf_counter() - started

    def search(i: int) -> Any:
        query = bm25s.tokenize(b.claims.texts[i], stopwords="en", stemmer=stemmer,
                               show_progress=False)  # fmt: skip
        return retriever.retrieve(query, k=b.k, show_progress=False)[0][0]

    stem = "PyStemmer english" if stemmer is not None else "no stemmer (PyStemmer missing)"
    b.measure("bm25s", "lexical", search, lambda ids: [b.chunks.docs[j] for j in ids.tolist()],
              f"tokenize + retrieve, en stopwords, {stem}")  # fmt: skip


def run_lancedb(b: Bench, workdir: Path) -> None:
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS
    from lancedb.rerankers import RRFReranker

    n, dims = b.chunks.vectors.shape
    started = time.perf_counter()
    db = lancedb.connect(str(workdir / "lancedb"))
    data = pa.table({
        "id": pa.array(np.arange(n, dtype=np.int32)),
        "text": pa.array(b.chunks.texts, pa.string()),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(b.chunks.vectors.ravel()), dims),
    })  # fmt: skip
    table = db.create_table("chunks", data=data)
    table.create_index("text", config=FTS())
    b.builds["lancedb"] = time.perf_counter() - started
    reranker = RRFReranker()
    texts, vectors, cols = b.claims.texts, b.claims.vectors, ["id", "text"]
    searches: dict[str, tuple[Callable[[int], Any], str]] = {
        "hybrid": (lambda i: table.search(query_type="hybrid").vector(vectors[i]).text(texts[i])
                   .distance_type("cosine").rerank(reranker).select(cols).limit(b.k).to_list(),
                   f"FTS + flat vector, RRFReranker (K=60), {b.k} per leg"),
        "lexical": (lambda i: table.search(texts[i], query_type="fts").select(cols)
                    .limit(b.k).to_list(), "native FTS (BM25), English stemming + stopwords"),
        "vector": (lambda i: table.search(vectors[i], query_type="vector").distance_type("cosine")
                   .select(cols).limit(b.k).to_list(), "flat (exact) cosine, no ANN index"),
    }  # fmt: skip
    for mode, (search, note) in searches.items():
        b.measure("LanceDB", mode, search, lambda rows: [b.chunks.docs[r["id"]] for r in rows],
                  note)  # fmt: skip
    db.drop_table("chunks")


def run_chroma(b: Bench) -> None:
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    started = time.perf_counter()
    client = chromadb.EphemeralClient(ChromaSettings(anonymized_telemetry=False))
    name = "scifact-peers"
    collection = client.create_collection(
        name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    batch = client.get_max_batch_size()
    for start in range(0, len(b.chunks.texts), batch):
        end = min(start + batch, len(b.chunks.texts))
        collection.add(ids=[str(j) for j in range(start, end)],
                       embeddings=b.chunks.vectors[start:end],
                       documents=b.chunks.texts[start:end])  # fmt: skip
    b.builds["chroma"] = time.perf_counter() - started
    hnsw = (collection.configuration or {}).get("hnsw") or {}
    vectors = b.claims.vectors
    b.measure("Chroma", "vector",
              lambda i: collection.query(query_embeddings=vectors[i : i + 1], n_results=b.k),
              lambda res: [b.chunks.docs[int(j)] for j in res["ids"][0]],
              f"HNSW cosine (approximate), M {hnsw.get('max_neighbors')},"
              f" ef_search {hnsw.get('ef_search')}, in-memory client")  # fmt: skip
    client.delete_collection(name)


def run_langchain(b: Bench) -> None:
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_core.embeddings import Embeddings

    with warnings.catch_warnings():  # "langchain-community is being sunset"
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.retrievers import BM25Retriever
        from langchain_community.vectorstores import FAISS

    table = {t: v.tolist() for t, v in zip(b.claims.texts, b.claims.vectors, strict=True)}

    class LookupEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [table[t] for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return table[text]

    texts, ids = b.chunks.texts, b.chunks.docs
    metadatas = [{"i": j} for j in range(len(texts))]
    started = time.perf_counter()
    bm25 = BM25Retriever.from_texts(texts, metadatas=metadatas, k=b.k)
    store = FAISS.from_embeddings(
        list(zip(texts, b.chunks.vectors, strict=True)), LookupEmbeddings(), metadatas=metadatas
    )
    b.builds["langchain"] = time.perf_counter() - started
    vector = store.as_retriever(search_kwargs={"k": b.k})
    ensemble = EnsembleRetriever(retrievers=[bm25, vector], weights=[0.5, 0.5])

    for mode, retriever, note in (
        ("hybrid", ensemble, f"EnsembleRetriever(BM25, FAISS), weights 0.5/0.5, first {b.k}"),
        ("lexical", bm25, "BM25Retriever (rank_bm25), default whitespace split"),
        ("vector", vector, "FAISS retriever, exact IndexFlatL2"),
    ):
        b.measure("LangChain", mode, lambda i, r=retriever: r.invoke(b.claims.texts[i]),
                  lambda out: [ids[d.metadata["i"]] for d in out[: b.k]], note)  # fmt: skip


def comparisons(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """tether / peer for each tether mode and each comparable peer that ran."""
    found = {(r["system"], r["mode"]): r for r in rows}
    return [{"tether_mode": mode, "peer": " ".join(key),
             "p50_ratio": mine["p50_ms"] / peer["p50_ms"],
             "p95_ratio": mine["p95_ms"] / peer["p95_ms"],
             "ndcg@10_diff": mine["ndcg@10"] - peer["ndcg@10"],
             "recall@100_diff": mine["recall@100"] - peer["recall@100"]}
            for mode, peers in PEERS.items() for key in peers
            if (mine := found.get(("tether", mode))) and (peer := found.get(key))]  # fmt: skip


def version(name: str) -> str | None:
    return next((d.version for d in importlib.metadata.distributions(name=name)), None)


def run(store_path: str | Path | None, dataset_dir: str | Path = DEFAULT_DATASET, *,
        queries_limit: int | None = None, rounds: int = 2, systems: Sequence[str] = SYSTEMS,
        k: int = 100, threads: int = 1, warm: int = 5) -> dict[str, Any]:  # fmt: skip
    """``{"rows", "comparisons", "meta"}`` of ``systems`` (``store_path`` None: index first)."""
    if set(systems) - set(SYSTEMS) or min(rounds, k, threads) < 1 or warm < 0:
        raise ValueError(f"systems must be among {SYSTEMS}; rounds, k, threads >= 1; warm >= 0")
    from threadpoolctl import threadpool_limits

    from tether.eval.beir import non_default_settings

    dataset = load_beir(dataset_dir)
    workspace = eval_workspace(dataset)
    judged = [(text, dataset.qrels[qid]) for qid, text in dataset.queries.items()
              if qid in dataset.qrels][:queries_limit]  # fmt: skip
    settings = Settings.load()
    embedder, reason = embedder_from_settings(settings)
    if embedder is None:
        raise SystemExit(f"error: no embedder: {reason}")
    with tempfile.TemporaryDirectory(prefix="scifact-peers-") as tmp:
        workdir = Path(tmp)
        db = prepare_store(Path(store_path) if store_path else None, Path(dataset_dir), workdir,
                           settings)  # fmt: skip
        chunks = read_chunks(db, settings, embedder.model, workspace)
        log(f"{len(chunks.texts):,} chunks of {len(set(chunks.docs)):,} documents;"
            f" embedding {len(judged)} claims with {embedder.model}")  # fmt: skip
        if importlib.util.find_spec("faiss") is not None:
            importlib.import_module("faiss")
        embedder.warm()  # faiss and torch loaded now: threadpoolctl limits their OpenMP too
        with threadpool_limits(limits=threads):  # 2 spinning torch threads on a shared
            texts = [text for text, _ in judged]  # machine: 20x slower claim embedding
            vectors = np.stack([embedder.embed_query(t) for t in texts]).astype(np.float32)
            claims = Claims(texts, [rel for _, rel in judged], vectors)
            b = Bench(chunks, claims, k, rounds, warm, [], {})
            runners: dict[str, Callable[[], None]] = {
                "tether": lambda: run_tether(b, db, settings, embedder.model, workspace),
                "bm25s": lambda: run_bm25s(b),
                "lancedb": lambda: run_lancedb(b, workdir),
                "chroma": lambda: run_chroma(b),
                "langchain": lambda: run_langchain(b),
            }
            for name in (name for name in SYSTEMS if name in systems):
                log(name)
                runners[name]()
                gc.collect()
    rag = settings.rag
    meta = {
        "argv": sys.argv, "dataset": dataset.name, "split": "test", "store": str(store_path),
        "fts_optimized": True, "claims": len(judged), "chunks": len(chunks.texts),
        "documents": len(set(chunks.docs)), "k_chunks": k, "rounds": rounds, "warm": warm,
        "threads": threads, "embedding_model": embedder.model, "query_embedding": "excluded",
        "tether_settings": {"k_lexical": rag.lexical_depth, "k_vector": rag.k_vector,
                            "fusion": rag.fusion, "rrf_k": rag.rrf_k,
                            "non_default": list(non_default_settings(settings))},
        "build_seconds": b.builds, "versions": {p: version(p) for p in PACKAGES},
        "python": platform.python_version(), "cpus": os.cpu_count(),
    }  # fmt: skip
    return {"rows": b.rows, "comparisons": comparisons(b.rows), "meta": meta}


def print_tables(result: dict[str, Any]) -> None:
    meta = result["meta"]
    print(f"SciFact test: {meta['claims']} claims, {meta['documents']:,} documents,"
          f" {meta['chunks']:,} chunks; top {meta['k_chunks']} chunks per query, documents by"
          f" best chunk; {meta['rounds']} timed round(s); query embedding excluded")  # fmt: skip
    print("\ntether / peer (p50, p95 ratios: below 1 means tether is faster; Δ = tether - peer)")
    print(f"{'tether mode':<12} {'peer':<18} {'p50 ratio':>9} {'p95 ratio':>9}"
          f" {'ΔnDCG@10':>9} {'Δrecall@100':>11}")  # fmt: skip
    for c in result["comparisons"]:
        print(f"{c['tether_mode']:<12} {c['peer']:<18} {c['p50_ratio']:>8.2f}x"
              f" {c['p95_ratio']:>8.2f}x {c['ndcg@10_diff']:>+9.4f}"
              f" {c['recall@100_diff']:>+11.4f}")  # fmt: skip
    print(f"\n{'system':<10} {'mode':<8} {'nDCG@10':>8} {'recall@100':>10} {'p50 ms':>8}"
          f" {'p95 ms':>8}  note")  # fmt: skip
    for r in result["rows"]:
        print(f"{r['system']:<10} {r['mode']:<8} {r['ndcg@10']:>8.4f} {r['recall@100']:>10.4f}"
              f" {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f}  {r['note']}")  # fmt: skip
    builds = ", ".join(f"{name} {s:.1f}s" for name, s in meta["build_seconds"].items())
    if builds:
        print(f"\nbuild (not in the latencies): {builds}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("dataset", type=Path, nargs="?", default=DEFAULT_DATASET)
    parser.add_argument("--store", type=Path, help="tether store holding SciFact (copied)")
    parser.add_argument("--limit", type=int, help="only the first N claims")
    parser.add_argument("--rounds", type=int, default=2, help="timed passes over the claims")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset")
    parser.add_argument("--k", type=int, default=100, help="chunks asked of each system")
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads")
    parser.add_argument("--warm", type=int, default=5, help="untimed warm-up queries")
    parser.add_argument("--json", type=Path, help="write every number here")
    args = parser.parse_args(argv)
    result = run(args.store, args.dataset, queries_limit=args.limit, rounds=args.rounds,
                 systems=[s.strip() for s in args.systems.split(",") if s.strip()], k=args.k,
                 threads=args.threads, warm=args.warm)  # fmt: skip
    result["meta"]["argv"] = sys.argv if argv is None else ["bench/scifact_peers.py", *argv]
    print_tables(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        log(f"wrote {args.json}")
    return result


if __name__ == "__main__":
    main()
