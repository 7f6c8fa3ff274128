"""Variants of the heuristic rerank, replayed on SciFact's candidates.

    .venv/bin/tether eval ../shared/datasets/scifact --db scifact.db        # once
    .venv/bin/python bench/rerank_variants.py --db scifact.db [--cache FILE] [--collect]

``tether eval --pipeline`` scores ``retrieve``'s reranked order: the 20 fused candidates
(``rag.rerank_top_n``) ordered by the rerank's base, ``(1 - evidence_weight) * fused +
evidence_weight * match`` with both min-max scaled over the candidates and ``match =
cosine + 0.5 * coverage`` (``tether/retrieve/rerank.py``), then the search's own order
for the documents after them. This script asks every judged query once with today's
settings, keeps each candidate's fused score, cosine, coverage and document, and replays
the order with variants of the base, printing each one's nDCG@10 as the pipeline
measures it. Today's replay gives the pipeline's own number. The last row orders the
candidates by their judged relevance: the most any reordering of the same 20 can reach.

The candidates are kept in ``--cache`` (default ``../bench-results/rerank-variants.json``)
and collected again only with ``--collect`` or when the file is missing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCIFACT = HERE.parent.parent / "shared" / "datasets" / "scifact"
DEFAULT_CACHE = HERE.parent.parent / "bench-results" / "rerank-variants.json"

Order = Callable[[list[dict[str, Any]], dict[str, int]], list[float]]


def collect(db: Path, dataset_dir: Path, path: Path) -> list[dict[str, Any]]:
    """Per judged query: its relevance judgements, the search's document order and the
    rerank's candidates (fused score, cosine, coverage, document)."""
    import tether.retrieve.pipeline as pipeline
    from tether import Tether
    from tether.eval.beir import _judged_queries, eval_workspace, load_beir, rank_documents
    from tether.models import Scope

    dataset = load_beir(dataset_dir)
    scope = Scope.workspace(eval_workspace(dataset))
    prefix = f"{eval_workspace(dataset)}:"
    seen: list[list[Any]] = []
    original = pipeline.heuristic_rerank

    def recorded(question: str, candidates: list[Any], *args: Any, **kw: Any) -> Any:
        seen.append(candidates)
        return original(question, candidates, *args, **kw)

    pipeline.heuristic_rerank = recorded  # type: ignore[assignment]
    queries = []
    try:
        with Tether(db=db) as t:
            for text, relevant in _judged_queries(dataset):
                seen.clear()
                searched = rank_documents(t, text, scope, depth=100, mode="hybrid")
                result = t.retrieve(text, scope=scope)
                evidence = result.debug["grounding"].get("evidence", {})
                candidates = [
                    {
                        "document": c.hit.document_id.removeprefix(prefix),
                        "fused": c.fused,
                        "cosine": _signal(evidence, c.hit.chunk_id, "cosine"),
                        "coverage": _signal(evidence, c.hit.chunk_id, "coverage"),
                    }
                    for c in (seen[0] if seen else [])
                ]
                queries.append(
                    {
                        "relevant": relevant,
                        "searched": [d.removeprefix(prefix) for d in searched],
                        "candidates": candidates,
                    }
                )
    finally:
        pipeline.heuristic_rerank = original  # type: ignore[assignment]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(queries))
    return queries


def _signal(evidence: dict[Any, Any], chunk_id: int, name: str) -> float:
    found = evidence.get(chunk_id) or evidence.get(str(chunk_id)) or {}
    return float(found.get(name) or 0.0)


def ndcg(queries: list[dict[str, Any]], order: Order) -> float:
    """Mean nDCG@10 of the documents in ``order``'s candidate order, then the search's."""
    from tether.eval.beir import ndcg_at

    scores = []
    for q in queries:
        cs = q["candidates"]
        score = order(cs, q["relevant"]) if cs else []
        ranked = sorted(range(len(cs)), key=lambda i: (-score[i], i))
        documents = [cs[i]["document"] for i in ranked] + q["searched"]
        scores.append(ndcg_at(list(dict.fromkeys(documents)), q["relevant"], 10))
    return statistics.fmean(scores)


def _scaled(values: list[float]) -> list[float]:
    lo, hi = min(values), max(values)
    return [(v - lo) / (hi - lo) if hi > lo else 1.0 for v in values]


def _standard(values: list[float]) -> list[float]:
    mean, spread = statistics.fmean(values), statistics.pstdev(values) or 1.0
    return [(v - mean) / spread for v in values]


def base(weight: float, share: float = 0.5, scale: Callable[..., list[float]] = _scaled) -> Order:
    """The rerank's base with ``evidence_weight`` ``weight`` and coverage's ``share`` of
    the match, each side scaled by ``scale``."""

    def order(cs: list[dict[str, Any]], _: dict[str, int]) -> list[float]:
        fused = scale([c["fused"] for c in cs])
        match = scale([c["cosine"] + share * c["coverage"] for c in cs])
        return [(1 - weight) * f + weight * m for f, m in zip(fused, match, strict=True)]

    return order


def rank_fusion(weight: float, k: int = 5) -> Order:
    """Reciprocal-rank fusion of the fused order and the match order."""

    def order(cs: list[dict[str, Any]], _: dict[str, int]) -> list[float]:
        by_fused = sorted(range(len(cs)), key=lambda i: -cs[i]["fused"])
        by_match = sorted(
            range(len(cs)), key=lambda i: -(cs[i]["cosine"] + 0.5 * cs[i]["coverage"])
        )
        out = [0.0] * len(cs)
        for rank, i in enumerate(by_fused):
            out[i] += (1 - weight) / (k + rank)
        for rank, i in enumerate(by_match):
            out[i] += weight / (k + rank)
        return out

    return order


def variants() -> list[tuple[str, Order]]:
    return [
        ("today's (evidence_weight 0.9, coverage 0.5)", base(0.9)),
        ("fused score alone (evidence_weight 0)", base(0.0)),
        ("evidence_weight 0.5", base(0.5)),
        ("evidence_weight 0.8", base(0.8)),
        ("match alone (evidence_weight 1)", base(1.0)),
        ("coverage 0.3 of the match", base(0.9, 0.3)),
        ("coverage 0.7 of the match", base(0.9, 0.7)),
        ("coverage 1.0 of the match", base(0.9, 1.0)),
        ("z-scored sides, evidence_weight 0.9", base(0.9, scale=_standard)),
        ("RRF of the fused and match ranks (0.9)", rank_fusion(0.9)),
        ("RRF of the fused and match ranks (0.6)", rank_fusion(0.6)),
        ("judged relevance (the ceiling)", lambda cs, rel: [rel.get(c["document"], 0) for c in cs]),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, help="a store holding SciFact (tether eval --db)")
    parser.add_argument("--dataset", type=Path, default=SCIFACT)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--collect", action="store_true", help="ask every query again")
    args = parser.parse_args(argv)
    if args.collect or not args.cache.is_file():
        if args.db is None:
            parser.error("--db is needed to collect the candidates")
        queries = collect(args.db, args.dataset, args.cache)
    else:
        queries = json.loads(args.cache.read_text())
    print(f"SciFact, {len(queries)} judged queries: nDCG@10 of the reranked order")
    for label, order in variants():
        print(f"  {label:<46} {ndcg(queries, order):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
