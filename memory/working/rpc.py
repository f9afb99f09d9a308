"""The RPC method a frontend calls to put a form into the session's working memory.

`memory.submit_form`, on the agent's participant, with the payload
`{"title": str, "fields": {name: str | number | bool | list of those}}`. It answers
`{"key": "hitl_<title>", "evicted": [...], "size": n, "limit": m, "redacted": [kinds]}`
(the kinds of secret left out, never the values), or an `RpcError`
whose message names what was wrong (code 2400 bad payload, 2403 not the session's
user, 2413 too large; at most 256 bytes, the whole text in its `data` as
`{"error": ...}`); a refusal changes nothing. The handler does no I/O; the payload is
read on a thread, so a large one never holds up a reply in progress.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from livekit import rtc

from memory.working.forms import FormError
from memory.working.workspace import Workspace

SUBMIT_FORM = "memory.submit_form"
MAX_MESSAGE_BYTES = 256  # RpcError.message, as LiveKit's client SDKs bound it


def fit_bytes(text: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """`text` cut to `limit` bytes of UTF-8, never inside a character."""
    raw = text.encode("utf-8")
    return text if len(raw) <= limit else raw[: limit - 3].decode("utf-8", "ignore") + "..."


class LocalParticipantLike(Protocol):
    def register_rpc_method(self, method_name: str, handler: Any = None) -> Any: ...


def register_form_rpc(participant: LocalParticipantLike, workspace: Workspace) -> None:
    """Register `memory.submit_form` on the agent's participant for this session."""

    async def submit_form(data: rtc.RpcInvocationData) -> str:
        try:
            form, done = await workspace.submit_form(data.payload, caller=data.caller_identity)
        except FormError as exc:
            # LiveKit's clients cut an error message to 256 bytes: the message says what was
            # wrong in its first words, and `data` carries it whole.
            raise rtc.RpcError(
                exc.code, fit_bytes(str(exc)), json.dumps({"error": str(exc)}, ensure_ascii=False)
            ) from None
        return json.dumps(
            {"key": done.key, "evicted": done.evicted, "size": done.size, "limit": done.limit,
             "redacted": list(form.redacted)},
            ensure_ascii=False,
        )  # fmt: skip

    participant.register_rpc_method(SUBMIT_FORM, submit_form)
