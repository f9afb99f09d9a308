"""What memory did for one reply (`TurnLog`): kept in `MemorySession.turns`, logged, and
read by the session summary and the tests."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from memory.livekit import blocks as door
from memory.retrieval.prefetch import RecallResult


@dataclass
class TurnLog:
    """What memory did for one reply; logged and kept for the session summary."""

    text: str
    recall: RecallResult | None = None
    injected: int = 0
    injected_ids: list[str] = field(default_factory=list)
    profile_injected: bool = False
    started_at: float = field(default_factory=time.perf_counter)
    item_id: str | None = None  # the user message answered
    # Asked for before LiveKit committed the user's message (as it does for every reply:
    # it adds the message once the speech is scheduled): settled when it is, dropped if
    # another message is (a preemptive reply for words the user went on from).
    provisional: bool = False
    placed: door.Placed | None = None  # the blocks the request got

    def __repr__(self) -> str:
        """One short line a developer can read (`print(mem.turns[-1])`), not the whole record."""
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        parts = [f"text={text!r}", f"injected={self.injected}", f"profile={self.profile_injected}"]
        if self.recall is not None:
            found = len(self.recall.records)
            parts.append(f"recall=({found} found, waited {self.recall.waited_s * 1000:.0f} ms"
                         + (", missed the budget" if self.recall.missed_budget else "")
                         + (f", error {self.recall.error!r}" if self.recall.error else "") + ")")  # fmt: skip
        return f"TurnLog({', '.join(parts)})"
