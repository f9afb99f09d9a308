"""A journal row's payload: a `Turn` as UTF-8 JSON, and back with every field checked.

Shared by the journal and the spill file, so both read what the other wrote.
"""

from __future__ import annotations

import dataclasses
import json

from memory.types import Turn, parse_time


def encode_turn(turn: Turn) -> str:
    """The turn as JSON of its dataclass fields (`context` becomes a list).

    UTF-8 text, not `\\u` escapes: a Chinese character is 3 bytes, not 6, and the journal
    must not grow faster than what was said. A turn with an unpaired surrogate (a broken
    transcript) cannot be UTF-8: it alone is kept as escapes, which SQLite stores."""
    data = dataclasses.asdict(turn)
    text = json.dumps(data, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, ensure_ascii=True)
    return text


def decode_turn(payload: str) -> Turn:
    """The inverse of `encode_turn`; unknown keys (a newer writer) are ignored."""
    data = json.loads(payload)
    if not isinstance(data, dict):
        raise ValueError(f"journal payload is {type(data).__name__}, not an object")
    names = {f.name for f in dataclasses.fields(Turn)}
    kwargs = {k: v for k, v in data.items() if k in names}
    kwargs["context"] = tuple(kwargs.get("context") or ())
    # A damaged row (a bit flip, a hand edit) would fail inside the write on every
    # attempt, and the turns behind it would wait for ever: refuse it here, by name.
    for name in ("user_id", "text", "session_id", "turn_id", "created_at"):
        if not isinstance(kwargs.get(name), str):
            raise ValueError(f"journal field {name!r} is {type(kwargs.get(name)).__name__}, not text")
    if parse_time(kwargs["created_at"]) is None:
        raise ValueError(f"journal field 'created_at' is no ISO time: {kwargs['created_at'][:40]!r}")
    if not all(isinstance(c, str) for c in kwargs["context"]):
        raise ValueError("journal field 'context' holds something other than text")
    if not isinstance(kwargs.get("seq"), int | None) or not isinstance(kwargs.get("verdict"), dict | None):
        raise ValueError("journal field 'seq' or 'verdict' has the wrong type")
    return Turn(**kwargs)
