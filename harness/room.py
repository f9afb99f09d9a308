"""A stand-in for the room's local participant, for RPC without a LiveKit server.

Registration keeps the handler as `rtc.LocalParticipant.register_rpc_method` does
(both call forms), and an invocation runs through LiveKit's own incoming chain
(`_run_incoming_chain`: interceptors, the handler, the caller's deadline), borrowed
from `rtc.LocalParticipant`; only the FFI round trip to the server is left out. As
LiveKit answers the caller, an `RpcError` from the handler reaches the caller as it
is and any other exception as APPLICATION_ERROR.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from livekit import rtc
from livekit.rtc.rpc import RpcError, RpcInvocationData


class FakeLocalParticipant:
    """Duck-types the parts of `rtc.LocalParticipant` that RPC handlers use."""

    _run_incoming_chain = rtc.LocalParticipant._run_incoming_chain
    _invoke_rpc_handler = rtc.LocalParticipant._invoke_rpc_handler

    def __init__(self, identity: str = "agent") -> None:
        self.identity = identity
        self.sid = f"PA_{identity}"
        self.kind = rtc.ParticipantKind.PARTICIPANT_KIND_AGENT
        self.attributes: dict[str, str] = {}
        self._rpc_handlers: dict[str, Any] = {}
        self._rpc_interceptors: list[Any] = []

    def register_rpc_method(self, method_name: str, handler: Any = None) -> Any:
        def register(fn: Any) -> Any:
            self._rpc_handlers[method_name] = fn
            return fn

        return register(handler) if handler is not None else register

    def unregister_rpc_method(self, method: str) -> None:
        self._rpc_handlers.pop(method, None)

    async def invoke(self, method: str, payload: str, *, caller: str, response_timeout: float = 10.0) -> str:
        """What a remote participant's `perform_rpc(destination=this, method, payload)` gets:
        the handler's response, or the `RpcError` LiveKit would send back."""
        data = RpcInvocationData(uuid.uuid4().hex, caller, payload, response_timeout, method=method)
        try:
            return await self._run_incoming_chain(data) or ""
        except RpcError:
            raise
        except Exception:  # as LocalParticipant._handle_rpc_method_invocation answers it
            raise RpcError._built_in(RpcError.ErrorCode.APPLICATION_ERROR) from None


class FakeRoom:
    """Just enough of `rtc.Room` for code that registers RPC methods."""

    def __init__(self, name: str = "fake-room", agent_identity: str = "agent") -> None:
        self.name = name
        self.local_participant = FakeLocalParticipant(agent_identity)


class _NoRemoteSessionEvents(logging.Filter):
    """LiveKit sends each session event to remote consoles over the room; an unconnected
    room refuses every one, and each refusal is a warning with a traceback, formatted on
    the event loop. In a room they are sent; here they are dropped unformatted."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "failed to send session event"


class UnconnectedRoom(rtc.Room):
    """The job's room: a real `rtc.Room` that never connects (so LiveKit's room IO
    publishes nothing), whose local participant is the stand-in. Without one, reading
    `local_participant` raises before connecting, and LiveKit's session raised it from
    `_update_agent_state("speaking")` before emitting the event: the "speaking" state,
    which the worker acts on, never came in tests."""

    def __init__(self, agent_identity: str = "agent") -> None:
        super().__init__()
        self._stand_in = FakeLocalParticipant(agent_identity)
        livekit_log = logging.getLogger("livekit.agents")
        if not any(isinstance(f, _NoRemoteSessionEvents) for f in livekit_log.filters):
            livekit_log.addFilter(_NoRemoteSessionEvents())

    @property
    def local_participant(self) -> Any:
        return self._stand_in
