"""How far a benchmark figure can be trusted: bootstrap intervals over queries.

One query of a 76-query file is 1.3 points of hit@5, and the same code on another
machine (the embedder's kernels differ by CPU) moves a file by a query or two. A
table without intervals invites reading that noise as an effect, so the retrieval
benchmark prints, next to each hit@k, a 95% percentile-bootstrap interval, and for
each method its paired difference from the first method of the run (the same
queries, resampled together, so the queries both get right or both miss cancel).

Resampling is over queries, with a fixed seed: the same results give the same
interval. Queries of one store (one user's memories) are not independent, and the
held-out halves are split by user, so where a file has several stores an interval
over stores is given too (`groups`: whole stores resampled with their queries, the
cluster bootstrap); it is the one that says how a figure may move on other users.
Written by hand in numpy (about thirty lines): scipy.stats.bootstrap does the plain
case but not the clustered one, and would add scipy to the project for this alone.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 5000
LEVEL = 0.95
SEED = 20261125


@dataclass(frozen=True)
class Paired:
    """Method B against method A on the same queries."""

    diff: float  # mean(B) - mean(A)
    low: float
    high: float
    better: int  # queries B gets right and A misses
    worse: int  # queries A gets right and B misses

    @property
    def clear(self) -> bool:
        """True when the interval excludes zero: a difference, not noise."""
        return self.low > 0 or self.high < 0


def _bootstrap(
    values: np.ndarray, groups: Sequence[Hashable] | None, level: float, resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile interval of the mean of `values` over `resamples` resamplings: of the
    values, or with `groups` of whole groups (the mean of all their values)."""
    rng = np.random.default_rng(seed)
    if groups is None:
        means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    else:
        if len(groups) != len(values):
            raise ValueError(f"groups: one per value (got {len(groups)} for {len(values)} values)")
        index = {g: i for i, g in enumerate(dict.fromkeys(groups))}
        if len(index) < 2:
            raise ValueError("groups: need at least two groups to resample (one store: resample queries)")
        of = np.array([index[g] for g in groups])
        sums, counts = np.bincount(of, weights=values), np.bincount(of)
        picks = rng.integers(0, len(index), size=(resamples, len(index)))
        means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    tail = (1.0 - level) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1.0 - tail))


def mean_interval(
    values: Sequence[float],
    *,
    groups: Sequence[Hashable] | None = None,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of per-query values (e.g. 0/1 hits);
    with `groups` (each value's store), whole stores are resampled."""
    if not values:
        raise ValueError("mean_interval: no values")
    return _bootstrap(np.asarray(values, dtype=float), groups, level, resamples, seed)


def paired(
    a: Sequence[float], b: Sequence[float], *, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED
) -> Paired:
    """The difference of B from A on the same queries, with its bootstrap interval."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired: need two equal, non-empty lists of per-query values (got {len(a)} and {len(b)})")
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    low, high = _bootstrap(y - x, None, level, resamples, seed)
    return Paired(
        diff=float((y - x).mean()),
        low=low,
        high=high,
        better=int(((y > 0) & (x <= 0)).sum()),
        worse=int(((x > 0) & (y <= 0)).sum()),
    )


__all__ = ["LEVEL", "Paired", "mean_interval", "paired"]
