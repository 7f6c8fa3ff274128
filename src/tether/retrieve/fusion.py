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
    scores: Sequence[Sequence[float] | None] | None = None,
) -> list[tuple[K, float]]:
    """Fuse ranked lists (best first) into one: ``score(d) = sum_i w_i / (k + rank_i(d))``.

    Ranks start at 1; an item missing from a list gets nothing from it; an item repeated
    within a list counts at its best rank. With ``scores`` (per list, the score of each of
    its items, or None for a list ranked without scores), items of one list with equal
    scores share a rank, the best of their group ("1, 2, 2, 4"): the order a tie happened
    to be listed in says nothing. Ties in the fused score are broken by the best single
    rank the item reached, then by first appearance (list order, then position), so the
    result is deterministic. With one list and any weight the order is that list's order.
    An empty list changes nothing.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, not {k}")
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    if not all(w >= 0 for w in weights):  # written so that NaN fails too
        raise ValueError(f"weights must be >= 0 (and not NaN), not {list(weights)}")
    if scores is None:
        scores = [None] * len(rankings)
    if len(scores) != len(rankings):
        raise ValueError(f"{len(scores)} score lists for {len(rankings)} rankings")
    fused: dict[K, float] = {}
    best_rank: dict[K, int] = {}
    first_seen: dict[K, int] = {}
    order = 0
    for ranking, weight, listed in zip(rankings, weights, scores, strict=True):
        ranks = _tied_ranks(ranking, listed)
        seen: set[K] = set()
        for item, rank in zip(ranking, ranks, strict=True):
            if item in seen:
                continue
            seen.add(item)
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
            best_rank[item] = min(best_rank.get(item, rank), rank)
            if item not in first_seen:
                first_seen[item] = order
                order += 1
    ranked = sorted(fused, key=lambda item: (-fused[item], best_rank[item], first_seen[item]))
    return [(item, fused[item]) for item in ranked]


def _tied_ranks(ranking: Sequence[K], scores: Sequence[float] | None) -> list[int]:
    """Each position's rank: its position (from 1), or with ``scores`` the position of
    the first of the run of equal scores it belongs to."""
    if scores is None:
        return list(range(1, len(ranking) + 1))
    if len(scores) != len(ranking):
        raise ValueError(f"{len(scores)} scores for a ranking of {len(ranking)}")
    ranks: list[int] = []
    for position, value in enumerate(scores, start=1):
        tied = ranks and value == scores[position - 2]
        ranks.append(ranks[-1] if tied else position)
    return ranks


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
    :data:`ZSCORE_FLOOR` from it. This is distribution-based score fusion (as in Qdrant's
    DBSF), without clipping: clipping at 3 sigma erases the gap between the best
    candidates.

    A list with one item, or with all its scores equal, has no spread to standardize by;
    what it does say is that each of its items is that method's best match (a unique
    word found in one chunk: the user asking for an error code or a part number). Its
    items get the standing of a list's best item in this fusion, the highest z any other
    list gives (0 when no list has a spread), never the mean: otherwise the only lexical
    match of a query, absent from the vector list, would rank below every vector-only
    item above its list's mean. An empty list gives every item the same floor, so it
    changes no order.

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
    standardized: list[dict[K, float] | None] = []
    bests: list[dict[K, float]] = []
    first_seen: dict[K, int] = {}
    for items in scored:
        best: dict[K, float] = {}
        for item, score in items:
            if not math.isfinite(score):
                raise ValueError(f"scores must be finite, not {score!r} for {item!r}")
            if item not in best or score > best[item]:
                best[item] = score
            first_seen.setdefault(item, len(first_seen))
        bests.append(best)
        standardized.append(_standardize(best))
    top = max((max(z.values()) for z in standardized if z), default=0.0)
    zscores = [
        dict.fromkeys(best, top) if z is None else z
        for z, best in zip(standardized, bests, strict=True)
    ]
    fused = {
        item: sum(w * z.get(item, ZSCORE_FLOOR) for z, w in zip(zscores, weights, strict=True))
        for item in first_seen
    }
    ranked = sorted(fused, key=lambda item: (-fused[item], first_seen[item]))
    return [(item, fused[item]) for item in ranked]


def _standardize(scores: dict[K, float]) -> dict[K, float] | None:
    """Each item's z-score in its list; None for a list with items but no spread (one
    item, or all scores equal), whose items :func:`zscore_fusion` ranks as best."""
    if not scores:
        return {}
    values = list(scores.values())
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    if std <= 1e-12 * max(1.0, abs(mean)):
        return None
    return {item: (value - mean) / std for item, value in scores.items()}
