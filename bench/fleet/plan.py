"""The fleet benchmark's calls, planned ahead: which user calls when, what each says (a greeting,
a question about a word said in an earlier call, a new word to remember), so that every
run of the same arguments places the same calls."""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field
from typing import Any

from bench.fleet.fleet_data import user_id

# Audio fixtures (English, 2-3 s) the callers' lines are spoken with: the STT fake gives the
# line's words; the VAD hears this speech.
QUESTION_AUDIO, STATEMENT_AUDIO, SEAT_AUDIO = "u01", "u09", "u08"


_ADJ = ["amber", "silver", "quiet", "rapid", "golden", "velvet", "crimson", "hidden", "gentle", "bright", "frozen",
        "wild", "lucky", "misty", "sunny", "rusty", "cobalt", "ivory", "jade", "scarlet"]  # fmt: skip


_NOUN = ["falcon", "harbor", "meadow", "lantern", "comet", "willow", "otter", "canyon", "ember", "glacier", "heron",
         "orchard", "pepper", "quartz", "raven", "saddle", "tulip", "violin", "walnut", "zephyr"]  # fmt: skip


_COLOURS = ["teal", "maroon", "ochre", "lavender", "turquoise", "magenta", "olive", "indigo", "coral", "beige"]


# ------------------------------------------------------------------ the calls
@dataclass
class Call:
    call_id: str
    caller: str
    kind: str  # "regular", "contested", "off"
    memory: bool
    lines: list[dict[str, Any]]
    number: int = 0  # the caller's call number (regular calls)
    word: str | None = None  # the lucky word this call says
    expect: str | None = None  # the lucky word this call must recall
    seat_slot: str | None = None
    colour: str | None = None
    pair: int | None = None
    source: str | None = None  # a memory-off call: the memory-on call whose script it speaks
    replicas: bool = False  # its look-ups may read the replicas (--replicas: every other regular call)
    worker: int | None = None
    state: str = "waiting"  # waiting, running, done, dropped, failed
    turns: list[dict[str, Any]] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    cpu_s: float | None = None  # the job process's CPU time during the call
    cpu_s_by_thread: dict[str, float] = field(default_factory=dict)  # the same, per kind of thread
    reads: dict[str, int] | None = None  # its look-ups' reads on a replica / the primary (--replicas)
    uss_mb: float | None = None  # the job process's own memory at the call's end
    started_at: float = 0.0
    error: str | None = None

    def spec(self, stt: str) -> dict[str, Any]:
        return {"op": "call", "call_id": self.call_id, "caller": self.caller, "memory": self.memory, "stt": stt,
                "lines": self.lines, "replicas": self.replicas}  # fmt: skip


def _unique_words(rng: random.Random) -> Any:
    seen: set[str] = set()
    while True:
        word = f"{rng.choice(_ADJ)} {rng.choice(_NOUN)}"
        if word not in seen:
            seen.add(word)
            yield word


def plan_calls(args: argparse.Namespace, rng: random.Random) -> tuple[list[Call], list[str]]:
    """The run's calls: regular callers' calls in rounds, contested pairs, memory-off calls."""
    words = _unique_words(rng)
    pairs = args.contested_pairs
    regular_calls = args.calls - 2 * pairs
    callers = [user_id(i) for i in range(args.callers)]
    per_caller = max(1, regular_calls // len(callers))
    calls: list[Call] = []
    last_word: dict[str, str] = {}
    n = 0
    for number in range(per_caller + 1):
        for caller in callers:
            if n >= regular_calls:
                break
            word, tag = next(words), f"{number}{chr(97 + n % 26)}"
            seat = f"{rng.randint(1, 40)}{rng.choice('ABCDEF')}"
            slot = f"seat_trip_{n}"
            lines = []
            expect = last_word.get(caller)
            if expect:
                lines.append({"audio": QUESTION_AUDIO, "text": "Do you remember my lucky word?", "expect": [expect]})
            lines.append({"audio": STATEMENT_AUDIO, "text": f"Please remember that my lucky word is {word}",
                          "facts": [{"text": f"User's lucky word is {word}", "category": "personal_facts",
                                     "slot": "lucky_word"}]})  # fmt: skip
            if args.replicas:  # the fact of the previous turn, asked for at once: `own_words_missed`
                lines.append({"audio": QUESTION_AUDIO, "text": "Do you remember my lucky word?", "expect": [word],
                              "own": True})  # fmt: skip
            lines.append({"audio": SEAT_AUDIO, "text": f"Remember that my seat for trip {tag} is {seat}",
                          "facts": [{"text": f"User's seat for trip {tag} is {seat}", "category": "preferences",
                                     "slot": slot}]})  # fmt: skip
            calls.append(Call(f"call-{n:03d}", caller, "regular", True, lines, number, word, expect, slot,
                              replicas=bool(args.replicas) and n % 2 == 1))  # fmt: skip
            last_word[caller] = word
            n += 1
    contested = [user_id(args.callers + i) for i in range(pairs)]
    for p, caller in enumerate(contested):
        a, b = rng.sample(_COLOURS, 2)
        for side, colour in (("a", a), ("b", b)):
            line = {"audio": STATEMENT_AUDIO, "text": f"Please remember that my favourite colour is {colour}",
                    "facts": [{"text": f"User's favourite colour is {colour}", "category": "preferences",
                               "slot": "favourite_colour"}]}  # fmt: skip
            calls.append(Call(f"pair-{p:02d}{side}", caller, "contested", True, [line], colour=colour, pair=p))
    # Memory off: the same scripts, by callers of their own (nothing of theirs is stored).
    on_calls = [c for c in calls if c.kind == "regular"]
    for i, base in enumerate(on_calls[:: max(1, args.off_every)]):
        lines = [{k: v for k, v in line.items() if k != "expect"} for line in base.lines]
        calls.append(Call(f"off-{i:03d}", f"fleet-off-{i:03d}", "off", False, lines, source=base.call_id))
    # Regular calls in rounds; contested pairs and memory-off calls spread among them.
    ordered = sorted(on_calls, key=lambda c: (c.number, c.call_id))
    extras = [c for c in calls if c.kind != "regular"]
    rng.shuffle(extras)
    step = max(1, len(ordered) // max(1, len(extras)))
    merged: list[Call] = []
    for i, call in enumerate(ordered):
        merged.append(call)
        if extras and i % step == step - 1:
            merged.append(extras.pop())
    merged += extras
    return merged, callers + contested
