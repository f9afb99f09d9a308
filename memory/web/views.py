"""What the pages show and do, over one opened store: the admin's own queries (users,
search, export, stats, the journal, replay, forget), and the storage layer's paged ones
where a page must stay fast for a user with 10,000 memories. Blocking: the server runs
these on threads of its own, never on its event loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from memory.admin.documents import Admin
from memory.errors import InvalidIdentity
from memory.journal.file import DEAD
from memory.livekit.blocks import fit_recalled, format_memories
from memory.settings import MemorySettings
from memory.storage.activity import DailyActivity
from memory.storage.store import MemoryStore
from memory.types import MemoryRecord, memory_user_id, parse_time
from memory.userdata import UnknownUser, count_names, place_names

USERS_PER_PAGE = 50
FACTS_PER_PAGE = 100
TURNS_PER_PAGE = 100
CALLS_PER_PAGE = 10
MESSAGES_PER_CALL = 200
CHART_DAYS = 30


@dataclass(frozen=True)
class Paging:
    page: int  # 1-based
    pages: int
    total: int

    @classmethod
    def of(cls, page: int, total: int, per_page: int) -> Paging:
        pages = max(1, math.ceil(total / per_page))
        return cls(min(max(1, page), pages), pages, total)

    def offset(self, per_page: int) -> int:
        return (self.page - 1) * per_page


class Operator:
    """The pages' data and actions for one store and one set of settings."""

    def __init__(self, store: MemoryStore, settings: MemorySettings) -> None:
        self.store = store
        self.settings = settings
        self.admin = Admin(store, settings)
        self.activity = DailyActivity(store.pool, store.table)
        self.zone = ZoneInfo(settings.timezone)

    # ------------------------------------------------------------ users
    def users(self, query: str, page: int) -> dict[str, Any]:
        """Users with their counts (the places', `memory/userdata.py`), newest activity first;
        `query` matches a part of the stored id, or an identity exactly (one with spaces is
        stored as lk-...)."""
        rows = self.admin.users()
        columns = [n for n in count_names() if rows and n in rows[0]]
        wanted = query.strip()
        if wanted:
            try:
                exact = memory_user_id(wanted)
            except InvalidIdentity:
                exact = wanted
            folded = wanted.casefold()
            rows = [u for u in rows if folded in u["user_id"].casefold() or u["user_id"] == exact]
        paging = Paging.of(page, len(rows), USERS_PER_PAGE)
        start = paging.offset(USERS_PER_PAGE)
        return {"users": rows[start : start + USERS_PER_PAGE], "paging": paging, "query": wanted, "columns": columns}

    # ------------------------------------------------------------- a user
    def user(self, user_id: str, *, facts_page: int = 1, turns_page: int = 1, calls_page: int = 1) -> dict[str, Any]:
        """Everything about one user, a page of each kind. `UnknownUser` when nothing is stored."""
        counts = self.admin.counts(user_id)
        if not any(counts[name] for name in place_names()):  # `require_known`, from the counts
            raise UnknownUser(user_id)
        journal = self.admin.journal_rows(user_id)
        fp = Paging.of(facts_page, counts["facts"], FACTS_PER_PAGE)
        tp = Paging.of(turns_page, counts["raw_turns"], TURNS_PER_PAGE)
        cp = Paging.of(calls_page, counts["calls"], CALLS_PER_PAGE)
        return {
            "user_id": user_id,
            "counts": counts,
            "places": place_names(),
            # The modes the user's memories were stored under (a fact is GATED's, a raw turn
            # NORMAL's), whatever this server's mode is.
            "stored_modes": [m for m, n in (("NORMAL", counts["raw_turns"]), ("GATED", counts["facts"])) if n],
            "facts": self._facts(user_id, fp),
            "facts_paging": fp,
            "turns": self._turns(user_id, tp),
            "turns_paging": tp,
            "calls": self._calls(user_id, cp),
            "calls_paging": cp,
            "contexts": [
                {
                    **c,
                    "updated_at": self._when(c["updated_at"]),
                    "notes": [{**n, "at": self._when(n["at"])} for n in c["notes"]],
                }
                for c in self.admin.contexts(user_id)
            ],  # fmt: skip
            "journal": journal,
        }

    def _facts(self, user_id: str, paging: Paging) -> list[tuple[str, list[dict[str, Any]]]]:
        """(category, facts) in the settings' category order, each fact with its history."""
        rows = self.store.rows.user_page(user_id, facts=True, offset=paging.offset(FACTS_PER_PAGE),
                                         limit=FACTS_PER_PAGE)  # fmt: skip
        by_category: dict[str, list[dict[str, Any]]] = {}
        for mem_id, payload in rows:
            rec = MemoryRecord.from_payload(mem_id, payload)
            # Mem0 dates an entry's change by `updated_at` (`created_at` is the memory's own).
            history = [
                {"event": h.get("event"), "old": h.get("old_memory"), "new": h.get("new_memory"),
                 "at": self._when(h.get("updated_at") or h.get("created_at"))}
                for h in self.store.history(rec.id)
            ]  # fmt: skip
            by_category.setdefault(rec.category or "", []).append(
                {"record": rec, "when": self._when(rec.updated_at or rec.created_at), "history": history}
            )
        order = [c for c in self.settings.durable_categories if c in by_category]
        order += sorted(c for c in by_category if c not in order)
        return [(c, by_category[c]) for c in order]

    def _turns(self, user_id: str, paging: Paging) -> list[tuple[str, list[dict[str, Any]]]]:
        """(session, turns) newest first: the page's turns grouped by the call they were said in."""
        rows = self.store.rows.user_page(user_id, facts=False, offset=paging.offset(TURNS_PER_PAGE),
                                         limit=TURNS_PER_PAGE)  # fmt: skip
        calls: dict[str, list[dict[str, Any]]] = {}
        for mem_id, payload in rows:
            rec = MemoryRecord.from_payload(mem_id, payload)
            session = str(rec.metadata.get("session_id") or "-")
            calls.setdefault(session, []).append({"record": rec, "when": self._when(rec.created_at)})
        out = []
        for session, turns in calls.items():
            said = [t for t in (parse_time(t["record"].created_at) for t in turns) if t is not None]
            out.append((session, {"turns": turns, **self._span(min(said, default=None), max(said, default=None))}))
        return out

    def _calls(self, user_id: str, paging: Paging) -> list[dict[str, Any]]:
        archive = self.admin.archive
        calls = archive.calls(user_id, offset=paging.offset(CALLS_PER_PAGE), limit=CALLS_PER_PAGE)
        messages = archive.call_messages(user_id, [c["chat_id"] for c in calls], per_call=MESSAGES_PER_CALL)
        by_chat: dict[str, list[dict[str, Any]]] = {}
        for m in messages:
            by_chat.setdefault(m["chat_id"], []).append(m)
        for call in calls:
            rows = by_chat.get(call["chat_id"], [])
            call["summary_rows"] = [m for m in rows if m["message_type"] == "summary"]
            call["message_rows"] = [m for m in rows if m["message_type"] != "summary"]
            call["cut"] = call["messages"] + call["summaries"] > len(rows)
            call.update(self._span(call["started_at"], call["ended_at"]))
        return calls

    def _span(self, start: datetime | None, end: datetime | None) -> dict[str, Any]:
        """A call's header: the day and time it began (the users' time zone) and how long
        it lasted in whole minutes (0: under a minute), rather than its id."""
        if start is None:
            return {"began": "", "minutes": None}
        minutes = int(((end or start) - start).total_seconds() // 60)
        return {"began": self._when(start), "minutes": minutes}

    def _when(self, stamp: object) -> str:
        """A stored time as the users' local time, to the minute."""
        if isinstance(stamp, datetime):
            when = stamp
        else:
            try:
                when = datetime.fromisoformat(str(stamp))
            except ValueError:
                return str(stamp or "")
        if when.tzinfo is None:
            return when.strftime("%Y-%m-%d %H:%M")
        return when.astimezone(self.zone).strftime("%Y-%m-%d %H:%M")

    # -------------------------------------------------------------- recall
    def recall(self, user_id: str, query: str) -> dict[str, Any]:
        """`memory.admin search`, and the block the reply's request would carry.

        The user's memory densities are computed at the first query, as a session does at
        its start (about a second for 10,000 memories), and reused for the retriever's
        5 minutes, as a session started within them would."""
        doc = self.admin.search(user_id, query)
        recalled = [
            MemoryRecord(c["id"], c["text"], user_id, c["category"], created_at=c["created_at"])
            for c in doc["considered"]
            if c["outcome"] == "recalled"
        ]
        shown, line_max = fit_recalled(recalled, self.settings.recall_max_chars)
        doc["block"] = format_memories(shown, line_max=line_max, zone=self.zone)
        return _user_words_apart(doc)

    # -------------------------------------------------------- export, forget
    def export(self, user_id: str) -> str:
        """`memory.admin export USER`, as it prints it (whole: `write_export` streams it)."""
        chunks: list[str] = []
        self.write_export(user_id, chunks.append)
        return "".join(chunks).rstrip("\n")

    def require_known(self, user_id: str) -> None:
        self.admin.require_known(user_id)

    def write_export(self, user_id: str, write: Callable[[str], object]) -> dict[str, int]:
        """`memory.admin export USER`, written as it is read (`UserData.write_export`)."""
        return self.admin.write_export(user_id, write)

    def holdings(self, user_id: str) -> dict[str, Any]:
        """What is kept about the user, per place with its parts (0 everywhere after a
        forget): the counts every page and command shows, and the places' names."""
        return {"counts": self.admin.counts(user_id), "places": place_names()}

    def forget(self, user_id: str) -> dict[str, Any]:
        """Forget the user as `memory.admin forget` does (over the places only: no service,
        no retriever); then count every place again."""
        gone = self.admin.data.forget(user_id)
        left = self.admin.counts(user_id)
        unreadable = dict(self.admin.data.unreadable)
        return {"user_id": user_id, "removed": gone.removed, "left": left, "places": place_names(),
                "nothing_left": not any(left[p] for p in place_names()) and not unreadable,
                "unreadable": unreadable, "failed": gone.failed,
                "forgotten_at": self.store.forgotten_at(user_id)}  # fmt: skip

    # -------------------------------------------------------- dead letters
    def dead_letters(self) -> list[dict[str, Any]]:
        return [r for r in self.admin.journal_rows() if r["state"] == DEAD]

    def replay(self, turn_ids: Sequence[str] | None) -> int:
        return self.admin.replay(turn_ids)

    # --------------------------------------------------------------- store
    def overview(self, days: int = CHART_DAYS) -> dict[str, Any]:
        """The admin's totals, and per day (in the users' time zone) for the last `days`:
        turns and facts stored (of those still kept), messages archived, replies that
        recalled and the memories they were given (recorded by each call as it ends)."""
        today = datetime.now(self.zone).date()
        first = today - timedelta(days=days - 1)
        since = datetime.combine(first, datetime.min.time(), tzinfo=self.zone)
        series: dict[date, dict[str, int]] = {
            first + timedelta(days=i): {"raw": 0, "facts": 0, "messages": 0, "recalls": 0, "injected": 0}
            for i in range(days)
        }
        for day, raw, facts in self.store.rows.created_per_day(since, self.settings.timezone):
            if day in series:
                series[day].update(raw=raw, facts=facts)
        for day, messages, _summaries in self.admin.archive.per_day(since, self.settings.timezone):
            if day in series:
                series[day]["messages"] = messages
        for day, counts in self.activity.per_day(first).items():
            if day in series:
                series[day].update(recalls=counts.get("recalls", 0), injected=counts.get("injected", 0))
        return {"stats": self.admin.stats(), "days": [(d, series[d]) for d in sorted(series)], "zone": str(self.zone)}


__all__ = ["Operator", "Paging"]


def _user_words_apart(doc: dict[str, Any]) -> dict[str, Any]:
    """The recall view's keywords without the word the pronouns were made (我/你/I/you are
    read as 用户/user, which memories about the user hold): an operator read 用户 as a word
    the user typed. Those go to `user_words`, said apart with what they stand for."""
    from memory.language.lexical import USER_EN, USER_ZH

    neutral = {USER_ZH, USER_EN}
    doc["user_words"] = [k for k in doc["keywords"] if k["word"] in neutral]
    doc["keywords"] = [k for k in doc["keywords"] if k["word"] not in neutral]
    return doc
