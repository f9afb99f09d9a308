"""Which path a user's look-up takes, by what each has measured for that user: the
session index (the user's rows in the job process) or SQL.

Neither is faster for every user: the index answers without a round trip but scans the
user's rows in Python and numpy; SQL pays a round trip (more with a remote database) and
runs the stages in Postgres, with its indexes. Which wins depends on the user's rows, the
query, the database's distance and the machine's load, so it is measured, per user: each
look-up's stages (lexical, vector) are timed on the path they took, the index's session
start times both paths once (`SessionIndexes.calibrate`, beside the greeting), and a look-up
takes the path whose recent look-ups were faster (the median of the last `KEEP`). A path
not taken for `KEEP` look-ups is `due`: timed again in the background (`SessionIndexes`),
so that one bad moment (a cold connection, a busy core) does not decide a whole session.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque

INDEX = "index"
SQL = "sql"
KEEP = 8  # recent look-ups per path and stage whose median decides
STAGES = ("lexical", "vector")


class PathTimes:
    """Per user, per path, per stage: the recent durations (ms). Thread-safe."""

    def __init__(self) -> None:
        self._times: dict[tuple[str, str, str], deque[float]] = {}
        self._since: dict[tuple[str, str], int] = {}  # look-ups on the other path since this one was timed
        self._lock = threading.Lock()

    def add(self, user_id: str, path: str, stage: str, ms: float) -> None:
        with self._lock:
            self._times.setdefault((user_id, path, stage), deque(maxlen=KEEP)).append(ms)
            if stage == STAGES[-1]:  # a look-up (or a timing) ends with its vector stage
                other = SQL if path == INDEX else INDEX
                self._since[(user_id, path)] = 0
                self._since[(user_id, other)] = self._since.get((user_id, other), 0) + 1

    def due(self, user_id: str) -> str | None:
        """The path to time again: not taken for `KEEP` look-ups, so its times may be one bad moment's."""
        with self._lock:
            return next((p for p in (INDEX, SQL) if self._since.get((user_id, p), 0) >= KEEP), None)

    def clear(self, user_id: str, path: str) -> None:
        """Drop the path's times for the user (before it is timed again)."""
        with self._lock:
            for stage in STAGES:
                self._times.pop((user_id, path, stage), None)

    def cost(self, user_id: str, path: str) -> float | None:
        """The path's look-up for the user: the sum of its stages' medians; None until each stage has one."""
        with self._lock:
            got = [self._times.get((user_id, path, stage)) for stage in STAGES]
        if any(not t for t in got):
            return None
        return sum(statistics.median(t) for t in got if t)

    def prefers_index(self, user_id: str) -> bool:
        """Take the index unless SQL measured faster for this user (an unmeasured path is not preferred
        over a measured one; with neither measured, the index: no round trip)."""
        index, sql = self.cost(user_id, INDEX), self.cost(user_id, SQL)
        if index is None or sql is None:
            return index is not None or sql is None
        return index <= sql

    def forget(self, user_id: str) -> None:
        with self._lock:
            for key in [k for k in self._times if k[0] == user_id]:
                del self._times[key]
            for path in (INDEX, SQL):
                self._since.pop((user_id, path), None)

    def snapshot(self, user_id: str) -> dict[str, float | None]:
        """The measured cost of each path (benchmarks, logs)."""
        return {INDEX: self.cost(user_id, INDEX), SQL: self.cost(user_id, SQL)}


__all__ = ["INDEX", "KEEP", "SQL", "STAGES", "PathTimes"]
