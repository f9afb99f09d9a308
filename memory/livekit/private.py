"""Every private attribute of LiveKit that memory touches, named here and nowhere else.

`memory.attach` works on an `AgentSession` someone else made and agents someone else wrote,
so it must reach each agent as the session activates it (`start`, `update_agent`, a tool's
hand-off, an `AgentTask`). LiveKit has no public hook for that: every way an agent becomes
active goes through `AgentSession._update_activity` (the one place an `AgentActivity` is
made), so that method is wrapped on the session's instance. Everything else memory uses is
public: `AgentSession.current_agent`, the session's events (`close`, `user_input_transcribed`,
`conversation_item_added`, ...), `Agent.llm_node` and `llm.ChatContext`.

The supported LiveKit range is `SUPPORTED` (pyproject pins `livekit-agents~=1.8.9`).
tests/livekit/test_private_surface.py fails if the installed LiveKit lacks a name below, or
makes an activity anywhere else (a path that would skip memory); docs/integrate.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The livekit-agents releases this module is checked against (pyproject's `~=1.8.9`).
SUPPORTED = ">=1.8.9,<1.9"

# AgentSession's one door to an agent's activity: `_update_activity(agent, *, ...)`, awaited.
UPDATE_ACTIVITY = "_update_activity"

# Each private attribute, by the LiveKit class that has it (the test checks every one).
PRIVATE_NAMES: dict[str, tuple[str, ...]] = {"AgentSession": (UPDATE_ACTIVITY,)}


def on_activation(session: Any, before: Callable[[Any], None]) -> bool:
    """Call `before(agent)` each time `session` activates an agent, before its activity is
    made; False when `session` has no such door (a stand-in, or a LiveKit that moved it)."""
    update = getattr(session, UPDATE_ACTIVITY, None)
    if update is None:
        return False

    async def update_activity(agent: Any, *args: Any, **kwargs: Any) -> Any:
        before(agent)
        return await update(agent, *args, **kwargs)

    setattr(session, UPDATE_ACTIVITY, update_activity)
    return True
