"""LiveKit glue: where memory meets the voice pipeline.

- Reads happen in `llm_node`, not in `on_user_turn_completed`: editing the turn
  context in that hook throws away LiveKit's preemptive reply (a second LLM
  call), anything awaited there delays the reply one for one, and typed input
  never reaches it. `llm_node` sees every request, spoken or typed, and what we
  add to its copy of the context is seen by the LLM for this request only.
- Look-ups start from `user_input_transcribed` (interim and final) and are
  waited for no longer than the budget (`prefetch.Recaller`).
- Writes start from `conversation_item_added` for user messages (spoken and
  typed alike) and run in the background, off the reply path.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from livekit.agents import AgentSession, llm
from livekit.agents.voice.events import (
    AgentStateChangedEvent,
    ConversationItemAddedEvent,
    UserInputTranscribedEvent,
    UserStateChangedEvent,
)

from memory.archive.writer import write_archived
from memory.journal.queue import DurableWriteQueue
from memory.livekit.blocks import fit_memories, fit_recalled, format_memories
from memory.livekit.turns import (
    INLINE_TURN_CHARS,
    _same_words,
    answered_turn,
    bounded_turn,
    context_text,
    query_text,
    turn_parts,
)
from memory.ops import metrics
from memory.prompts import load_prompt
from memory.retrieval.prefetch import Recaller, RecallResult
from memory.service import MemoryService, RememberReport
from memory.types import MemoryRecord, Turn, memory_user_id, now_iso, parse_time

logger = logging.getLogger("memory.livekit")

PROFILE_MESSAGE_ID = "memory_profile"
# A session's profile is read again at a user turn once it is this old (seconds).
PROFILE_MAX_AGE_S = 30.0
RECALL_MESSAGE_ID = "memory_recall"
# An interim transcript starts a look-up once no newer one has come for this long
# (seconds). A live STT sends one per word: a look-up for each kept a core busy while
# the user spoke, slowing the pipeline it was meant to speed up. A pause this long
# (and the end of the utterance) comes well before the final transcript, which still
# starts its look-up at once.
INTERIM_SETTLE_S = 0.2
# The store writes (the turn's embedding and insert, GATED's extraction, the archive's
# inserts) wait from the end of the user's speech until the reply's first audio frame,
# and no longer than this (seconds): on 2 cores they delayed the reply they ran beside
# (docs/latency.md). It covers the VAD's silence, the endpointing delay and a slow
# model's first token and audio; past it the writes go on anyway. The turn is in the
# journal on disk from its commit on, held or not.
WRITE_HOLD_MAX_S = 5.0
# The role of the memory blocks: stored text is untrusted, and OpenAI's guidance is to
# keep untrusted text out of system/developer messages, which outrank the user; LiveKit's
# own RAG and initial-context examples add such context as an assistant message. An
# assistant message carries no authority of its own (docs/hostile-input.md).
MEMORY_ROLE: llm.ChatRole = "assistant"


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


class MemorySession:
    """One user's memory in one LiveKit session."""

    def __init__(
        self,
        service: MemoryService,
        *,
        user_id: str,
        session_id: str | None = None,
        budget_s: float | None = None,
        queue: DurableWriteQueue | None = None,
    ) -> None:
        self.service = service
        self.user_id = memory_user_id(user_id)  # the participant identity, as the store keeps it
        self.session_id = session_id or uuid.uuid4().hex
        budget = service.settings.recall_budget_ms / 1000 if budget_s is None else budget_s
        self.recaller = Recaller(self._fetch, budget_s=budget, context=lambda: tuple(self.earlier_turns()))
        self.profile: list[MemoryRecord] | None = None
        self._zone = ZoneInfo(service.settings.timezone)  # dates as the user lives them
        self._profile_task: asyncio.Task[None] | None = None
        self._profile_loaded = asyncio.Event()  # fetched, or failed: no more reason to wait
        # A reply waited its whole budget for the profile and it did not come (a hung
        # store, a locked table): later replies do not wait for it again.
        self._profile_missed = False
        self._profile_at = time.monotonic()  # when it was last asked for
        # An operator's forget during the session (`python -m memory.forget`): looked for
        # once a turn, as the user starts speaking; memories from before it are not shown.
        self._forgotten_at: datetime | None = None
        self._forget_check: asyncio.Task[None] | None = None
        self._checked_this_turn = False
        # Completed turns go through a journal on disk, so an outage or a crash loses nothing.
        self.queue = queue or DurableWriteQueue(
            service.settings.journal_path,
            self._remember,
            # Turns that stopped workers left go to a queue whose store can take them.
            may_adopt=lambda: getattr(service.store, "available", True),
            mode=service.mode.value,
            spill_dir=service.settings.spill_dir,
        )
        # Long turns are cut, redacted and split on a thread, one after another: the
        # turns after one wait for it, so the journal keeps the order they were said in.
        self._turn_prep: asyncio.Future[None] | None = None
        self._recent: deque[str] = deque(maxlen=2)
        # The user's own earlier turns, which shape each look-up (Retriever.retrieve).
        # One more than the look-up uses: after a turn is committed it is the newest
        # entry, and a look-up for that turn leaves it out (`earlier_turns`).
        self._user_turns: deque[str] = deque(maxlen=service.settings.retrieval.context_turns + 1)
        self._current_committed = False  # is the newest entry the turn being answered?
        self._turn_finals: list[str] = []  # final transcripts of the turn being spoken
        self._interim_timer: asyncio.TimerHandle | None = None
        self._seq = 0
        self._committed_ids: deque[str] = deque(maxlen=16)  # user messages LiveKit added
        self._logged_ids: deque[str] = deque(maxlen=16)  # user messages a turn log is for
        self.turns: list[TurnLog] = []
        self.write_reports: list[RememberReport] = []
        # Others that shape each request's copy of the context, after memory has (the
        # conversation archive: memory/livekit/archive.py), and that close before the
        # journal does (so what they enqueue at the end is drained with the turns).
        self.context_hooks: list[Callable[[llm.ChatContext], Awaitable[None]]] = []
        self.close_hooks: list[Callable[[], Awaitable[None]]] = []

    # --------------------------------------------------------------- wiring
    def attach(self, session: AgentSession) -> None:
        """Subscribe to the session's events and start the profile fetch (not awaited)."""
        session.on("user_input_transcribed", self._on_transcribed)
        session.on("conversation_item_added", self._on_item_added)
        session.on("user_state_changed", self._on_user_state)
        session.on("agent_state_changed", self._on_agent_state)
        self.queue.start()
        self.start_profile()

    def start_profile(self) -> None:
        if self._profile_task is None:
            self._profile_task = asyncio.ensure_future(self._load_profile())

    async def wait_profile(self, timeout_s: float = 10.0) -> None:
        """For tests and tools: wait until the profile fetch has finished (bounded)."""
        self.start_profile()
        assert self._profile_task is not None
        await asyncio.wait({self._profile_task}, timeout=timeout_s)

    async def _load_profile(self) -> None:
        """Session start, in the background: the profile (one quick query, wanted by the
        first reply), then retrieval's per-user cache (about a second for a large store)."""
        self._profile_at = time.monotonic()
        try:
            self.profile = await self.service.profile(self.user_id)
        except Exception as exc:  # a dead store means no profile, never a stuck session
            logger.warning("profile fetch failed: %r", exc)
            self.profile = []
        self._profile_loaded.set()
        try:
            await self.service.prepare(self.user_id)
        except Exception as exc:  # look-ups go uncorrected and start it again
            logger.warning("retrieval warm-up failed: %r", exc)

    def _check_forget_once(self) -> None:
        if not self._checked_this_turn:
            self._checked_this_turn = True
            if self._forget_check is None or self._forget_check.done():  # a hung store: one read held, not one a turn
                self._forget_check = asyncio.ensure_future(self._check_forget())

    async def _check_forget(self) -> None:
        """Has the user been forgotten since we last looked? Then the answers cached for
        this session (a look-up that misses its budget falls back to one up to 30 s old)
        and the profile lose every memory from before it, at once, not 30 s later.
        One primary-key read, off the reply path; a failed read changes nothing."""
        try:
            at = await self.service.forgotten_at(self.user_id)
        except Exception as exc:  # noqa: BLE001 - a dead store: the next turn looks again
            logger.debug("forget check failed: %r", exc)
            return
        if at is not None and (self._forgotten_at is None or at > self._forgotten_at):
            self._forgotten_at = at
            self.recaller.clear()
            if self.profile:
                self.profile = self._after_forget(self.profile)

    def _after_forget(self, records: list[MemoryRecord]) -> list[MemoryRecord]:
        """The records made after the user's last known forget (all of them if none)."""
        if self._forgotten_at is None:
            return records
        return [r for r in records if (made := parse_time(r.created_at)) is not None and made > self._forgotten_at]

    async def _refresh_profile(self) -> None:
        """GATED stored or superseded a fact: the profile shown with every request must
        not go on saying the old value ("lives in Paris" after "I moved to Berlin").
        Also when it is older than `PROFILE_MAX_AGE_S` at a user turn: an operator's
        forget (or another session's new fact) must reach a session that is still going.
        Runs in the write queue's task, off the reply path; a failed read keeps the old."""
        self._profile_at = time.monotonic()
        try:
            self.profile = await self.service.profile(self.user_id)
        except Exception as exc:  # noqa: BLE001 - the next write tries again
            logger.warning("profile refresh failed: %r", exc)

    def _on_user_state(self, ev: UserStateChangedEvent) -> None:
        """The user starts speaking: the turn's forget check goes now, long before the
        reply (a batch STT's only transcript comes after the end of speech, where the
        check's read ran beside the reply's look-up). The user stops: the store writes
        wait until the reply's first audio frame (`WRITE_HOLD_MAX_S`)."""
        if ev.new_state == "speaking":
            self._check_forget_once()
        elif ev.old_state == "speaking":
            self.queue.hold(WRITE_HOLD_MAX_S)

    def _on_agent_state(self, ev: AgentStateChangedEvent) -> None:
        """The reply's first audio frame (the agent starts speaking), or the reply ended
        without one (interrupted, nothing to say): the held writes go."""
        if ev.new_state == "speaking" or ev.old_state in ("thinking", "speaking"):
            self.queue.release()

    def _on_transcribed(self, ev: UserInputTranscribedEvent) -> None:
        """Prefetch for what the user has said so far in this turn.

        A turn the user speaks with a pause in it reaches us as several final
        transcripts, one per segment, and LiveKit commits them joined: the look-up
        must be for the words so far (earlier finals plus this one), or the reply
        would find no prefetch for its words and wait out its budget."""
        self._current_committed = False  # a new turn is being spoken
        self._check_forget_once()
        so_far = " ".join([*self._turn_finals, ev.transcript.strip()]).strip()
        segment = ev.transcript.strip()
        if ev.is_final and segment:
            self._turn_finals.append(segment)
        if self._interim_timer is not None:
            self._interim_timer.cancel()
            self._interim_timer = None
        if self.service.wants_recall(so_far):
            if ev.is_final:
                self.recaller.prefetch(so_far, final=True)
            else:
                self._interim_timer = asyncio.get_running_loop().call_later(
                    INTERIM_SETTLE_S, lambda text=so_far: self.recaller.prefetch(text, final=False)
                )
        if ev.is_final and len(self._turn_finals) > 1 and self.service.wants_recall(segment):
            # The earlier finals may belong to a turn LiveKit threw away (push-to-talk
            # cancel, a turn a subclass stopped): then the committed words are this
            # segment's alone, and one more look-up beats waiting out the budget.
            self.recaller.prefetch(segment, final=True)

    def _on_item_added(self, ev: ConversationItemAddedEvent) -> None:
        item = ev.item
        if not isinstance(item, llm.ChatMessage):
            return
        text = (item.text_content or "").strip()
        if not text or item.role not in ("user", "assistant"):
            return
        if item.role == "user":
            self._check_forget_once()  # typed input brings no transcript: for the next turn
            self._checked_this_turn = False
            stored = bounded_turn(text, self.service.settings.max_stored_turn_chars, item.id)
            turn = Turn(
                user_id=self.user_id,
                text=stored,
                session_id=self.session_id,
                turn_id=item.id or uuid.uuid4().hex,
                created_at=now_iso(),
                context=tuple(self._recent),  # what came before: on the first part only
                seq=self._seq,
            )
            inline = len(stored) <= INLINE_TURN_CHARS and (self._turn_prep is None or self._turn_prep.done())
            if inline:
                parts = turn_parts(turn, self.service.settings.max_turn_chars)
                self._enqueue_parts(parts)
                self._seq += len(parts)
            else:  # long: redacted and split off the event loop, in order
                self._turn_prep = asyncio.ensure_future(self._prepare_off_loop(self._turn_prep, turn))
                self._seq += len(stored) // max(self.service.settings.max_turn_chars // 2, 1) + 1  # its parts at most
            query = query_text(text, self.service.settings.max_turn_chars)
            self._user_turns.append(query)
            self._current_committed = True
            self._turn_finals = []
            self._committed_ids.append(item.id)
            self._settle_log(item.id, query)
        self._recent.append(f"{item.role}: {context_text(text)}")

    def _enqueue_parts(self, parts: list[Turn]) -> None:
        for part in parts:
            self.queue.enqueue(part)

    async def _prepare_off_loop(self, before: asyncio.Future[None] | None, turn: Turn) -> None:
        if before is not None:
            await asyncio.wait({before})
        try:
            parts = await asyncio.to_thread(turn_parts, turn, self.service.settings.max_turn_chars)
        except Exception as exc:  # never: the whole turn rather than none of it
            logger.error("turn %s could not be split (%r); journaled whole", turn.turn_id, exc)
            parts = [turn]
        self._enqueue_parts(parts)

    def _settle_log(self, item_id: str, committed: str) -> None:
        """The user's message is committed: a reply asked for before was the one used if
        it was for this message (LiveKit also takes a preemptive reply whose words differ
        only in case or punctuation), and was thrown away if not."""
        if not self.turns or not self.turns[-1].provisional:
            return
        log = self.turns[-1]
        if log.item_id == item_id or _same_words(log.text, committed):
            log.provisional, log.text = False, committed
            self._log_turn(log)
        else:
            self._drop_provisional()

    def _drop_provisional(self) -> None:
        log = self.turns.pop()
        if log.item_id in self._logged_ids:
            self._logged_ids.remove(log.item_id)

    async def _remember(self, turn: Turn) -> RememberReport:
        """The queue's handler: raises on a transient failure so the turn is retried."""
        if turn.kind != "memory":  # an archived message (any session's: a replay)
            await write_archived(self.service.store, turn, self.queue)  # with the rows behind it
            return RememberReport()
        report = await self.service.remember(turn, keep_verdict=self.queue.keep)
        self.write_reports.append(report)
        gate = report.gate
        if gate is not None:
            metrics.GATE.labels(gate.decision.action.value, gate.decision.reason).inc()
        for write in report.writes:
            metrics.WRITES.labels(write.event).inc()
        changed = any(w.event != "NOOP" for w in report.writes)
        if self.profile is not None and (changed or time.monotonic() - self._profile_at >= PROFILE_MAX_AGE_S):
            await self._refresh_profile()
        logger.info(
            "memory write",
            extra={
                "writes": [w.event for w in report.writes],
                "gate": gate.decision.action.value if gate else None,
                "gate_reason": gate.decision.reason if gate else None,
                "extraction_called": gate.extraction_called if gate else None,
                "dropped": report.dropped,
            },
        )
        return report

    def earlier_turns(self) -> list[str]:
        """The user's turns in this session before the one being answered, oldest first
        (the look-up's context). The same before the turn is committed (prefetch) and
        after (a look-up at reply time, typed input)."""
        earlier = list(self._user_turns)
        if self._current_committed and earlier:
            earlier.pop()
        return earlier

    async def _fetch(self, text: str, context: tuple[str, ...]) -> list[MemoryRecord]:
        return await self.service.recall(self.user_id, text, list(context), self.session_id)

    # --------------------------------------------------------------- reading
    async def _profile_within(self, timeout_s: float) -> None:
        """A profile still loading is waited for, within the reply's budget: the first
        reply (the greeting) may come before the session-start fetch is back, and it is
        the one that should know the user. A slow store costs one reply the budget, once:
        after that, replies take the profile when it is there and never wait for it."""
        if self._profile_task is None or self._profile_loaded.is_set() or self._profile_missed:
            return
        try:
            await asyncio.wait_for(self._profile_loaded.wait(), timeout_s)
        except TimeoutError:
            # Once is enough: a read still out after a whole budget is hung, and waiting
            # for it again cost every later reply the full budget for as long as it hung.
            self._profile_missed = True
            logger.info("profile not ready within the budget; replies go without it until it comes")

    async def prepare_chat_ctx(self, chat_ctx: llm.ChatContext) -> llm.ChatContext:
        """A copy of the context with the profile and this turn's memories added."""
        ctx = chat_ctx.copy()
        items = ctx.items
        last_user = answered_turn(items)
        item_id = items[last_user].id if last_user is not None else None
        said = items[last_user].text_content or "" if last_user is not None else ""
        # A 5 MB typed message is looked up by its last words, as the embedder reads it.
        log = TurnLog(text=query_text(said, self.service.settings.max_turn_chars))

        profile_ready = self._profile_within(self.recaller.budget_s)
        if last_user is not None and self.service.wants_recall(log.text):
            # Typed input brings no transcript to say a new turn began, and reaches
            # llm_node before LiveKit commits it: the flag still speaks of the turn
            # before. The newest earlier turn is the one being answered only if it is
            # this text.
            if self._current_committed and self._user_turns and self._user_turns[-1] != log.text.strip():
                self._current_committed = False
            # Both within one budget, side by side: the reply waits for the slower only.
            # A follow-up (after a tool) finds the first request's look-up done.
            log.recall, _ = await asyncio.gather(self.recaller.get(log.text), profile_ready)
        else:
            await profile_ready

        shown: set[str] = set()
        profile = self._after_forget(self.profile or [])
        if profile:
            # Only what fits is shown, and only what is shown is left out of recall below.
            fitting = fit_memories(profile, self.service.settings.profile_max_chars)
            block = load_prompt("user_profile").format(memories=format_memories(fitting, zone=self._zone))
            pos = 0
            while pos < len(items) and getattr(items[pos], "role", None) in ("system", "developer"):
                pos += 1
            items.insert(pos, llm.ChatMessage(role=MEMORY_ROLE, content=[block], id=PROFILE_MESSAGE_ID))
            shown = {r.id for r in fitting}
            log.profile_injected = True
            if last_user is not None:
                last_user += 1

        if log.recall is not None:
            # Bounded like the profile: five long turns made a 9,000-character block on every
            # reply. A long memory is shown cut to a third of the block, so others fit too.
            candidates = [r for r in self._after_forget(log.recall.records) if r.id not in shown]
            fresh, line_max = fit_recalled(candidates, self.service.settings.recall_max_chars)
            if fresh:
                block = load_prompt("recalled_memories").format(
                    memories=format_memories(fresh, line_max=line_max, zone=self._zone),
                    today=datetime.now(self._zone).date().isoformat(),
                )
                assert last_user is not None
                items.insert(last_user, llm.ChatMessage(role=MEMORY_ROLE, content=[block], id=RECALL_MESSAGE_ID))
                log.injected = len(fresh)
                log.injected_ids = [r.id for r in fresh]
        if last_user is not None and item_id not in self._logged_ids:
            # A request for a message already logged (a tool's result, a hand-off's first
            # reply) is the same turn: its memories are injected, it is not logged again.
            if self.turns and self.turns[-1].provisional:
                self._drop_provisional()  # a preemptive reply for words the user went on from
            log.item_id = item_id
            log.provisional = item_id not in self._committed_ids
            self.turns.append(log)
            self._logged_ids.append(item_id)
            if not log.provisional:
                self._log_turn(log)
        for hook in self.context_hooks:
            await hook(ctx)
        return ctx

    def _log_turn(self, log: TurnLog) -> None:
        recall = log.recall
        if recall is not None:
            metrics.REPLY_WAIT_SECONDS.observe(recall.waited_s)
            if recall.took_s is not None:
                metrics.RECALL_SECONDS.observe(recall.took_s)
            outcome = (
                "budget_missed" if recall.missed_budget
                else "error" if recall.error
                else "prefetched" if recall.prefetched
                else "fetched"
            )  # fmt: skip
            metrics.RECALLS.labels(outcome).inc()
        metrics.INJECTED.inc(log.injected)
        if log.profile_injected:
            metrics.PROFILES.inc()
        logger.info(
            "memory turn",
            extra={
                "recall_ran": recall is not None,
                "recall_ms": round(recall.took_s * 1000, 1) if recall and recall.took_s else None,
                "waited_ms": round(recall.waited_s * 1000, 1) if recall else 0.0,
                "budget_missed": bool(recall and recall.missed_budget),
                "prefetched": bool(recall and recall.prefetched),
                "earlier_context": bool(recall and recall.earlier_context),
                "injected": log.injected,
                "profile": log.profile_injected,
            },
        )

    # -------------------------------------------------------------- shutdown
    async def _prepared(self, timeout_s: float) -> None:
        """Long turns still being split reach the journal before a drain or close."""
        if self._turn_prep is not None and not self._turn_prep.done():
            await asyncio.wait({self._turn_prep}, timeout=timeout_s)

    async def drain(self, timeout_s: float = 5.0) -> bool:
        """Wait (bounded) for pending writes; True if all were written."""
        await self._prepared(timeout_s)
        return await self.queue.drain(timeout_s)

    async def aclose(self, *, drain_timeout_s: float = 5.0) -> None:
        """Bounded drain; what is not written stays on disk for the next start.

        Keyword-only on purpose: LiveKit calls a shutdown callback that takes an argument
        with the shutdown reason (a string), which then was the drain's timeout."""
        if self._interim_timer is not None:
            self._interim_timer.cancel()
        await self._prepared(max(drain_timeout_s, 5.0))
        for close in self.close_hooks:
            try:
                await close()
            except Exception as exc:  # noqa: BLE001 - the journal still closes
                logger.warning("memory close hook failed: %r", exc)
        drained = await self.queue.aclose(drain_timeout_s)
        await self.recaller.aclose()
        for task in (self._profile_task, self._forget_check):
            if task is not None and not task.done():
                task.cancel()
        turns = [t for t in self.turns if not t.provisional]  # a reply never used is no turn
        logger.info(
            "memory session summary",
            extra={
                "user_turns": len(turns),
                "recalls": sum(1 for t in turns if t.recall),
                "budget_missed": sum(1 for t in turns if t.recall and t.recall.missed_budget),
                "injected": sum(t.injected for t in turns),
                "writes": sum(len(r.writes) for r in self.write_reports),
                "drained": drained,
            },
        )
        # The operator's chart of recalls per day (memory/storage/activity.py): after the call.
        await self.service.record_activity(
            {"recalls": sum(1 for t in turns if t.recall), "injected": sum(t.injected for t in turns)}
        )
