"""The product's one exception tree.

Every error this package raises on purpose is an `AgentMemoryError`; a caller decides
whether to try again by reading `retryable` (as with livekit-agents' `APIError.retryable`),
never by comparing type names or keeping lists of types. Third-party errors are put into
the tree where they enter it (the store's: `memory/storage/faults.py`).

    AgentMemoryError
    ├── InvalidInput             bad input, named; never succeeds (also a ValueError)
    │   ├── InvalidIdentity      a user identity no door takes (the one rule: memory.types.memory_user_id)
    │   ├── InvalidMemoryText    text or an id the store cannot keep      (memory.types)
    │   │   └── RefusedByStore   the database refused the row's content   (memory.storage.faults)
    │   ├── ConfigError          a variable to fix                        (memory.settings.parse)
    │   ├── ContextError         a shared context                         (memory.storage.contexts)
    │   │   ├── ContextNotFound  no context under that id                 (memory.storage.contexts)
    │   │   └── ContextFull      a note past the context's size           (memory.storage.contexts)
    │   ├── FormError            a form the frontend sent                 (memory.working.forms)
    │   ├── BadRequest           a token request                          (memory.web.token_endpoint)
    │   ├── NotAllowed           a token request the key's limits refuse  (memory.web.token_endpoint)
    │   └── ImportRefused        an import file, line by line             (memory.admin.importer)
    ├── ForgottenTurn            said before the user asked to be forgotten (memory.types)
    ├── UnknownUser              nothing is stored under an identity      (memory.userdata)
    ├── DamagedJournal           the journal file is broken               (memory.journal.file)
    ├── LeaseLost                retryable: a fenced write whose lock ran out (memory.storage.locks)
    └── Unavailable              retryable: it may work later
        ├── StoreUnavailable     the store cannot be reached               (memory.types)
        ├── StoreBusy            every read slot or a lock is taken        (memory.types)
        ├── ExtractionUnavailable  the extraction model did not answer    (memory.types)
        ├── EmbeddedStartError   the embedded server did not start        (memory.storage.postgres)
        └── Unfinished           work over many rows stopped part way (`removed`)
            └── HistoryNotPurged Mem0's history file refused a delete     (memory.storage.store)

The classes live beside the code that raises them; this module holds the base classes
and `retryable`. `tests/package/test_drawings.py` checks this drawing against the code:
every class of the tree, under its real parent, in the module named beside it.
"""

from __future__ import annotations


class AgentMemoryError(Exception):
    """Base of every error the memory package raises on purpose."""

    retryable: bool = False
    """True when the same call may succeed later (an outage, a busy lock); False for a
    mistake to fix (bad input, bad configuration)."""


class InvalidInput(AgentMemoryError, ValueError):
    """Input that can never be accepted as it is; the message names what was wrong.
    Also a `ValueError`, as the errors it replaced were."""


class InvalidIdentity(InvalidInput):
    """A user identity that no way in accepts (empty; a control, bidi or zero-width
    character; a stored id the store could not index). Every door raises this one class
    with the same words, from the one rule (`memory.types.memory_user_id`)."""


class Unavailable(AgentMemoryError, RuntimeError):
    """Something this call needs is not there now (a database, a model, a lock): the same
    call may succeed later."""

    retryable = True


class Unfinished(Unavailable):
    """Work over many rows that stopped part way (a full disk, a locked file): `removed`
    were done; running it again finishes it."""

    def __init__(self, message: str, *, removed: int = 0) -> None:
        super().__init__(message)
        self.removed = removed


def retryable(exc: BaseException) -> bool | None:
    """What an error says about trying again: True, False, or None when it does not say
    (a foreign error no boundary put into the tree: a bug, maybe this input's). Errors of
    other libraries that carry the attribute (livekit-agents' `APIError`) are read too."""
    value = getattr(exc, "retryable", None)
    return value if isinstance(value, bool) else None
