"""Fusion of ranked lists: Reciprocal Rank Fusion and z-score fusion, both pure functions."""

from __future__ import annotations

import math
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


#: The score a z-score-fused item gets from a list it is missing from: three standard
#: deviations below that list's mean, i.e. "as weak as the list's tail", not "zero".
ZSCORE_FLOOR = -3.0


def zscore_fusion(
    scored: Sequence[Sequence[tuple[K, float]]],
    *,
    weights: Sequence[float] | None = None,
) -> list[tuple[K, float]]:
    """Fuse scored lists by standardized score: ``score(d) = sum_i w_i * z_i(d)``.

    Each list's scores (higher is better) are standardized with that list's own mean and
    standard deviation, ``z = (s - mean) / std``, so a BM25 list and a cosine list, whose
    raw scales have nothing in common, become comparable: "how far above this query's
    typical candidate" in each method's own units. An item absent from a list gets
    :data:`ZSCORE_FLOOR` from it. A list whose scores are all equal contributes 0 to each
    of its items. This is distribution-based score fusion (as in Qdrant's DBSF), without
    clipping: clipping at 3 sigma erases the gap between the best candidates.

    Unlike RRF it keeps how *much* better one candidate is than the next, and it is
    invariant to any positive affine rescaling of a list's scores. The statistics are
    only as good as the lists are deep: pass the whole candidate list (hundreds), not a
    top 10. An item repeated within a list counts at its best score. Ties are broken by
    first appearance (list order, then position), so the result is deterministic.
    """
    if weights is None:
        weights = [1.0] * len(scored)
    if len(weights) != len(scored):
        raise ValueError(f"{len(weights)} weights for {len(scored)} score lists")
    if not all(w >= 0 for w in weights):  # written so that NaN fails too
        raise ValueError(f"weights must be >= 0 (and not NaN), not {list(weights)}")
    standardized: list[dict[K, float]] = []
    first_seen: dict[K, int] = {}
    for items in scored:
        best: dict[K, float] = {}
        for item, score in items:
            if not math.isfinite(score):
                raise ValueError(f"scores must be finite, not {score!r} for {item!r}")
            if item not in best or score > best[item]:
                best[item] = score
            first_seen.setdefault(item, len(first_seen))
        standardized.append(_standardize(best))
    fused = {
        item: sum(w * z.get(item, ZSCORE_FLOOR) for z, w in zip(standardized, weights, strict=True))
        for item in first_seen
    }
    ranked = sorted(fused, key=lambda item: (-fused[item], first_seen[item]))
    return [(item, fused[item]) for item in ranked]


def _standardize(scores: dict[K, float]) -> dict[K, float]:
    if not scores:
        return {}
    values = list(scores.values())
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    if std <= 1e-12 * max(1.0, abs(mean)):
        return dict.fromkeys(scores, 0.0)
    return {item: (value - mean) / std for item, value in scores.items()}
