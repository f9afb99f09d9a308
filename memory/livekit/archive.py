"""The archive in a LiveKit session: both sides kept, long talks summarised, the
summary swapped in, and earlier conversations recalled when the user asks for them.

Everything that touches the reply is handed as data to the door
(`memory/livekit/blocks.py`), which places it in `llm_node`'s copy of the context, never
in the session's own: editing that would throw away a preemptive reply and ask the LLM
again (docs/design.md). So:

- archiving is a journal row per message (`conversation_item_added`), off the reply path;
- the summary is made by a background task with its own LLM handle, never awaited by a
  reply; until it is back, replies carry the messages themselves; once back, each
  request's copy carries the summary in place of the messages it covers (the door's list
  edit: microseconds, still one request per turn);
- "what did we talk about last time?" (`intent.asks_about_past_conversations`) starts a
  look-up from the final transcript, waited for within the recall budget; other turns
  pay one regular expression.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from livekit.agents import AgentSession, llm
from livekit.agents.voice.events import UserInputTranscribedEvent

from memory.archive.intent import asks_about_past_conversations
from memory.archive.summarizer import summarize
from memory.archive.writer import archive_turn
from memory.livekit import blocks as door
from memory.livekit.session import MemorySession
from memory.livekit.turns import Redacted
from memory.ops.threads import run_read
from memory.settings import MemoryMode
from memory.storage.archive import Match, archive_for
from memory.types import now_iso

logger = logging.getLogger(__name__)

SUMMARY_TIMEOUT_S = 20.0  # a summary the model has not written by then is tried again at the next message
END_SUMMARY_TIMEOUT_S = 8.0  # at session end, within LiveKit's shutdown time
PAST_MATCHES = 5


@dataclass
class _Message:
    item_id: str
    archive_id: str
    role: str
    text: str


@dataclass
class _Summary:
    archive_id: str
    text: str
    items: frozenset[str]  # the context items it stands for
    archive_ids: tuple[str, ...]  # the archived rows it covers (messages and older summaries)


@dataclass
class ArchiveStats:
    """What the archive did in a session (tests and logs)."""

    archived: int = 0
    summaries: int = 0
    summary_failures: int = 0
    swaps: int = 0  # requests that carried the summary in place of the messages it covers
    recalls: int = 0


class ArchiveSession:
    """The archive's side of one `MemorySession`."""

    def __init__(self, memory: MemorySession, *, summarizer: llm.LLM | None = None) -> None:
        self.memory = memory
        self.settings = memory.service.settings
        self.user_id = memory.user_id
        self.chat_id = memory.session_id
        self.summarizer = summarizer
        self.messages: list[_Message] = []
        self.summary: _Summary | None = None
        self.stats = ArchiveStats()
        self._summary_no = 0
        self._summarizing: asyncio.Task[None] | None = None
        self._past: dict[str, asyncio.Task[list[Match]]] = {}
        self._last: door.Said | None = None
        self._last_task: asyncio.Task[None] | None = None
        self._zone = ZoneInfo(self.settings.timezone)

    @property
    def archive(self):
        return archive_for(self.memory.service.store)

    def attach(self, session: AgentSession) -> None:
        self.memory.message_hooks.append(self._on_message)  # each message, redacted once by the session
        session.on("user_input_transcribed", self._on_transcribed)
        self.memory.block_sources.append(self.add_blocks)
        self.memory.close_hooks.append(self.aclose)
        if self.settings.mode is MemoryMode.GATED:
            self._last_task = asyncio.ensure_future(self._load_last_conversation())

    # ----------------------------------------------------------- archiving
    def _on_message(self, item_id: str, role: str, said: Redacted) -> None:
        """A user's or the agent's message, as the session cleaned and redacted it (as
        memory writes: no secret kept)."""
        kept = said.text
        msg = _Message(item_id, f"{self.chat_id}:{item_id}", role, kept)
        self.messages.append(msg)
        self.memory.queue.enqueue(
            archive_turn(
                message_id=msg.archive_id,
                chat_id=self.chat_id,
                user_id=self.user_id,
                text=kept,
                message_type=role,
                created_at=now_iso(),
            )  # fmt: skip
        )
        self.stats.archived += 1
        self._maybe_summarize()

    # ----------------------------------------------------------- summaries
    def _uncovered(self) -> list[_Message]:
        covered = self.summary.items if self.summary else frozenset()
        return [m for m in self.messages if m.item_id not in covered]

    def _maybe_summarize(self) -> None:
        after = self.settings.summary_after
        if not after or self.summarizer is None or (self._summarizing and not self._summarizing.done()):
            return
        uncovered = self._uncovered()
        if len(uncovered) <= after:
            return
        keep = max(after // 2, 1)  # the newest half stays word for word
        self._summarizing = asyncio.ensure_future(self._summarize(uncovered[: len(uncovered) - keep]))

    async def _summarize(self, older: list[_Message], *, end: bool = False) -> None:
        previous = self.summary
        started = time.perf_counter()
        try:
            text = await asyncio.wait_for(
                summarize(self.summarizer, [(m.role, m.text) for m in older],
                          previous=previous.text if previous else None),
                END_SUMMARY_TIMEOUT_S if end else SUMMARY_TIMEOUT_S,
            )  # fmt: skip
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the messages stay in the context; tried again later
            self.stats.summary_failures += 1
            logger.warning("conversation summary failed: %r", exc)
            return
        self._summary_no += 1
        archive_id = f"{self.chat_id}:summary:{self._summary_no:04d}"
        covers = tuple(m.archive_id for m in older) + ((previous.archive_id, *previous.archive_ids) if previous else ())
        items = frozenset(m.item_id for m in older) | (previous.items if previous else frozenset())
        self.summary = _Summary(archive_id, text, items, covers)
        self.memory.queue.enqueue(
            archive_turn(
                message_id=archive_id,
                chat_id=self.chat_id,
                user_id=self.user_id,
                text=text,
                message_type="summary",
                created_at=now_iso(),
                covers=covers,
                metadata={"session_end": end, "messages": len(items)},
            )  # fmt: skip
        )
        self.stats.summaries += 1
        logger.info(
            "conversation summarised",
            extra={"covers": len(items), "chars": len(text), "took_ms": round((time.perf_counter() - started) * 1000)},
        )
        if not end:
            self._maybe_summarize()  # messages that came while the model wrote

    # ------------------------------------------------------------- replies
    async def add_blocks(self, blocks: door.Blocks, said: str | None, items: frozenset[str]) -> None:
        """A request's data for the door: the summary in place of the messages it covers,
        earlier conversations when asked for, and (GATED) the last conversation's line."""
        summary = self.summary
        if summary is not None and summary.items & items:
            blocks.summary, blocks.summary_covers = summary.text, summary.items
            self.stats.swaps += 1
        await self._add_last_conversation(blocks)
        if said is None or not asks_about_past_conversations(said):
            return
        task = self._past.get(said.strip()) or self._start_past(said)
        try:
            matches = await asyncio.wait_for(asyncio.shield(task), self.memory.recaller.budget_s)
        except Exception as exc:  # noqa: BLE001 - late or failed: this reply goes without it
            logger.info("past conversations not found within the budget: %r", exc)
            return
        if matches:
            blocks.past = [self._said(m) for m in matches]
            self.stats.recalls += 1

    def _on_transcribed(self, ev: UserInputTranscribedEvent) -> None:
        text = ev.transcript.strip()
        if ev.is_final and text and asks_about_past_conversations(text):
            self._start_past(text)

    def _start_past(self, text: str) -> asyncio.Task[list[Match]]:
        key = text.strip()
        task = self._past.get(key)
        if task is None:
            task = self._past[key] = asyncio.ensure_future(run_read(self._find_past, key))
            while len(self._past) > 8:
                self._past.pop(next(iter(self._past)))
        return task

    def _find_past(self, text: str) -> list[Match]:
        """The latest session summaries, then the messages closest to the question, of
        this user's other conversations (this one is in the context already)."""
        archive = self.archive
        found = archive.last_summaries(self.user_id, exclude_chat_id=self.chat_id, limit=2)
        seen = {m.id for m in found}
        for m in archive.match(self.user_id, text, count=PAST_MATCHES, exclude_chat_id=self.chat_id):
            if m.id not in seen:
                found.append(m)
        return found

    def _said(self, m: Match) -> door.Said:
        day = m.created_at.astimezone(self._zone).date().isoformat()
        kind = {"summary": "summary", "user": "user", "assistant": "you"}[m.message_type]
        return door.Said(day, kind, m.content)

    async def _load_last_conversation(self) -> None:
        try:
            last = await run_read(self.archive.last_summaries, self.user_id, exclude_chat_id=self.chat_id, limit=1)
        except Exception as exc:  # noqa: BLE001 - no line, never a stuck session
            logger.warning("last conversation fetch failed: %r", exc)
            return
        if last:
            day = last[0].created_at.astimezone(self._zone).date().isoformat()
            self._last = door.Said(day, "last_conversation", last[0].content)

    async def _add_last_conversation(self, blocks: door.Blocks) -> None:
        """GATED: the profile's one line about the last conversation (waited for within
        the budget on the first reply, as the profile is)."""
        task = self._last_task
        if task is None:
            return
        if not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), self.memory.recaller.budget_s)
            except (TimeoutError, Exception):  # noqa: BLE001 - any failure here is reported, never raised
                self._last_task = None if not task.done() else task  # not again on every reply
                return
        blocks.last_conversation = self._last

    # ------------------------------------------------------------ shutdown
    async def aclose(self) -> None:
        """The session's summary (covering everything), into the journal before it closes."""
        if self._summarizing and not self._summarizing.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._summarizing), END_SUMMARY_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - the end summary covers those messages too
                pass
        for task in (self._last_task, *self._past.values()):
            if task is not None and not task.done():
                task.cancel()
        rest = self._uncovered()
        if self.summarizer is not None and any(m.role == "user" for m in self.messages) and (rest or not self.summary):
            await self._summarize(rest, end=True)
