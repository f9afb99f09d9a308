"""The worker's handled conditions on LiveKit's logger, said in one line each."""

from __future__ import annotations

import logging

from memory.types import describe_error


class HandledConditions(logging.Filter):
    """On LiveKit's logger in the worker's main process: conditions the worker handles,
    said in their line without a stack trace.

    - "event loop blocked" (LiveKit's loop monitor) carries a 20-frame stack of the main
      process's loop, which runs no session: the line names the place already.
    - A LiveKit server that refuses connections (a self-hosted `livekit-server --dev` not
      running): LiveKit retries 16 times over about 2.5 minutes with a warning each time
      that never names the server. The first failure is said in one line naming
      LIVEKIT_URL; the retries go on quietly, and after a registration the next
      failure is said again.
    - LiveKit unreachable after its retries: logged twice with the same traceback
      ("Error in _connection_task", then "worker failed"); said once, with the variable.
    """

    def __init__(self, livekit_url: str = "") -> None:
        super().__init__()
        self.livekit_url = livekit_url
        self.said_unreachable = False

    def registered(self) -> None:
        self.said_unreachable = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("event loop blocked") and hasattr(record, "stack"):
            del record.stack
            return True
        if message.startswith("failed to connect to livekit, retrying"):
            if self.said_unreachable:
                return False
            self.said_unreachable = True
            error = getattr(record, "error", None)
            why = describe_error(error) if isinstance(error, BaseException) else "no connection"
            record.msg, record.args = (
                f"LIVEKIT_URL={self.livekit_url!r}: the LiveKit server cannot be reached ({why}); retrying quietly "
                "for about 2.5 minutes (self-hosted: is `livekit-server --dev` running?)",
                None,
            )
            for attr in ("error", "retry_count", "max_retry"):
                record.__dict__.pop(attr, None)
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, RuntimeError) and str(exc).startswith("failed to connect to livekit"):
            if record.getMessage().startswith("Error in "):
                return False  # the same failure is logged once more by the CLI, just after
            record.msg, record.args = f"LIVEKIT_URL={self.livekit_url!r}: {exc}: is the server up?", None
            record.exc_info = record.exc_text = None
        return True
