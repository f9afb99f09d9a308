"""The worker's example of a hand-off: a receptionist that passes the caller to a
specialist and takes them back. Both have the shared-context tools (`WorkingAgent`);
the context's id goes with the caller, and the forms stay with the session.
"""

from __future__ import annotations

from livekit.agents import Agent, function_tool

from memory.working.agents import WorkingAgent
from memory.working.workspace import Workspace


class Receptionist(WorkingAgent):
    """Greets the caller, notes the case, and passes them to the specialist."""

    def __init__(self, workspace: Workspace, **kwargs: object) -> None:
        super().__init__(workspace, role="receptionist", **kwargs)

    @function_tool()
    async def transfer_to_specialist(self) -> Agent:
        """Pass the caller to the specialist, once the case is noted in a shared context."""
        return Specialist(self.workspace, context_id=self.context_id, handed_over=True, chat_ctx=self.chat_ctx)


class Specialist(WorkingAgent):
    """Works on the case from the shared context, and hands the caller back."""

    def __init__(self, workspace: Workspace, **kwargs: object) -> None:
        super().__init__(workspace, role="specialist", **kwargs)

    @function_tool()
    async def transfer_to_receptionist(self) -> Agent:
        """Hand the caller back to the receptionist when the specialist's part is done."""
        return Receptionist(self.workspace, context_id=self.context_id, handed_over=True, chat_ctx=self.chat_ctx)
