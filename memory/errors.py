"""The product's one exception tree.

Every error this package raises on purpose is an `AgentMemoryError`; a caller decides
whether to try again by reading `retryable` (as with livekit-agents' `APIError.retryable`),
never by comparing type names or keeping lists of types.
"""

from __future__ import annotations


class AgentMemoryError(Exception):
    """Base of every error the memory package raises on purpose."""

    retryable: bool = False
    """True when the same call may succeed later (an outage, a busy lock); False for a
    mistake to fix (bad input, bad configuration)."""
