"""The values every layer passes around: a turn, a stored memory, a write's result,
the errors that name what was wrong, and the text and id rules the store enforces.

Pure Python with no I/O: every package imports it, and it imports only the error tree.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import regex

from memory.bodies import without_body
from memory.errors import AgentMemoryError, InvalidIdentity, InvalidInput, Unavailable

MAX_TEXT_CHARS = 4000


MAX_USER_ID_BYTES = 1024


class InvalidMemoryText(InvalidInput):
    """Text that cannot be stored (empty or too long); names what was wrong."""


class ForgottenTurn(AgentMemoryError):
    """A turn said before the user asked to be forgotten: never to be stored (not bad
    input: the same turn was fine until the request)."""


def describe_error(exc: BaseException, limit: int = 300) -> str:
    """An error in one line, for a log or a message: its type and first line, never its
    repr (an encoding error's repr holds the whole text it failed on, and logs outlive
    a "forget me")."""
    text = without_body(str(exc).strip())
    return f"{type(exc).__name__}: {text.splitlines()[0]}"[:limit] if text else type(exc).__name__


class ExtractionUnavailable(Unavailable):
    """The extraction LLM could not be reached: the write queue retries the turn later."""


class StoreUnavailable(Unavailable):
    """The store could not be opened when this process started (a fleet database down):
    look-ups find nothing and writes wait in the journal for a process that has one."""


@dataclass(frozen=True)
class MemoryRecord:
    """One stored memory as the rest of the product sees it."""

    id: str
    text: str
    user_id: str
    category: str | None = None
    slot: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    score: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        """What a developer printing a recall needs: the text, the score, the kind; not the metadata."""
        text = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        kind = f", category={self.category!r}" if self.category else ""
        return f"MemoryRecord(text={text!r}, score={self.score:.2f}{kind}, id={self.id[:8]!r})"

    @classmethod
    def from_payload(cls, mem_id: str, payload: dict[str, Any], score: float = 0.0) -> MemoryRecord:
        known = {"data", "user_id", "category", "slot", "created_at", "updated_at", "hash"}
        return cls(
            id=str(mem_id),
            text=payload.get("data") or payload.get("memory") or "",
            user_id=payload.get("user_id", ""),
            category=payload.get("category"),
            slot=payload.get("slot"),
            created_at=payload.get("created_at"),
            updated_at=payload.get("updated_at"),
            score=float(score or 0.0),
            metadata={k: v for k, v in payload.items() if k not in known and k != "text_lemmatized"},
        )


@dataclass(frozen=True)
class WriteResult:
    """What a write did: ADD a row, UPDATE (supersede) one, or NOOP (already known)."""

    event: Literal["ADD", "UPDATE", "NOOP"]
    id: str | None
    text: str


def canonical_key(text: str) -> str:
    """Text folded for duplicate detection (case, width, spaces, final punctuation)."""
    folded = unicodedata.normalize("NFKC", text).casefold().strip()
    folded = " ".join(folded.split())
    return folded.rstrip(".。!！?？ ")


def clean_text(text: str) -> str:
    """Text Postgres can store: NUL characters removed (JSONB and text refuse them) and
    unpaired surrogates (a broken transcript) replaced, so that one odd character is
    never an error that a retry could not fix."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def validate_text(text: str, *, what: str = "memory text") -> str:
    """Reject empty or oversized text with an error that says which."""
    if not isinstance(text, str):
        raise InvalidMemoryText(f"{what} must be a string, got {type(text).__name__}")
    cleaned = clean_text(text).strip()
    if not cleaned:
        raise InvalidMemoryText(f"{what} is empty")
    if len(cleaned) > MAX_TEXT_CHARS:
        raise InvalidMemoryText(f"{what} is {len(cleaned)} characters; the limit is {MAX_TEXT_CHARS}")
    return cleaned


