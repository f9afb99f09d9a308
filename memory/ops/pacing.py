"""Pacing of wrong secrets per client address: the web page's login and bearer secret, and
the MCP server's keys, with one rule (a guesser gets a few tries a window; the right
secret is never refused, only made to wait its turn)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

# Wrong secrets from one address: this many within the window are checked at once; past
# them, one every WINDOW / ATTEMPTS seconds (the right secret too: it waits its turn).
LOGIN_ATTEMPTS = 5
LOGIN_WINDOW_S = 60.0
# Tries of one address waiting their turn at most; more are answered 429 at once.
LIMIT_QUEUE = 8


@dataclass
class _Tries:
    failures: deque[float] = field(default_factory=deque)
    next_turn: float = 0.0
    waiting: int = 0


class SecretLimiter:
    """Wrong secrets per client address, in a sliding window: up to `attempts` are checked
    at once; past them the address's tries are checked one at a time, one every
    `window_s / attempts` seconds, whatever they hold. So a guesser gets about `attempts`
    a window, and the right secret is never refused: it waits its turn, at most
    `queue` turns. Only wrong secrets count; another address is not slowed. `clock` and
    `sleep` are the time it runs on (a fake clock in the tests)."""

    def __init__(
        self,
        attempts: int = LOGIN_ATTEMPTS,
        window_s: float = LOGIN_WINDOW_S,
        *,
        queue: int = LIMIT_QUEUE,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.attempts, self.window_s, self.queue = attempts, window_s, queue
        self.clock, self.sleep = clock, sleep
        self._by_address: dict[str, _Tries] = {}

    def _tries(self, address: str) -> _Tries:
        now = self.clock()
        if len(self._by_address) > 10_000:  # many addresses: forget those with nothing recent
            for key in [k for k, t in self._by_address.items() if not t.waiting and not self._recent(t, now)]:
                del self._by_address[key]
        return self._recent(self._by_address.setdefault(address, _Tries()), now)

    def _recent(self, tries: _Tries, now: float) -> _Tries:
        while tries.failures and tries.failures[0] <= now - self.window_s:
            tries.failures.popleft()
        return tries

    async def turn(self, address: str) -> bool:
        """Wait until this address may have a secret checked; False: too many of its tries
        wait already (answer 429, check nothing). Nothing may be awaited between this and
        `failed`, so that tries checked at once cannot pass the limit together."""
        tries = self._tries(address)
        if len(tries.failures) < self.attempts:
            return True
        if tries.waiting >= self.queue:
            return False
        now = self.clock()
        start = max(now, tries.next_turn)
        tries.next_turn = start + self.window_s / self.attempts
        tries.waiting += 1
        try:
            if start > now:
                await self.sleep(start - now)
        finally:
            tries.waiting -= 1
        return True

    def failed(self, address: str) -> None:
        self._tries(address).failures.append(self.clock())
