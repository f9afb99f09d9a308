"""Session working memory: the forms a frontend submits during a call.

A form arrives as JSON `{"title": str, "fields": {name: value}}` (values: string,
number, bool, or a list of those) and is kept under `hitl_<title>` as
`{"fields": ..., "timestamp": ISO time}`: the same title again replaces it, another
title is kept beside it. The whole is bounded in characters as the LLM sees it
(`MEMORY_WORKING_MAX_CHARS`): a submission that would pass the bound evicts the least
recently updated forms, and one that alone exceeds it is refused. Every refusal is a
`FormError` naming what was wrong, and leaves working memory as it was.

Lives in the session's process only (never stored): it is what the user typed on
screen for this call. In GATED a preferences-like form is also offered to the
gatekeeper (`offer_text`), which stores what is durable like any turn.

What comes in is checked in the order of its cost: the payload's size (2413) before it is
read, its nesting depth by a scan without recursion (2400) before it is parsed, then the
JSON and its schema; then every title, field name and value passes the same redaction as
a spoken turn (`redact_document`), so no secret is kept, shown, journaled or stored.
`parse_form` is meant to run off the event loop (`Workspace.submit_form` does so).
"""

from __future__ import annotations

import json
import math
import re
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory.errors import InvalidInput
from memory.language.redact import redact_document, redact_secrets
from memory.livekit.blocks import FormLine, form_line

KEY_PREFIX = "hitl_"
MAX_TITLE_CHARS = 100
MAX_FIELD_NAME_CHARS = 100
MAX_FIELDS = 50
MAX_LIST_ITEMS = 50
# The schema goes three levels deep (payload, fields, a list); deeper is refused by a scan
# before the JSON parser runs (CPython's recursed until RecursionError at ~1000 levels).
MAX_DEPTH = 8
# LiveKit's RPC (v1) refuses a request payload over 15 KiB; a form is refused when it could
# not fit the working memory even with every character escaped (`\uXXXX`: 6 to 1).
MIN_PAYLOAD_BYTES = 16 * 1024
BLOCK_TAG = "working_memory"

Scalar = str | int | float | bool
FieldValue = Scalar | list[Scalar]


class FormError(InvalidInput):
    """A submission refused; `code` is the RPC error code the frontend receives."""

    INVALID = 2400  # not JSON, no title, a title or field of the wrong type
    FORBIDDEN = 2403  # from a participant other than the session's user
    TOO_LARGE = 2413  # alone larger than the working memory's bound

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Form:
    """A validated submission."""

    title: str
    fields: dict[str, FieldValue]
    durable: bool | None = None  # the frontend says it holds facts about the user; None: judged by its title
    redacted: tuple[str, ...] = ()  # kinds of secret replaced by the mark (never the values)

    @property
    def key(self) -> str:
        return KEY_PREFIX + self.title


def _reject_constant(name: str) -> float:
    raise FormError(FormError.INVALID, f"payload is not valid JSON: {name} is not a number JSON allows")