def parse_time(value: object) -> datetime | None:
    """An ISO time as an aware datetime (naive ones taken as UTC); None if it is none."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


_HASHED_ID = re.compile(r"lk-[0-9a-f]{40}")


# Controls (escape sequences, newlines, NUL), format characters (bidi overrides, zero-width
# spaces and joiners), line and paragraph separators, surrogates, private use, unassigned.
_HIDDEN = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"))
# Unicode's own list of what renders as nothing; it adds to the categories above the
# variation selectors, the grapheme joiner and the Hangul fillers ("alice\ufe0f").
_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}")

EMPTY_IDENTITY = "user id is empty: use the participant identity"


def hidden_character(text: str, *, ignorable: bool = False) -> str | None:
    """The first character of `text` that shows as nothing or as something else (a name
    that reads "alice" and is not, a log line split in two), as "U+202E at 3".

    `ignorable`: Unicode's default-ignorable characters count too (an identity); a
    display name keeps them ("Anna \u2764\ufe0f" holds a variation selector)."""
    for i, ch in enumerate(text):
        if unicodedata.category(ch) in _HIDDEN or (ignorable and _IGNORABLE.match(ch)):
            return f"U+{ord(ch):04X} at {i}"
    return None


def memory_user_id(identity: object, *, stored: bool = False) -> str:
    """The one identity rule: the id a user's memories are kept under, for every way in
    (the spoken turn, `memory.api`, MCP, the admin commands, the web page, the token
    endpoint). Each door calls it once, on what its caller gave.

    An identity is refused (`InvalidIdentity`, the same words at every door) when it is
    empty or holds a control, bidi or zero-width character: "alice\u200b" would be a
    look-alike user nobody can tell from "alice". Otherwise it is used unchanged, or, when
    the store could not keep it as it is, hashed ("lk-" and 40 hex digits): Mem0 trims ids
    and refuses those with whitespace inside while our own SQL reads the id as given, so
    "alice " would write under "alice" and read under "alice "; an id over
    `MAX_USER_ID_BYTES` cannot be indexed; and one with the form of a hash is hashed again,
    or participant "lk-<that hash>" would be shown the memories of the identity that
    hashes to it.

    `stored`: the caller gives the id as the store keeps it (an operator's `--stored-id`,
    the web page's `?id=`): it is checked, never hashed; it may name a row stored before
    this rule (one holding a hidden character) so that it can still be read and forgotten.
    """
    if not isinstance(identity, str) or not identity.strip():
        raise InvalidIdentity(EMPTY_IDENTITY)
    if stored:
        try:
            return validate_user_id(identity)
        except InvalidMemoryText as exc:
            raise InvalidIdentity(str(exc)) from None
    if where := hidden_character(identity, ignorable=True):
        raise InvalidIdentity(f"user id must not hold control, bidi or zero-width characters ({where})")
    try:
        validate_user_id(identity)
        if not any(ch.isspace() for ch in identity) and not _HASHED_ID.fullmatch(identity):
            return identity
    except InvalidMemoryText:
        pass
    return "lk-" + hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def validate_user_id(user_id: object) -> str:
    """Reject a user id that the store could never index, with an error that says why.

    Ids are LiveKit participant identities; one with a NUL or a broken surrogate, or
    longer than `MAX_USER_ID_BYTES` in UTF-8 (the user index holds at most about 2.7 kB
    a row), would otherwise fail inside Postgres on every retry of every write."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise InvalidMemoryText("user id is empty: use the participant identity")
    if any(ch.isspace() for ch in user_id):
        raise InvalidMemoryText(f"user id {user_id[:40]!r} contains whitespace, which Mem0 trims or refuses: "
                                "map the identity with memory_user_id")  # fmt: skip
    if "\x00" in user_id or any(unicodedata.category(ch) == "Cs" for ch in user_id):
        raise InvalidMemoryText(f"user id {user_id[:40]!r} contains a NUL or a broken surrogate character")
    size = len(user_id.encode("utf-8"))
    if size > MAX_USER_ID_BYTES:
        raise InvalidMemoryText(f"user id is {size} bytes in UTF-8; the limit is {MAX_USER_ID_BYTES}")
    return user_id


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class StoreBusy(Unavailable):
    """Every read slot is taken (the store is slow or hung): no memory this turn."""


@dataclass(frozen=True)
class Turn:
    """A completed user turn on its way to the store."""

    user_id: str
    text: str
    session_id: str
    turn_id: str
    created_at: str
    context: tuple[str, ...] = ()
    seq: int | None = None  # position among the session's user turns (retrieval finds neighbours by it)
    # GATED: the gatekeeper's verdict once made ({"action", "reason", "facts"}), kept in
    # the journal so that a replay after a crash writes the same facts, in the same
    # order, without asking the model again (which may word or order them otherwise).
    verdict: dict[str, Any] | None = None
    # The MEM0_SETTING the turn was said under: a replay writes it as that mode does,
    # whatever mode the worker that replays it runs in (None: a row from before).
    mode: str | None = None
    # What the journal row is: "memory" (this module writes it), or an archived message
    # ("archive": memory/archive/writer.py) whose `extra` holds its type and what it covers.
    kind: str = "memory"
    extra: dict[str, Any] | None = None
    # True when `text` and `context` were cleaned and their secrets replaced where the turn
    # came in (the session's door, `memory/livekit/turns.py`): the write path does not do
    # it again. False (a row from before, an import, any other door): the write path does.
    redacted: bool = False
