"""The latency benchmark's figures: percentiles with bootstrap intervals, and a scenario's
added delay against its memory-off baseline, paired by turn."""

from __future__ import annotations

from typing import Any

from bench.common.stats import mean_interval
from bench.latency.scenario import ScenarioResult, TurnRecord


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def quantile_interval(
    values: list[float], q: float, *, resamples: int = 5000, seed: int = 20261126
) -> list[float] | None:
    """95% percentile-bootstrap interval of the q-th percentile (turns resampled): with
    24 turns a p95 is about the second largest value, and the interval says how far
    another run's could lie."""
    if len(values) < 2:
        return None
    import numpy as np

    data = np.asarray(values, dtype=float)
    picks = np.random.default_rng(seed).integers(0, len(data), size=(resamples, len(data)))
    stats = np.quantile(data[picks], q / 100, axis=1, method="nearest")
    return [round(float(np.quantile(stats, 0.025)), 1), round(float(np.quantile(stats, 0.975)), 1)]


def ratio(peer_ms: float, ours_ms: float) -> float | None:
    """How many times the peer's added delay is ours; None when ours is at or under 1 ms
    (at the noise floor a ratio says nothing: the added delays are then both reported)."""
    return round(peer_ms / ours_ms, 2) if ours_ms > 1.0 else None


def _p(turns: list[TurnRecord], name: str, q: float) -> float | None:
    values = [getattr(t, name) for t in turns if getattr(t, name) is not None]
    return round(pct(values, q), 1) if values else None


def _work_summary(turns: list[TurnRecord]) -> dict[str, dict[str, float]]:
    """Per kind of memory work: the share of turns where it ran between the end of
    speech and the first audio frame, and its mean milliseconds there when it did."""
    kinds = sorted({k for t in turns for k in t.work_ms})
    out = {}
    for kind in kinds:
        ms = [t.work_ms[kind] for t in turns if kind in t.work_ms]
        out[kind] = {"turns_share": round(len(ms) / max(1, len(turns)), 3), "mean_ms": round(sum(ms) / len(ms), 1)}
    return out


def summarise(res: ScenarioResult, baseline: ScenarioResult) -> dict[str, Any]:
    pairs = [
        (t, (t.first_audio_s - b.first_audio_s) * 1000)
        for t, b in zip(res.turns, baseline.turns, strict=False)
        if t.first_audio_s is not None and b.first_audio_s is not None
    ]
    added = [a for _, a in pairs]
    later = [a for t, a in pairs if not t.first_of_session]
    first = [a for t, a in pairs if t.first_of_session]
    own = [t.own_memories for t in res.turns if t.own_memories is not None]
    waited = [t.waited_ms for t in res.turns if t.waited_ms is not None]
    return {
        "turns": len(res.turns),
        "added_first_audio_ms_p50": round(pct(added, 50), 2),
        "added_first_audio_ms_p95": round(pct(added, 95), 2),
        "added_first_audio_ms_max": round(max(added), 2) if added else None,
        "added_first_audio_ms_mean": round(sum(added) / len(added), 2) if added else None,
        "added_first_audio_ms_mean_ci95": [round(x, 1) for x in mean_interval(added)] if len(added) > 1 else None,
        "added_first_audio_ms_p50_ci95": quantile_interval(added, 50),
        "added_first_audio_ms_p95_ci95": quantile_interval(added, 95),
        "added_first_audio_ms_each": [round(a, 1) for a in added],
        "added_first_audio_ms_p95_later_turns": round(pct(later, 95), 2),
        "first_turn_added_ms": [round(a, 2) for a in first],
        "first_turn_added_ms_max": round(max(first), 2) if first else None,
        "first_audio_ms_p50": round(pct([t.first_audio_s * 1000 for t in res.turns if t.first_audio_s], 50), 1),
        "memory_wait_ms_p95": round(pct(waited, 95), 2) if waited else None,
        "request_ms_p50": _p(res.turns, "request_ms", 50),
        "request_ms_p50_off": _p(baseline.turns, "request_ms", 50),
        "committed_ms_p50": _p(res.turns, "committed_ms", 50),
        "work_in_window": _work_summary(res.turns),
        "llm_requests_per_turn": round(sum(t.requests for t in res.turns) / max(1, len(res.turns)), 3),
        "own_memory": round(sum(own) / len(own), 4) if own else None,
        "own_memory_turns": len(own),
        "turns_with_memories": sum(1 for t in res.turns if t.injected),
        "budget_missed": res.budget_missed,
        "gc_full_passes": len(res.gc_full_passes_ms),
        "gc_full_pass_max_ms": round(max(res.gc_full_passes_ms), 1) if res.gc_full_passes_ms else None,
        "wall_s": round(res.wall_s, 1),
    }
