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
    within a list counts at its best rank. With ``scores`` (per list, the scores of its
    items in its order, best first, or None for a list ranked without scores), items of
    one list with equal scores share a rank, the best of their group ("1, 2, 2, 4"): the
    order a tie happened to be listed in says nothing, and a list of equal scores is all
    rank 1. Ties in the fused score are broken by the best single rank the item reached,
    then by first appearance (list order, then position), so the result is deterministic:
    the only match of one list ties the other list's best, and the list given first wins.
    With one list and any weight the order is that list's order. An empty list changes
    nothing.
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
    fused: dict[K, float] = {}  # in order of first appearance
    best_rank: dict[K, int] = {}
    for ranking, weight, listed in zip(rankings, weights, scores, strict=True):
        ranks = _tied_ranks(ranking, listed)
        seen: set[K] = set()
        for item, rank in zip(ranking, ranks, strict=True):
            if item in seen:
                continue
            seen.add(item)
            prior = fused.get(item)
            if prior is None:
                fused[item] = weight / (k + rank)
                best_rank[item] = rank
            else:
                fused[item] = prior + weight / (k + rank)
                if rank < best_rank[item]:
                    best_rank[item] = rank
    # A stable sort: equal (score, best rank) keep the order of first appearance.
    ranked = sorted(fused.items(), key=lambda pair: (-pair[1], best_rank[pair[0]]))
    return ranked


def _tied_ranks(ranking: Sequence[K], scores: Sequence[float] | None) -> list[int]:
    """Each position's rank: its position (from 1), or with ``scores`` the position of
    the first of the run of equal scores it belongs to."""
    if scores is None:
        return list(range(1, len(ranking) + 1))
    if len(scores) != len(ranking):
        raise ValueError(f"{len(scores)} scores for a ranking of {len(ranking)}")
    ranks: list[int] = []
    for position, value in enumerate(scores, start=1):
        tied = position > 1 and value == scores[position - 2]
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
    """Fuse scored lists by score: ``score(d) = sum_i w_i * max(z_i(d) + lift_i, FLOOR)``.

    Each list's scores (higher is better) are standardized with that list's own mean and
    standard deviation, ``z = (s - mean) / std``, so a BM25 list and a cosine list, whose
    raw scales have nothing in common, become comparable: "how far above this query's
    typical candidate" in each method's own units. An item absent from a list gets
    :data:`ZSCORE_FLOOR` from it, and an item a list holds never less (listed last is no
    worse than missing: in a small store the vector list holds every chunk, the one with
    a part number last, deviations below its mean, which the lexical side alone finds). This is
    distribution-based score fusion (as in Qdrant's DBSF), clipped below only: clipping
    the top at 3 sigma would erase the gap between the best candidates.

    The lift is for short lists, where a z-score says more about the list's length than
    about its items. In a list of ``n`` no item stands more than ``sqrt(n - 1)`` above the
    mean (one item above ``n - 1`` equal ones reaches it): two hits are +1 and -1 whatever
    their scores, and a list without spread (one hit, or equal scores) has a ceiling of
    0, its items at once its mean and its best. A short lexical list is what a rare word
    gives (the user asking for an error code, a part number, a name); left as it is, its
    best match, absent from the vector list, ranks below every vector-only hit above the
    ceiling. So a list whose ceiling is below ``top``, the standing this fusion gives a
    list's best item (the largest z of any list with a positive weight, 0 when none has a
    spread), is raised by the difference (:func:`zscore_lifts`): its items keep their
    distances in its own standard deviations, and its ceiling becomes ``top``.

    Hence the only match of a list, each item of a list of equal scores, and one item
    above equal others all stand at ``top``, as high as any list's best: absent from the
    other lists, such an item ranks at least with another list's best that is absent from
    its own (a tie goes to first appearance), and above everything weaker on both. Lists
    at least ``top**2 + 1`` long are left as they are. An empty list gives every item the
    same floor, so it changes no order; a zero weight removes a list's influence.

    Unlike RRF it keeps how *much* better one candidate is than the next, and it is
    invariant to any positive affine rescaling of a list's scores. The statistics are
    only as good as the lists are deep: pass the whole candidate list (hundreds), not a
    top 10. An item repeated within a list counts at its best score. Ties are broken by
    first appearance (list order, then position), so the result is deterministic.
    """
    weights = _checked_weights(weights, len(scored))
    bests = _best_scores(scored)
    standardized = [_standardize(best) for best in bests]
    lifts = _lifts(standardized, weights)
    first_seen: dict[K, int] = {}
    for best in bests:  # a dict keeps the order its keys first came in
        for item in best:
            first_seen.setdefault(item, len(first_seen))
    fused = {
        item: sum(
            w * (max(z[item] + lift, ZSCORE_FLOOR) if item in z else ZSCORE_FLOOR)
            for (z, _), lift, w in zip(standardized, lifts, weights, strict=True)
        )
        for item in first_seen
    }
    ranked = sorted(fused, key=lambda item: (-fused[item], first_seen[item]))
    return [(item, fused[item]) for item in ranked]


def zscore_lifts(
    scored: Sequence[Sequence[tuple[K, float]]],
    *,
    weights: Sequence[float] | None = None,
) -> list[float]:
    """What :func:`zscore_fusion` adds to each list's z-scores: ``top - ceiling`` where a
    list's ceiling (``sqrt(n - 1)``, 0 without spread) is below ``top``, else 0."""
    weights = _checked_weights(weights, len(scored))
    return _lifts([_standardize(best) for best in _best_scores(scored)], weights)


def _checked_weights(weights: Sequence[float] | None, lists: int) -> Sequence[float]:
    if weights is None:
        return [1.0] * lists
    if len(weights) != lists:
        raise ValueError(f"{len(weights)} weights for {lists} score lists")
    if not all(w >= 0 for w in weights):  # written so that NaN fails too
        raise ValueError(f"weights must be >= 0 (and not NaN), not {list(weights)}")
    return weights


def _best_scores(scored: Sequence[Sequence[tuple[K, float]]]) -> list[dict[K, float]]:
    """Each list as ``{item: its best score}``, in the order of first appearance."""
    bests: list[dict[K, float]] = []
    for items in scored:
        best: dict[K, float] = {}
        for item, score in items:
            if not math.isfinite(score):
                raise ValueError(f"scores must be finite, not {score!r} for {item!r}")
            if item not in best or score > best[item]:
                best[item] = score
        bests.append(best)
    return bests


Standardized = tuple[dict[K, float], float]


def _standardize(scores: dict[K, float]) -> Standardized[K]:
    """Each item's z-score in its list, and the list's ceiling: the highest z a list of
    its length can give, ``sqrt(n - 1)``; 0 (and z = 0) for a list without spread."""
    if not scores:
        return {}, 0.0
    values = list(scores.values())
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    if std <= 1e-12 * max(1.0, abs(mean)):
        return dict.fromkeys(scores, 0.0), 0.0
    z = {item: (value - mean) / std for item, value in scores.items()}
    return z, math.sqrt(len(values) - 1)


def _lifts(standardized: list[Standardized[K]], weights: Sequence[float]) -> list[float]:
    """``top - ceiling`` for each non-empty list whose ceiling is below ``top``, else 0."""
    top = max(
        (max(z.values()) for (z, _), w in zip(standardized, weights, strict=True) if z and w > 0),
        default=0.0,
    )
    return [max(0.0, top - ceiling) if z else 0.0 for z, ceiling in standardized]
