"""Reciprocal Rank Fusion: a pure function of ranked lists."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[K]],
    *,
    k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[tuple[K, float]]:
    """Fuse ranked lists (best first) into one: ``score(d) = sum_i w_i / (k + rank_i(d))``.

    Ranks start at 1; an item missing from a list gets nothing from it; an item repeated
    within a list counts at its best rank. Ties are broken by the best single rank the
    item reached, then by first appearance (list order, then position), so the result is
    deterministic. With one list and any weight the order is that list's order.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, not {k}")
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    if not all(w >= 0 for w in weights):  # written so that NaN fails too
        raise ValueError(f"weights must be >= 0 (and not NaN), not {list(weights)}")
    scores: dict[K, float] = {}
    best_rank: dict[K, int] = {}
    first_seen: dict[K, int] = {}
    order = 0
    for ranking, weight in zip(rankings, weights, strict=True):
        seen: set[K] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            best_rank[item] = min(best_rank.get(item, rank), rank)
            if item not in first_seen:
                first_seen[item] = order
                order += 1
    ranked = sorted(scores, key=lambda item: (-scores[item], best_rank[item], first_seen[item]))
    return [(item, scores[item]) for item in ranked]
