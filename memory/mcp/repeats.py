"""`remember` of the same thing twice, by a client that retried, stores it once.

An MCP client whose call timed out (or whose connection dropped before the answer) sends
the call again; both arrive and, without this, the memory is stored twice. A call is known
by what it asks: the principal (the HTTP key, or the local user over stdio), the identity
and the text, and the client's own `request_id` when it sends one (an id reused for other
words is another call). The same call within `WINDOW_S` gets the first call's answer (also
while the first is still running) and stores nothing; a call that failed or was cancelled
is not remembered, so its retry runs (also one that was waiting for it); forgetting a user
forgets their calls (the same words after a forget are stored again). A client that means
to store the same words twice on purpose sends two different `request_id`s. Per server
process, bounded (`MAX_KEYS`, oldest dropped first)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

WINDOW_S = 600.0  # a client's retries come within seconds to minutes
MAX_KEYS = 10_000


class Repeats:
    """The answers of recent calls, by call key: a repeat within the window gets the same answer."""

    def __init__(
        self, window_s: float = WINDOW_S, max_keys: int = MAX_KEYS, clock: Callable[[], float] = time.monotonic
    ):
        self.window_s, self.max_keys, self.clock = window_s, max_keys, clock
        self._calls: OrderedDict[str, tuple[float, asyncio.Future[Any], str]] = OrderedDict()

    @staticmethod
    def key(principal: str, user_id: str, text: str, request_id: str | None) -> str:
        """The call's key: what the call asks (the text as sent, ends trimmed) and the client's own id."""
        return hashlib.sha256(repr((principal, user_id, text.strip(), request_id or "")).encode()).hexdigest()

    def forget(self, user_id: str) -> None:
        """The user was forgotten: their earlier calls' results are gone, so none is repeated."""
        for key in [k for k, (_, _, user) in self._calls.items() if user == user_id]:
            del self._calls[key]

    async def once(self, key: str, call: Callable[[], Awaitable[Any]], user_id: str = "") -> tuple[Any, bool]:
        """`call`'s answer and False, or, for a repeat within the window, the first call's
        answer and True (nothing run). `user_id`: whose call it is (see `forget`)."""
        now = self.clock()
        while self._calls and now - next(iter(self._calls.values()))[0] > self.window_s:
            self._calls.popitem(last=False)
        seen = self._calls.get(key)
        if seen is not None:
            first = seen[1]
            await asyncio.wait([first])  # this call's own cancellation ends it; the first's does not
            if not first.cancelled() and first.exception() is None:
                return first.result(), True
            return await self.once(key, call, user_id)  # the first failed: this retry is a call of its own
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls[key] = (now, future, user_id)
        while len(self._calls) > self.max_keys:
            self._calls.popitem(last=False)
        try:
            answer = await call()
        except BaseException as exc:
            self._calls.pop(key, None)  # a failed call is not a result: its retry runs
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # retrieved: a failure nobody waited for is not logged as lost
            raise
        future.set_result(answer)
        return answer, False