def _check_scalar(name: str, value: object, where: str) -> Scalar:
    if isinstance(value, bool | str | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    kind = "null" if value is None else "object" if isinstance(value, dict) else type(value).__name__
    raise FormError(
        FormError.INVALID, f"field {name[:40]!r}{where} is {kind}; allowed: string, number, bool, or a list of those"
    )


def max_payload_bytes(max_chars: int) -> int:
    """The largest payload read for a working memory of `max_chars` characters."""
    return max(MIN_PAYLOAD_BYTES, 8 * max_chars)


def check_size(payload: str, max_chars: int) -> None:
    """`FormError` 2413 for a payload too large to be a form that fits, before it is read
    (a character is at most 4 bytes: exact only near the bound)."""
    limit = max_payload_bytes(max_chars)
    size = len(payload) if len(payload) * 4 <= limit or len(payload) > limit else len(payload.encode("utf-8"))
    if size > limit:
        raise FormError(
            FormError.TOO_LARGE,
            f"form too large: the payload is over {limit} bytes, more than the working memory's {max_chars} "
            "characters (MEMORY_WORKING_MAX_CHARS) could hold; nothing was read",
        )


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def nesting_depth(payload: str) -> int:
    """How deep the JSON's arrays and objects nest, strings left out: a scan, no recursion."""
    depth = deepest = 0
    for m in _BRACKET.finditer(_STRING.sub('""', payload)):
        if m.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def parse_form(payload: str, max_chars: int = 2000) -> Form:
    """The form in an RPC payload, secrets replaced, or `FormError` naming what is wrong
    with it. Blocking (a scan, a parse, redaction): run it off the event loop."""
    check_size(payload, max_chars)
    if (depth := nesting_depth(payload)) > MAX_DEPTH:
        raise FormError(
            FormError.INVALID,
            f"payload is nested {depth} levels deep; a form has at most {MAX_DEPTH} (fields hold strings, "
            "numbers, booleans or lists of those)",
        )
    try:
        data = json.loads(payload, parse_constant=_reject_constant)
    except FormError:
        raise
    except (ValueError, TypeError) as exc:
        raise FormError(FormError.INVALID, f"payload is not valid JSON ({exc})"[:200]) from None
    if not isinstance(data, dict):
        raise FormError(
            FormError.INVALID, f"payload must be a JSON object with title and fields, not {type(data).__name__}"
        )
    unknown = sorted(set(data) - {"title", "fields", "durable"})
    if unknown:
        names = ", ".join(repr(k[:40]) for k in unknown[:3])
        raise FormError(FormError.INVALID, f"unknown key(s) {names}; allowed: title, fields, durable")
    if "title" not in data:
        raise FormError(FormError.INVALID, "no title: the payload needs a non-empty string 'title'")
    title = data["title"]
    if not isinstance(title, str):
        raise FormError(FormError.INVALID, f"title must be a string, not {type(title).__name__}")
    title = title.strip()
    if not title:
        raise FormError(FormError.INVALID, "title is empty")
    if len(title) > MAX_TITLE_CHARS:
        raise FormError(FormError.INVALID, f"title is {len(title)} characters; the limit is {MAX_TITLE_CHARS}")
    if "fields" not in data:
        raise FormError(FormError.INVALID, "no fields: the payload needs an object 'fields'")
    fields = data["fields"]
    if not isinstance(fields, dict):
        raise FormError(FormError.INVALID, f"fields must be an object, not {type(fields).__name__}")
    if not fields:
        raise FormError(FormError.INVALID, "fields is empty")
    if len(fields) > MAX_FIELDS:
        raise FormError(FormError.INVALID, f"{len(fields)} fields; the limit is {MAX_FIELDS}")
    checked: dict[str, FieldValue] = {}
    for name, value in fields.items():
        if not name.strip():
            raise FormError(FormError.INVALID, "a field name is empty")
        if len(name) > MAX_FIELD_NAME_CHARS:
            raise FormError(FormError.INVALID, f"field name {name[:20]!r}... is over {MAX_FIELD_NAME_CHARS} characters")
        if isinstance(value, list):
            if len(value) > MAX_LIST_ITEMS:
                raise FormError(
                    FormError.INVALID, f"field {name[:40]!r} has {len(value)} items; the limit is {MAX_LIST_ITEMS}"
                )
            checked[name] = [_check_scalar(name, v, f" item {i}") for i, v in enumerate(value)]
        else:
            checked[name] = _check_scalar(name, value, "")
    durable = data.get("durable")
    if durable is not None and not isinstance(durable, bool):
        raise FormError(FormError.INVALID, f"durable must be true or false, not {type(durable).__name__}")
    title, kinds = redact_secrets(title)
    fields, more = redact_document(checked)
    return Form(title, fields, durable, tuple(sorted(set(kinds + more))))


def entry_line(key: str, entry: dict[str, Any]) -> FormLine:
    """One form as the door shows it (`memory/livekit/blocks.py`): title, time, fields,
    quoted by the one rule every block follows."""
    return form_line(key.removeprefix(KEY_PREFIX), entry["timestamp"], entry["fields"])


@dataclass(frozen=True)
class Submitted:
    """What a submission did."""

    key: str
    evicted: list[str]
    size: int
    limit: int


class WorkingMemory:
    """The forms of one session, bounded in characters; shared by every agent of the
    session, so it survives a hand-off. Not thread-safe: used on the session's loop."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._entries: OrderedDict[str, dict[str, Any]] = OrderedDict()  # least recently updated first
        # Each entry's line, rendered once when submitted: quoting is per character, and
        # every LLM request and every submission would otherwise redo all of them.
        self._lines: dict[str, FormLine] = {}

    @property
    def variables(self) -> dict[str, dict[str, Any]]:
        """A copy of the entries: `{"hitl_<title>": {"fields": ..., "timestamp": ...}}`."""
        return json.loads(json.dumps(self._entries))

    @property
    def size(self) -> int:
        return sum(len(f.line) for f in self._lines.values())

    def submit(self, form: Form, *, now: datetime | None = None) -> Submitted:
        """Keep `form`, evicting the least recently updated others if needed; `FormError`
        (nothing changed) when it alone is over the bound."""
        stamp = (now or datetime.now(UTC)).isoformat(timespec="seconds")
        entry = {"fields": form.fields, "timestamp": stamp}
        line = entry_line(form.key, entry)
        own = len(line.line)
        if own > self.max_chars:
            raise FormError(
                FormError.TOO_LARGE,
                f"form too large: {own} characters as shown to the model, over the working memory's "
                f"{self.max_chars} (MEMORY_WORKING_MAX_CHARS); title {form.title[:40]!r}",
            )
        others = [k for k in self._entries if k != form.key]
        used = sum(len(self._lines[k].line) for k in others)
        evicted = []
        while others and used + own > self.max_chars:
            key = others.pop(0)
            used -= len(self._lines[key].line)
            evicted.append(key)
        for key in evicted:
            del self._entries[key], self._lines[key]
        self._entries.pop(form.key, None)
        self._entries[form.key] = entry  # newest last
        self._lines[form.key] = line
        return Submitted(form.key, evicted, used + own, self.max_chars)

    def lines(self) -> list[FormLine]:
        """The forms every LLM request carries (the door's `working_memory` block), oldest first."""
        return [self._lines[k] for k in self._entries]


# Titles (and field names) that say a form holds lasting facts about the user, in
# English and Chinese: such a form is offered to GATED's gatekeeper.
_DURABLE = re.compile(
    r"prefer|setting|profile|about me|personal|favou?rite|likes|diet|allerg|hobb|"
    r"偏好|喜好|设置|設置|个人|個人|资料|資料|爱好|愛好|口味|过敏|過敏",
    re.IGNORECASE,
)


def is_durable(form: Form) -> bool:
    """Does the form state lasting facts about the user (a preferences form) rather than
    the business of this call (a trip, a booking)? The frontend's `durable` wins."""
    if form.durable is not None:
        return form.durable
    return bool(_DURABLE.search(form.title))


_CJK = re.compile(r"[\u3400-\u9fff]")


def offer_text(form: Form) -> str:
    """The form as a first-person user turn for the gatekeeper, in the form's language."""

    def value(v: FieldValue) -> str:
        return ", ".join(map(str, v)) if isinstance(v, list) else str(v)

    if _CJK.search(form.title + "".join(form.fields)):
        body = "；".join(f"{name}：{value(v)}" for name, v in form.fields.items())
        return f"我在表单「{form.title}」中填写了：{body}。"
    body = "; ".join(f"{name}: {value(v)}" for name, v in form.fields.items())
    return f'I filled in the form "{form.title}": {body}.'
