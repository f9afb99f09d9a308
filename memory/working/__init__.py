"""Session working memory (forms from the frontend) and contexts shared between agents.

`first_agent` is all the worker calls: it makes the session's `Workspace`, registers
the form RPC on the agent's participant and returns the first agent of the example
hand-off (docs/working-memory.md).
"""

from __future__ import annotations

from typing import Any

from memory.livekit.session import MemorySession
from memory.working.agents import WorkingAgent
from memory.working.handoff import Receptionist, Specialist
from memory.working.rpc import SUBMIT_FORM, register_form_rpc
from memory.working.workspace import Workspace

__all__ = ["SUBMIT_FORM", "Receptionist", "Specialist", "WorkingAgent", "Workspace", "first_agent", "register_form_rpc"]


def first_agent(room: Any, memory: MemorySession, store: Any = None, identity: str | None = None) -> WorkingAgent:
    """The session's first agent (the example receptionist, who hands the caller to a
    specialist and back), with working memory and shared contexts wired in. `memory` is
    what `memory.attach` returned; `identity` the participant identity (default: the
    memory's user). Call after `ctx.connect()`: the form RPC method goes on the room's
    local participant (no room, as in the text chat: no forms)."""
    store = memory.service.store if store is None else store
    workspace = Workspace(memory, store, identity=memory.user_id if identity is None else identity)
    if room is not None:
        register_form_rpc(room.local_participant, workspace)
    return Receptionist(workspace)
