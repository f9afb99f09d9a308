"""LiveKit glue: where memory meets the voice pipeline.

`MemorySession` subscribes to one `AgentSession`'s events and hands each to one of two
paths that never meet:

- **Writes** go down: `conversation_item_added` for a user message (spoken or typed)
  becomes its journal rows here (`turns.py`: bounded, redacted, split), the journal
  (`memory/journal/queue.py`) keeps them on disk, and its consumer hands each row to
  the `RowHandler` (`memory/rows.py`), which stores it. The store writes wait from the
  end of the user's speech to the reply's first audio (`WRITE_HOLD_MAX_S`).
- **Reads** happen in `llm_node` (`MemoryReader`, `reader.py`): editing the turn context
  in `on_user_turn_completed` throws away LiveKit's preemptive reply (a second LLM call),
  anything awaited there delays the reply one for one, and typed input never reaches it.
  `llm_node` sees every request, spoken or typed, and what is added to its copy of the
  context (by the door, `blocks.py`) is seen by the LLM for this request only.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable

from livekit.agents import AgentSession, llm
from livekit.agents.voice.events import (
    AgentStateChangedEvent,
    ConversationItemAddedEvent,
    UserInputTranscribedEvent,
    UserStateChangedEvent,
)

from memory.journal.queue import DurableWriteQueue
from memory.livekit import blocks as door
from memory.livekit.reader import BlockSource, MemoryReader, TurnLog
from memory.livekit.turns import INLINE_TURN_CHARS, Redacted, bounded_turn, context_text, redacted, turn_parts
from memory.ops.threads import run_text
from memory.retrieval.prefetch import Recaller
from memory.rows import RowHandler
from memory.service import MemoryService, RememberReport
from memory.types import MemoryRecord, Turn, memory_user_id, now_iso

logger = logging.getLogger(__name__)

# The store writes (the turn's embedding and insert, GATED's extraction, the archive's
# inserts) wait from the end of the user's speech until the reply's first audio frame,
# and no longer than this (seconds): on 2 cores they delayed the reply they ran beside
# (docs/latency.md). It covers the VAD's silence, the endpointing delay and a slow
# model's first token and audio; past it the writes go on anyway. The turn is in the
# journal on disk from its commit on, held or not.
WRITE_HOLD_MAX_S = 5.0

# Re-exported for the code that names the profile's block (tests, tools).
__all__ = ["MemorySession", "TurnLog", "WRITE_HOLD_MAX_S"]


class MemorySession:
    """One user's memory in one LiveKit session: the session's events, routed to the
    write path (the journal) and the read side (`reader`)."""

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
        # Completed turns go through a journal on disk, so an outage or a crash loses nothing.
        self.rows = RowHandler(service)
        if queue is None:
            queue = self.rows.open_queue()
        else:
            self.rows.queue = queue
        self.queue = queue
        budget = service.settings.recall_budget_ms / 1000 if budget_s is None else budget_s
        self.reader = MemoryReader(
            service, user_id=self.user_id, session_id=self.session_id, budget_s=budget, written=self.rows.changed
        )
        # Long turns are cut, redacted and split on a thread, one after another: the
        # turns after one wait for it, so the journal keeps the order they were said in.
        self._turn_prep: asyncio.Future[None] | None = None
        self._recent: deque[str] = deque(maxlen=2)
        self._seq = 0
        # Others that close before the journal does (the archive: what they enqueue at the
        # end is drained with the turns).
        self.close_hooks: list[Callable[[], Awaitable[None]]] = []
        # Others that keep the session's messages (the archive): each message is given to
        # them as `(item_id, role, redacted)`, cleaned and redacted once, here.
        self.message_hooks: list[Callable[[str, str, Redacted], None]] = []
        self._closing: asyncio.Future[None] | None = None

    # ------------------------------------------------------- the read side's
    @property
    def recaller(self) -> Recaller:
        return self.reader.recaller

    @property
    def profile(self) -> list[MemoryRecord] | None:
        return self.reader.profile

    @profile.setter
    def profile(self, records: list[MemoryRecord] | None) -> None:
        self.reader.profile = records

    @property
    def turns(self) -> list[TurnLog]:
        return self.reader.turns

    @property
    def block_sources(self) -> list[BlockSource]:
        """Other features' data for each request (the archive's), handed to the door."""
        return self.reader.sources

    @property
    def write_reports(self) -> list[RememberReport]:
        return self.rows.reports

    def earlier_turns(self) -> list[str]:
        return self.reader.earlier_turns()

    def start_profile(self) -> None:
        self.reader.start()

    async def wait_profile(self, timeout_s: float = 10.0) -> None:
        """For tests and tools: wait until the profile fetch has finished (bounded)."""
        await self.reader.wait_profile(timeout_s)

    async def prepare_chat_ctx(
        self, chat_ctx: llm.ChatContext, *, agent_blocks: Callable[[door.Blocks], None] | None = None
    ) -> llm.ChatContext:
        """A copy of the context with every block memory adds (`MemoryReader.prepare`)."""
        return await self.reader.prepare(chat_ctx, agent_blocks=agent_blocks)

    # --------------------------------------------------------------- wiring
    def attach(self, session: AgentSession) -> None:
        """Subscribe to the session's events and start the profile fetch (not awaited)."""
        session.on("user_input_transcribed", self._on_transcribed)
        session.on("conversation_item_added", self._on_item_added)
        session.on("user_state_changed", self._on_user_state)
        session.on("agent_state_changed", self._on_agent_state)
        self.queue.start()
        self.reader.start()

    def _on_user_state(self, ev: UserStateChangedEvent) -> None:
        """The user starts speaking: the turn's forget check goes now, long before the
        reply (a batch STT's only transcript comes after the end of speech, where the
        check's read ran beside the reply's look-up). The user stops: the store writes
        wait until the reply's first audio frame (`WRITE_HOLD_MAX_S`), and the look-up for
        the words heard so far starts (a streaming STT's; `MemoryReader.speech_ended`)."""
        if ev.new_state == "speaking":
            self.reader.check_forget_once()
        elif ev.old_state == "speaking":
            self.queue.hold(WRITE_HOLD_MAX_S)
            self.reader.speech_ended()

    def _on_agent_state(self, ev: AgentStateChangedEvent) -> None:
        """The reply's first audio frame (the agent starts speaking), or the reply ended
        without one (interrupted, nothing to say): the held writes go."""
        if ev.new_state == "speaking" or ev.old_state in ("thinking", "speaking"):
            self.queue.release()

    def _on_transcribed(self, ev: UserInputTranscribedEvent) -> None:
        self.reader.transcribed(ev.transcript, ev.is_final)

    def _on_item_added(self, ev: ConversationItemAddedEvent) -> None:
        item = ev.item
        if not isinstance(item, llm.ChatMessage):
            return
        text = (item.text_content or "").strip()
        if not text or item.role not in ("user", "assistant"):
            return
        # Cleaned and redacted once, here, and carried: to the journal row, the context of
        # later turns and the archive. A long message is redacted on the event loop only when
        # the archive needs it whole (it did so itself before); else its rows are, on a thread.
        said = redacted(text) if len(text) <= INLINE_TURN_CHARS or self.message_hooks else None
        if item.role == "user":
            self._journal(item.id, text, said)
            self.reader.committed(item.id, text)
        self._recent.append(f"{item.role}: {context_text(said or text)}")
        if said is not None:
            for hook in self.message_hooks:
                hook(item.id, item.role, said)

    # ---------------------------------------------------------------- writes
    def _journal(self, item_id: str | None, text: str, said: Redacted | None = None) -> None:
        """The user's message into the journal: its stored part, split into rows, with
        what came before it as context (on the first row only). `said`: the message already
        cleaned and redacted, used when it is stored whole."""
        stored = bounded_turn(text, self.service.settings.max_stored_turn_chars, item_id)
        whole = said is not None and stored is text
        turn = Turn(
            user_id=self.user_id,
            text=said.text if whole and said is not None else stored,
            redacted=whole,
            session_id=self.session_id,
            turn_id=item_id or uuid.uuid4().hex,
            created_at=now_iso(),
            context=tuple(self._recent),
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

    def _enqueue_parts(self, parts: list[Turn]) -> None:
        for part in parts:
            self.queue.enqueue(part)

    async def _prepare_off_loop(self, before: asyncio.Future[None] | None, turn: Turn) -> None:
        if before is not None:
            await asyncio.wait({before})
        try:
            parts = await run_text(turn_parts, turn, self.service.settings.max_turn_chars)
        except Exception as exc:  # never: the whole turn rather than none of it
            logger.error("turn %s could not be split (%r); journaled whole", turn.turn_id, exc)
            parts = [turn]
        self._enqueue_parts(parts)

    # -------------------------------------------------------------- shutdown
    async def _prepared(self, timeout_s: float) -> None:
        """Long turns still being split reach the journal before a drain or close."""
        if self._turn_prep is not None and not self._turn_prep.done():
            await asyncio.wait({self._turn_prep}, timeout=timeout_s)

    async def drain(self, timeout_s: float = 5.0) -> bool:
        """Wait (bounded) for pending writes, and for the profile read a write asked for;
        True if all were written."""
        await self._prepared(timeout_s)
        drained = await self.queue.drain(timeout_s)
        try:
            await asyncio.wait_for(self.reader.settled(), timeout_s)
        except TimeoutError:
            pass
        return drained

    async def aclose(self, *, drain_timeout_s: float = 5.0) -> None:
        """Bounded drain; what is not written stays on disk for the next start. Once: a
        second call (the session's close, then the job's shutdown) waits for the first.

        Keyword-only on purpose: LiveKit calls a shutdown callback that takes an argument
        with the shutdown reason (a string), which then was the drain's timeout."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close(drain_timeout_s))
        await asyncio.shield(self._closing)

    async def _close(self, drain_timeout_s: float) -> None:
        await self._prepared(max(drain_timeout_s, 5.0))
        for close in self.close_hooks:
            try:
                await close()
            except Exception as exc:  # noqa: BLE001 - the journal still closes
                logger.warning("memory close hook failed: %r", exc)
        drained = await self.queue.aclose(drain_timeout_s)
        await self.reader.aclose()
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
