"""One session's working state beside long-term memory: its forms (working memory) and
its way to the contexts shared between agents. Shared by every agent of the session,
so both survive a hand-off; nothing here is on a reply's path but the block it renders.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from memory.livekit.blocks import Blocks
from memory.livekit.session import MemorySession
from memory.ops.threads import CONTEXT_POOL, run_text
from memory.settings import MemoryMode
from memory.storage.contexts import Appended, ContextError, ContextStore, SharedContext
from memory.storage.store import MemoryStore, UnavailableStore
from memory.types import Turn, clean_text, now_iso
from memory.working.forms import (
    Form,
    FormError,
    Submitted,
    WorkingMemory,
    check_size,
    is_durable,
    offer_text,
    parse_form,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A context read or write that takes longer than this is a tool error, not a stuck reply.
CONTEXT_TIMEOUT_S = 3.0
# On threads of their own (memory/ops/threads.py): a stalled database ties up these,
# never the look-ups' read slots or the event loop.


class Workspace:
    """Forms and shared contexts of one session, for one user."""

    def __init__(self, memory: MemorySession, store: MemoryStore | UnavailableStore, *, identity: str) -> None:
        self.memory = memory
        self.store = store
        self.identity = identity  # the participant identity: only it may submit forms
        self.settings = memory.service.settings
        self.forms = WorkingMemory(self.settings.working_max_chars)
        self.offered: deque[Turn] = deque(maxlen=32)  # the last forms offered to the gatekeeper (GATED), for tests

    @property
    def user_id(self) -> str:
        """The id the user's data is kept under (as the memories are)."""
        return self.memory.user_id

    # ------------------------------------------------------------------ forms
    async def submit_form(self, payload: str, *, caller: str) -> tuple[Form, Submitted]:
        """A form from the frontend; `FormError` (nothing changed) when refused. The caller
        and the payload's size are checked at once; the payload is read, checked and
        redacted on a thread (a 15 KiB form is milliseconds of work), then kept."""
        if caller != self.identity:
            raise FormError(
                FormError.FORBIDDEN, f"not this session's user: participant {caller[:40]!r} may not submit forms here"
            )
        check_size(payload, self.settings.working_max_chars)
        form = await run_text(parse_form, payload, self.settings.working_max_chars)
        return form, self.keep_form(form)

    def keep_form(self, form: Form) -> Submitted:
        """Keep a parsed form in working memory (on the session's loop), and in GATED offer
        a preferences-like one to the gatekeeper; `FormError` when it alone is too large."""
        if form.redacted:
            logger.info("left secrets out of form %r: %s", form.key[:60], ", ".join(form.redacted))
        done = self.forms.submit(form)
        if done.evicted:
            logger.info("working memory full: evicted %s", ", ".join(done.evicted))
        if self.settings.mode is MemoryMode.GATED and is_durable(form):
            self._offer(form)
        return done

    def _offer(self, form: Form) -> None:
        """GATED: a preferences-like form goes to the gatekeeper like a user turn (through
        the journal, off the reply path); it stores only what is durable. NORMAL stores
        no form: its memories are what the user said, and a form is in working memory."""
        turn = Turn(
            user_id=self.user_id,
            text=clean_text(offer_text(form)),
            session_id=self.memory.session_id,
            turn_id=f"form-{uuid.uuid4().hex}",
            created_at=now_iso(),
        )
        self.memory.queue.enqueue(turn)
        self.offered.append(turn)

    # ------------------------------------------------------------------ blocks
    def add_blocks(self, blocks: Blocks, context_id: str | None) -> None:
        """Every request carries the forms and the shared context's id, spoken or typed,
        a greeting or a tool's follow-up: handed to the door as data."""
        blocks.context_id = context_id
        blocks.forms = self.forms.lines()

    # --------------------------------------------------------------- contexts
    def _contexts(self) -> ContextStore:
        return ContextStore(self.store.pool, self.settings.collection, self.settings.context_max_chars)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        def call() -> T:
            return fn(self._contexts(), *args)

        try:
            return await asyncio.wait_for(asyncio.wrap_future(CONTEXT_POOL.submit(call)), CONTEXT_TIMEOUT_S)
        except ContextError:
            raise
        except TimeoutError:
            raise ContextError("the shared context store did not answer in time; try again in a moment") from None
        except Exception as exc:  # noqa: BLE001 - a database down is a tool error, never a failed session
            logger.warning("shared context store failed: %r", exc)
            raise ContextError("the shared context store is unavailable right now; go on without it") from None

    async def create_context(self, agent: str, note: str | None = None) -> str:
        return await self._run(ContextStore.create, self.user_id, agent, note)

    async def fetch_context(self, context_id: str) -> SharedContext:
        return await self._run(ContextStore.fetch, self.user_id, context_id)

    async def update_context(self, context_id: str, agent: str, note: str) -> Appended:
        return await self._run(ContextStore.append, self.user_id, context_id, agent, note)
