"""What each `MEM0_SETTING` does on a turn: recall, remember, and the profile.

This is the only place that knows the difference between NORMAL and GATED;
the LiveKit glue asks it "recall for this text", "remember this turn" and
"the profile", and never branches on the mode itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from memory.errors import AgentMemoryError
from memory.gatekeeper.gatekeeper import MAX_KNOWN_FACTS, Fact, Gatekeeper, GateOutcome, KnownFact
from memory.language.dates import Span
from memory.language.prefilter import GateAction, GateDecision
from memory.language.recall_intent import needs_memory
from memory.language.redact import redact_secrets
from memory.language.small_talk import is_small_talk
from memory.language.validity import held_from, is_correction
from memory.ops.threads import configure_reads, run_read, run_upkeep, run_write
from memory.retrieval.retriever import NO_LOOK_UP, Explanation, Retriever
from memory.settings import MemoryMode, MemorySettings
from memory.storage.activity import DailyActivity
from memory.storage.store import MemoryStore
from memory.types import MemoryRecord, Turn, WriteResult, clean_text, describe_error, parse_time
from memory.userdata import Forgotten, UserData

logger = logging.getLogger(__name__)


def _verdict(outcome: GateOutcome) -> dict[str, Any]:
    return {
        "action": outcome.decision.action.value,
        "reason": outcome.decision.reason,
        "facts": [fact.model_dump() for fact in outcome.facts],
    }


def _journaled_verdict(turn: Turn) -> GateOutcome | None:
    """The verdict a worker made for this turn before it stopped, from the journal."""
    if not turn.verdict:
        return None
    try:
        decision = GateDecision(GateAction(turn.verdict["action"]), str(turn.verdict["reason"]))
        return GateOutcome(decision, [Fact(**fact) for fact in turn.verdict["facts"]])
    except (KeyError, TypeError, ValueError):  # a row from another version: ask the model again
        return None


@dataclass
class RememberReport:
    """What the write path did with one turn (for logs, metrics and tests)."""

    writes: list[WriteResult] = field(default_factory=list)
    gate: GateOutcome | None = None
    dropped: str | None = None
    redacted: list[str] = field(default_factory=list)  # kinds of secret left out, never values
    cut_from: int | None = None  # the turn's length, when it was cut to `max_turn_chars`


# The profile is short: who the user is comes first, then each kind of fact in turn.
PROFILE_PINNED: tuple[str, ...] = ("name",)
PROFILE_ORDER: tuple[str, ...] = ("personal_facts", "relationships", "preferences", "goals")


def profile_order(records: Sequence[MemoryRecord], limit: int, today: date | None = None) -> list[MemoryRecord]:
    """The profile's facts, at most `limit`: the user's name first, then the newest fact
    of each category in turn (personal facts, relationships, preferences, goals), and
    round again. Newest-first alone let twelve new hobbies push out the user's name and
    allergy; the caller then drops whole lines past the character bound from the end.
    A fact about days that are all over by `today` (the dentist appointment last week,
    its dates resolved when it was stored) comes after the current ones of its category."""
    pinned = [r for r in records if r.slot in PROFILE_PINNED]
    queues: dict[str, deque[MemoryRecord]] = {}
    current = [r for r in records if today is None or not _over(r, today)]
    for rec in [*current, *(r for r in records if r not in current)]:  # newest first, past events last
        if rec.slot not in PROFILE_PINNED:
            queues.setdefault(rec.category or "", deque()).append(rec)
    order = [c for c in PROFILE_ORDER if c in queues] + sorted(c for c in queues if c not in PROFILE_ORDER)
    out = pinned[:limit]
    while len(out) < limit and any(queues[c] for c in order):
        for category in order:
            if queues[category] and len(out) < limit:
                out.append(queues[category].popleft())
    return out


def _over(rec: MemoryRecord, today: date) -> bool:
    """Is the fact only about days before `today` (its resolved dates, `when`)?"""
    spans = [s for s in (Span.from_iso(p) for p in rec.metadata.get("when") or []) if s is not None]
    return bool(spans) and all(s.end < today for s in spans)


def _corrects(turn: str, flagged: bool, old_value: str) -> bool:
    """Does the turn correct `old_value` (the model said so, or the turn's words do)?"""
    return flagged or is_correction(turn, old_value)


class MemoryService:
    """Mode-aware memory operations over one store; shared by all sessions of a process."""

    def __init__(
        self,
        store: MemoryStore,
        settings: MemorySettings,
        *,
        gatekeeper: Gatekeeper | None = None,
        retriever: Retriever | None = None,
        reads: bool = True,
    ) -> None:
        """`reads=False`: a service that only writes (an operator's import): its retriever,
        and the Chinese segmenter and numeral tables it loads, are made on first use only."""
        self.store = store
        self.settings = settings
        self.mode = settings.mode
        self.gatekeeper = gatekeeper or Gatekeeper(None, learned=settings.gate_model)
        if retriever is not None:
            self.__dict__["retriever"] = retriever
        elif reads:
            _ = self.retriever  # made now: its segmenter loads in the background, not on the first turn
        # A look-up may wait for a read slot at most this long: the reply's budget.
        self._read_wait_s = settings.recall_budget_ms / 1000
        self._zone = ZoneInfo(settings.timezone)
        configure_reads(settings.max_reads_in_flight)
        # GATED: the gatekeeper's verdict per turn, kept until the turn's facts are all
        # written, so a store write that fails and is retried does not call the
        # extraction model again (cost, and a reworded answer would add a duplicate).
        self._reviewed: OrderedDict[str, GateOutcome] = OrderedDict()

    @functools.cached_property
    def retriever(self) -> Retriever:
        return Retriever(self.store, self.settings)

    # ------------------------------------------------------------------ read
    def wants_recall(self, text: str) -> bool:
        """NORMAL recalls on every turn that says something; GATED only when the message
        needs memory. Small talk ("ok", "thanks", "how's the weather?", 嗯, 再见:
        `is_small_talk`) gets no look-up in either mode: what it would find is what its
        words' neighbours happen to be (the user's own chit-chat, as high as an answer),
        and with a batch STT the reply would wait for it."""
        if is_small_talk(text):
            return False
        return self.mode is MemoryMode.NORMAL or needs_memory(text)

    @property
    def recall_categories(self) -> Sequence[str] | None:
        return self.settings.durable_categories if self.mode is MemoryMode.GATED else None

    def recall_sync(
        self,
        user_id: str,
        text: str,
        context: Sequence[str] = (),
        session_id: str | None = None,
        *,
        now: datetime | None = None,
    ) -> list[MemoryRecord]:
        """The one recall path: what a reply to `text` is given, for a spoken turn, a typed
        one, `memory.recall`, MCP's recall and the operator's "what would it recall" alike.
        Empty for a turn that gets no look-up (`wants_recall`: a bare "ok", 嗯; in GATED a
        turn that does not need memory), else the retriever's memories that clear the
        relevance threshold, at most `MEMORY_TOP_K`. `now`: when it is asked (default now)."""
        if not self.wants_recall(text):
            return []
        # A broken transcript (an unpaired surrogate) must not fail the embedder.
        return self.retriever.retrieve(
            user_id,
            clean_text(text),
            categories=self.recall_categories,
            context=[clean_text(t) for t in context],
            exclude_session=session_id,
            now=now,
        )

    def explain_sync(self, user_id: str, text: str) -> Explanation:
        """`recall_sync` explained: every candidate with its scores and what became of it
        (the operator's "what would it recall"). Its `recalled` is what `recall_sync` gives:
        none for a turn that gets no look-up (every candidate is still listed, as considered)."""
        explained = self.retriever.explain(user_id, clean_text(text), categories=self.recall_categories)
        if self.wants_recall(text):
            return explained
        skipped = tuple(dataclasses.replace(c, outcome=NO_LOOK_UP) for c in explained.considered)
        return dataclasses.replace(explained, considered=skipped)

    async def recall(
        self, user_id: str, text: str, context: Sequence[str] = (), session_id: str | None = None
    ) -> list[MemoryRecord]:
        """Memories for `text`. `context`: the user's earlier turns in the session;
        `session_id`: the current session, whose own memories are in its chat already."""
        return await run_read(self.recall_sync, user_id, text, context, session_id, wait_s=self._read_wait_s)

    async def prepare(self, user_id: str) -> None:
        """Session start, in the background: read the user's memories into the process
        (`MemoryStore.open_session_index`, with MEMORY_SESSION_INDEX), compute what
        retrieval keeps per user (the density of each of the user's memories), so the
        first look-up does not pay for it on the reply's clock; then bring the lexical
        index of the user's older rows up to date (`MemoryStore.reindex_lex`)."""
        # Awaited as a future, not on the read pool: a second of numpy must not hold
        # one of the read slots that the turns' look-ups need.
        # Shielded: the computation is shared (one retriever per process), and a session
        # that closes while waiting must not cancel it for the others: a cancelled one
        # would stay registered as running and the user would get no densities again.
        if self.settings.session_index:
            # First the user's rows into this process (look-ups use SQL until they are in);
            # the densities are then computed from them, not read a second time.
            try:
                await run_upkeep(self.store.open_session_index, user_id)
            except Exception as exc:  # noqa: BLE001 - look-ups take the SQL path
                logger.warning("the caller's memories not loaded into the process: %r", exc)
        else:  # whether the user's SQL vector stage walks the HNSW graph (mem0_table.WALK_FROM)
            try:
                await run_upkeep(self.store.rows.walks, user_id)
            except Exception as exc:  # noqa: BLE001 - the exact scan meanwhile
                logger.warning("the caller's memories not counted: %r", exc)
        await asyncio.shield(asyncio.wrap_future(self.retriever.prepare_future(user_id)))
        try:
            count = await run_upkeep(self.store.reindex_lex, user_id)
        except Exception as exc:  # noqa: BLE001 - old rows stay findable by substring and vector
            logger.warning("lexical re-index failed: %r", exc)
            return
        if count:
            logger.info("re-indexed %d memories of %s for full-text recall", count, user_id)

    async def profile(self, user_id: str) -> list[MemoryRecord]:
        """GATED: the user's durable facts for the session-start profile; NORMAL: none."""
        if self.mode is not MemoryMode.GATED:
            return []
        limit = self.settings.profile_max_items
        rows = await run_read(
            self.store.newest_per_category,
            user_id,
            self.settings.durable_categories,
            limit,
            slots=PROFILE_PINNED,
            wait_s=self._read_wait_s,
        )
        return profile_order(rows, limit, today=datetime.now(self._zone).date())

    async def record_activity(self, counts: dict[str, int], *, timeout_s: float = 2.0) -> None:
        """Add a finished session's counts (`activity.KINDS`) to today's, in the users' time
        zone: one UPSERT on the write pool, bounded; a failure costs a point on the
        operator's chart, never the session's close."""
        if not any(counts.values()):
            return
        day = datetime.now(ZoneInfo(self.settings.timezone)).date()

        def add() -> None:
            DailyActivity(self.store.pool, self.store.table).add(day, counts)

        try:
            await asyncio.wait_for(run_write(add), timeout_s)
        except Exception as exc:  # noqa: BLE001 - counts only
            logger.info("daily counts not recorded: %s", describe_error(exc))

    # ---------------------------------------------------------------- forget
    async def forgotten_at(self, user_id: str) -> datetime | None:
        """When the user last asked to be forgotten (a read slot, like any read)."""
        return await run_read(self.store.forgotten_at, user_id)

    def forget(self, user_id: str) -> Forgotten:
        """ "Forget me": the user's rows in every place that holds them (`memory/userdata.py`,
        the one list), each tried whatever happened to the others; the result says how many
        went from each and what could not be done. Turns of the user on their way anywhere
        else are refused when they arrive: the store records the request before deleting."""
        return UserData(self.store, self.settings).forget(user_id)

    # ----------------------------------------------------------------- write
    async def _known_facts(self, user_id: str) -> list[KnownFact]:
        """The user's stored facts that have a slot, newest first, for the extraction
        model (`Gatekeeper.review`). A failed read raises: the queue retries the turn,
        rather than extracting blind and replacing a value it should have added to."""
        records = await run_write(
            self.store.list_user,
            user_id,
            categories=self.settings.durable_categories,
            limit=MAX_KNOWN_FACTS,
            past=False,  # what holds now: a past value is no slot to replace
        )
        return [KnownFact(rec.slot, rec.text) for rec in records if rec.slot]

    def _turn_mode(self, turn: Turn) -> MemoryMode:
        """The mode the turn was said under (its journal row's), else this worker's: a
        GATED turn replayed by a NORMAL worker must not be stored raw."""
        if turn.mode:
            try:
                return MemoryMode(turn.mode)
            except ValueError:
                logger.warning(
                    "turn %s has an unknown mode %r; written as %s", turn.turn_id, turn.mode, self.mode.value
                )
        return self.mode

    @staticmethod
    def _redacted_context(turn: Turn, items: tuple[str, ...]) -> list[str]:
        """The turn's context without secrets: as it came when the door redacted the turn."""
        return list(items) if turn.redacted else [redact_secrets(clean_text(t))[0] for t in items]

    async def remember(self, turn: Turn, keep_verdict: Callable[[Turn], None] | None = None) -> RememberReport:
        """Store what this mode keeps of a turn, secrets left out. Bad input is dropped
        with a reason. The glue splits long turns (`split_turn`); one that still comes
        longer is cut, and says so."""
        # A turn the session's door redacted (`Turn.redacted`) is not redacted again.
        text, secrets = (turn.text.strip(), []) if turn.redacted else redact_secrets(clean_text(turn.text).strip())
        report = RememberReport(redacted=secrets)
        if secrets:
            logger.info("left secrets out of a memory: %s", ", ".join(sorted(set(secrets))))
        if not text:
            report.dropped = "empty"
            return report
        if len(text) > self.settings.max_turn_chars:
            report.cut_from = len(text)
            logger.warning("turn %s cut to %d of %d characters", turn.turn_id, self.settings.max_turn_chars, len(text))
            text = text[: self.settings.max_turn_chars]
        meta: dict[str, object] = {
            "session_id": turn.session_id,
            "turn_id": turn.turn_id,
            "timestamp": turn.created_at,
        }
        if self._turn_mode(turn) is MemoryMode.NORMAL:
            if turn.seq is not None:
                meta["seq"] = turn.seq
            try:
                result = await run_write(
                    self.store.add_raw,
                    turn.user_id,
                    text,
                    metadata=meta,
                    write_id=turn.turn_id,
                    said_at=turn.created_at,
                    # What the turn answers indexes it (MEMORY_RETRIEVAL_INDEX_CONTEXT).
                    context=self._redacted_context(turn, turn.context[-1:]),
                )
            except AgentMemoryError as exc:  # bad text, or said before a forget: dropped
                if exc.retryable:
                    raise
                report.dropped = str(exc)
                return report
            report.writes.append(result)
            return report

        if await run_write(self.store.forgotten, turn.user_id, turn.created_at):
            # Said before the user asked to be forgotten: not even the extraction model sees it.
            report.dropped = "the user asked to be forgotten after this was said"
            return report
        outcome = self._reviewed.get(turn.turn_id) or _journaled_verdict(turn)
        if outcome is None:
            context = self._redacted_context(turn, turn.context)
            outcome = await self.gatekeeper.review(text, context, functools.partial(self._known_facts, turn.user_id))
            for fact in outcome.facts:  # a model that kept a secret anyway
                fact.text, more = redact_secrets(fact.text)
                report.redacted += more
            self._reviewed[turn.turn_id] = outcome
            while len(self._reviewed) > 256:
                self._reviewed.popitem(last=False)
            if keep_verdict is not None and outcome.facts:
                keep_verdict(dataclasses.replace(turn, verdict=_verdict(outcome)))
        report.gate = outcome
        said = parse_time(turn.created_at)
        # The day its facts began to hold: a date the turn names, else the day it was said.
        held = held_from(text, said.astimezone(self._zone).date()).isoformat() if said is not None else None
        for index, fact in enumerate(outcome.facts):
            try:
                result = await run_write(
                    self.store.upsert_fact,
                    turn.user_id,
                    fact.text,
                    category=fact.category,
                    slot=fact.slot,
                    metadata=meta,  # not the turn itself: GATED keeps the canonical facts only
                    write_id=f"{turn.turn_id}:{index}",
                    said_at=turn.created_at,
                    valid_from=held,
                    # A correction replaces the value without making it a past one.
                    correction=functools.partial(_corrects, text, fact.corrects),
                )
            except AgentMemoryError as exc:
                if exc.retryable:
                    raise
                logger.warning("dropped a fact (%s): %s", fact.category, exc)  # not its text: logs outlive a forget
                continue
            report.writes.append(result)
        self._reviewed.pop(turn.turn_id, None)
        return report
