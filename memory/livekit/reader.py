"""The read side of one session's memory: the profile, the forget watch, the look-ups,
and what each LLM request gets (handed to the door, `memory/livekit/blocks.py`).

- Look-ups start from `user_input_transcribed` (interim and final) and are waited for
  no longer than the budget (`prefetch.Recaller`).
- The profile is read once at session start, in the background, and again after a
  write changed the user's facts (`RowHandler.changed`, watched in a task of its own) or
  when it is older than `PROFILE_MAX_AGE_S` at a user turn.
- An operator's forget during the session is looked for once a turn, as the user starts
  speaking; memories from before it are not shown again.
- `prepare` builds a request's copy of the context: this turn's memories and the profile
  as data, the data of other features (`sources`: the archive; the agent's own: forms and
  contexts), then the door places them all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from livekit.agents import llm

from memory.livekit import blocks as door
from memory.livekit.turnlog import TurnLog
from memory.livekit.turns import answered_turn, query_text, same_words
from memory.ops import metrics
from memory.retrieval.prefetch import Recaller
from memory.service import MemoryService
from memory.types import MemoryRecord, parse_time

logger = logging.getLogger(__name__)

# A session's profile is read again at a user turn once it is this old (seconds).
PROFILE_MAX_AGE_S = 30.0
# An interim transcript starts a look-up when the user stops speaking (the VAD's end of
# speech, `speech_ended`), for the words heard so far, or once no newer interim has come
# for this long (seconds), for an STT whose words stop well before its speech events. A
# live STT sends one interim per word, a word every 0.3-0.5 s: a look-up at each pause
# of 0.2 s was one per word, each an embedding and two statements, a third of what
# memory added to a call's CPU, and all but the last for words the user went on from.
# The end of speech comes 0.2 s or more before the final transcript (which still starts
# its own look-up at once when its words differ), so the reply finds the look-up done.
INTERIM_SETTLE_S = 0.8

# What another feature adds to a request, as data: it fills `Blocks`, given the text of
# the user message the request answers (None: the agent speaks first) and the ids of the
# request's context items.
BlockSource = Callable[[door.Blocks, str | None, frozenset[str]], Awaitable[None]]


class MemoryReader:
    """One user's memory as the replies of one session read it."""

    def __init__(
        self,
        service: MemoryService,
        *,
        user_id: str,
        session_id: str,
        budget_s: float,
        written: asyncio.Event | None = None,
    ) -> None:
        self.service = service
        self.user_id = user_id
        self.session_id = session_id
        # Set by the write path when a write stored, changed or superseded a memory
        # (`RowHandler.changed`): the profile is read again.
        self.written = written
        self.recaller = Recaller(self._fetch, budget_s=budget_s, context=lambda: tuple(self.earlier_turns()))
        self.profile: list[MemoryRecord] | None = None
        self.zone = ZoneInfo(service.settings.timezone)  # dates as the user lives them
        self._profile_task: asyncio.Task[None] | None = None
        self._profile_loaded = asyncio.Event()  # fetched, or failed: no more reason to wait
        # A reply waited its whole budget for the profile and it did not come (a hung
        # store, a locked table): later replies do not wait for it again.
        self._profile_missed = False
        self._profile_at = time.monotonic()  # when it was last asked for
        self._refresh: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        # An operator's forget during the session (`python -m memory.forget`): looked for
        # once a turn, as the user starts speaking; memories from before it are not shown.
        self._forgotten_at: datetime | None = None
        self._forget_check: asyncio.Task[None] | None = None
        self._checked_this_turn = False
        # The user's own earlier turns, which shape each look-up (Retriever.retrieve).
        # One more than the look-up uses: after a turn is committed it is the newest
        # entry, and a look-up for that turn leaves it out (`earlier_turns`).
        self._user_turns: deque[str] = deque(maxlen=service.settings.retrieval.context_turns + 1)
        self._current_committed = False  # is the newest entry the turn being answered?
        self._turn_finals: list[str] = []  # final transcripts of the turn being spoken
        self._interim_timer: asyncio.TimerHandle | None = None
        self._interim_words: str | None = None  # the newest interim's words so far, not yet looked up
        self._committed_ids: deque[str] = deque(maxlen=16)  # user messages LiveKit added
        self._logged_ids: deque[str] = deque(maxlen=16)  # user messages a turn log is for
        self.turns: list[TurnLog] = []
        # Other features' data for each request (the conversation archive:
        # memory/livekit/archive.py), asked for after memory's own.
        self.sources: list[BlockSource] = []

    # --------------------------------------------------------------- profile
    def start(self) -> None:
        """Session start: the profile fetch (not awaited), and the watch for writes."""
        if self._profile_task is None:
            self._profile_task = asyncio.ensure_future(self._load_profile())
        if self._watch is None and self.written is not None:
            self._watch = asyncio.ensure_future(self._watch_writes(self.written))

    async def wait_profile(self, timeout_s: float = 10.0) -> None:
        """For tests and tools: wait until the profile fetch has finished (bounded)."""
        self.start()
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

    async def _watch_writes(self, written: asyncio.Event) -> None:
        """GATED stored or superseded a fact: the profile shown with every request must
        not go on saying the old value ("lives in Paris" after "I moved to Berlin")."""
        while True:
            await written.wait()
            written.clear()
            if self.profile is not None:
                self._refresh = asyncio.ensure_future(self._refresh_profile())
                await asyncio.wait({self._refresh})

    def _refresh_soon(self) -> None:
        """At a user turn, a profile older than `PROFILE_MAX_AGE_S` is read again (an
        operator's forget, another session's new fact), off the reply path."""
        stale = time.monotonic() - self._profile_at >= PROFILE_MAX_AGE_S
        if self.profile is not None and stale and (self._refresh is None or self._refresh.done()):
            self._refresh = asyncio.ensure_future(self._refresh_profile())

    async def _refresh_profile(self) -> None:
        """A failed read keeps the old profile."""
        self._profile_at = time.monotonic()
        try:
            self.profile = await self.service.profile(self.user_id)
        except Exception as exc:  # noqa: BLE001 - the next write tries again
            logger.warning("profile refresh failed: %r", exc)

    async def settled(self) -> None:
        """A profile read a write asked for is done (a drain waits for it: what was
        written is then what the next reply is shown)."""
        written = self.written
        if written is not None and written.is_set() and self.profile is not None:
            written.clear()  # taken here, before the watch had its turn
            self._refresh = asyncio.ensure_future(self._refresh_profile())
        if self._refresh is not None and not self._refresh.done():
            await asyncio.wait({self._refresh})

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

    # ---------------------------------------------------------------- forget
    def check_forget_once(self) -> None:
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

    # --------------------------------------------------------------- look-ups
    def transcribed(self, transcript: str, is_final: bool) -> None:
        """Prefetch for what the user has said so far in this turn.

        A turn the user speaks with a pause in it reaches us as several final
        transcripts, one per segment, and LiveKit commits them joined: the look-up
        must be for the words so far (earlier finals plus this one), or the reply
        would find no prefetch for its words and wait out its budget."""
        self._current_committed = False  # a new turn is being spoken
        self.check_forget_once()
        segment = transcript.strip()
        so_far = " ".join([*self._turn_finals, segment]).strip()
        if is_final and segment:
            self._turn_finals.append(segment)
        if self._interim_timer is not None:
            self._interim_timer.cancel()
            self._interim_timer = None
        self._interim_words = None
        if self.service.wants_recall(so_far):
            if is_final:
                self.recaller.prefetch(so_far, final=True)
            else:
                self._interim_words = so_far
                self._interim_timer = asyncio.get_running_loop().call_later(INTERIM_SETTLE_S, self.speech_ended)
        if is_final and len(self._turn_finals) > 1 and self.service.wants_recall(segment):
            # The earlier finals may belong to a turn LiveKit threw away (push-to-talk
            # cancel, a turn a subclass stopped): then the committed words are this
            # segment's alone, and one more look-up beats waiting out the budget.
            self.recaller.prefetch(segment, final=True)

    def speech_ended(self) -> None:
        """The user stopped speaking (or the interims stopped coming): the look-up for the
        words heard so far starts now, before the final transcript."""
        if self._interim_timer is not None:
            self._interim_timer.cancel()
            self._interim_timer = None
        words, self._interim_words = self._interim_words, None
        if words is not None:
            self.recaller.prefetch(words, final=False)

    def committed(self, item_id: str, text: str) -> None:
        """LiveKit added the user's message (spoken or typed) to the conversation."""
        self.check_forget_once()  # typed input brings no transcript: for the next turn
        self._checked_this_turn = False
        self._refresh_soon()
        query = query_text(text, self.service.settings.max_turn_chars)
        self._user_turns.append(query)
        self._current_committed = True
        self._turn_finals = []
        self._committed_ids.append(item_id)
        self._settle_log(item_id, query)

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

    # --------------------------------------------------------------- requests
    async def prepare(
        self, chat_ctx: llm.ChatContext, *, agent_blocks: Callable[[door.Blocks], None] | None = None
    ) -> llm.ChatContext:
        """A copy of the context with every block memory adds (the door places them)."""
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

        data = door.Blocks(zone=self.zone, today=datetime.now(self.zone).date())
        shown: set[str] = set()
        profile = self._after_forget(self.profile or [])
        if profile:
            # Only what fits is shown, and only what is shown is left out of recall below.
            data.profile = door.fit_memories(profile, self.service.settings.profile_max_chars)
            shown = {r.id for r in data.profile}
            log.profile_injected = bool(data.profile)
        if log.recall is not None:
            # Bounded like the profile: five long turns made a 9,000-character block on every
            # reply. A long memory is shown cut to a third of the block, so others fit too.
            candidates = [r for r in self._after_forget(log.recall.records) if r.id not in shown]
            data.recalled, data.recalled_line_max = door.fit_recalled(
                candidates, self.service.settings.recall_max_chars
            )
            log.injected = len(data.recalled)
            log.injected_ids = [r.id for r in data.recalled]
        ids = frozenset(it.id for it in items)
        for source in self.sources:
            await source(data, said if last_user is not None else None, ids)
        if agent_blocks is not None:
            agent_blocks(data)
        log.placed = door.apply(ctx, data)

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
        return ctx

    def _settle_log(self, item_id: str, committed: str) -> None:
        """The user's message is committed: a reply asked for before was the one used if
        it was for this message (LiveKit also takes a preemptive reply whose words differ
        only in case or punctuation), and was thrown away if not."""
        if not self.turns or not self.turns[-1].provisional:
            return
        log = self.turns[-1]
        if log.item_id == item_id or same_words(log.text, committed):
            log.provisional, log.text = False, committed
            self._log_turn(log)
        else:
            self._drop_provisional()

    def _drop_provisional(self) -> None:
        log = self.turns.pop()
        if log.item_id in self._logged_ids:
            self._logged_ids.remove(log.item_id)

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
    async def aclose(self) -> None:
        if self._interim_timer is not None:
            self._interim_timer.cancel()
        await self.recaller.aclose()
        for task in (self._profile_task, self._forget_check, self._refresh, self._watch):
            if task is not None and not task.done():
                task.cancel()
