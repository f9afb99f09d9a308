"""What the local language rules cost per call: `python -m bench.gate.rule_cost`.

GATED's pre-filter (`memory.language.prefilter`) runs on every turn on the write path,
and the recall trigger (`memory.language.recall_intent`) on every transcript, interim
ones included, on the event loop. Both must stay far under a millisecond a call, and a
pathological message (tens of thousands of characters of repeats) must cost what its
bounded start costs. The tests check the bound by counting what the rules read
(tests/language/); the time per call is measured here, on an everyday mix in English
and Chinese and on two pathological inputs, `--repeat` times each. Prints a table and
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence

from memory.language.prefilter import prefilter
from memory.language.recall_intent import recall_reason

MIX = ("I just moved to Berlin, any tips?", "ok thanks", "我妹妹叫小雪", "What's my sister's name?",
       "你还记得我吗", "my sister is visiting next week")  # fmt: skip
PATHOLOGICAL = ("his name " * 5000 + "?", "what is my sister's name " * 2000)
CONTEXT = ["How are you doing today?"]
LONG_CONTEXT = ["what " * 5000]


def per_call_us(fn: Callable[[str], object], texts: Sequence[str], repeat: int) -> tuple[float, float]:
    """Median and worst of `repeat` rounds, in microseconds per call."""
    fn(texts[0])  # warm-up: compiled patterns, the segmenter's first load
    rounds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for text in texts:
            fn(text)
        rounds.append((time.perf_counter() - t0) / len(texts) * 1e6)
    rounds.sort()
    return rounds[len(rounds) // 2], rounds[-1]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gate.rule_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=50, help="rounds per figure (default 50)")
    args = ap.parse_args(argv)
    figures = {
        "prefilter_us": per_call_us(lambda t: prefilter(t, CONTEXT), MIX, args.repeat),
        "recall_reason_us": per_call_us(recall_reason, MIX, args.repeat),
        "prefilter_pathological_us": per_call_us(lambda t: prefilter(t, LONG_CONTEXT), PATHOLOGICAL, args.repeat),
        "recall_reason_pathological_us": per_call_us(recall_reason, PATHOLOGICAL, args.repeat),
    }
    print(f"{'figure':32} {'median µs':>10} {'worst µs':>10}")
    for name, (median, worst) in figures.items():
        print(f"{name:32} {median:>10.1f} {worst:>10.1f}")
    print(json.dumps({name: round(median, 1) for name, (median, _) in figures.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
