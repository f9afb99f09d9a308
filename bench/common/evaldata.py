"""Typed loaders for the evaluation files (bench/data/eval/README.md), and where they are.

The files whose licence lets us redistribute them are in the repository
(`bench/data/eval/`); the others are looked for in `$EVAL_DIR` and in the team's
`../shared/eval`, and a benchmark that needs one that is missing says in one line where
it comes from and where to put it (`eval_file`).

Two formats exist: *gatekeeper* files (``items`` of turns labelled ``durable``) and
*retrieval* files (``stores`` of memories plus ``queries`` with ``relevant`` ids).
Benchmarks should never index raw JSON: a typo in a key or a half-converted file
would silently turn into a zero score. These loaders check every required key and
type up front and raise :class:`EvalDataError` naming the file, the record and the
problem, so that a broken file fails loudly before any number is printed.

Unknown keys are kept (``extra`` / ``meta``) so that new optional fields do not
require a loader change.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.paths import DATA as DATA_DIR
from bench.common.paths import ROOT as REPO_ROOT

__all__ = [
    "EvalDataError",
    "GateItem",
    "GateFile",
    "Memory",
    "Store",
    "Query",
    "RetrievalFile",
    "MissingEvalFile",
    "default_eval_dir",
    "eval_file",
    "known_files",
    "load_gate",
    "load_retrieval",
    "file_kind",
]


class EvalDataError(ValueError):
    """An evaluation file is missing, is not JSON, or does not match its format."""


class MissingEvalFile(EvalDataError):
    """A benchmark's default file is in none of the places looked in."""


# --------------------------------------------------------------------------- types


@dataclass(frozen=True)
class GateItem:
    """One user turn and whether it should produce a long-term memory."""

    id: str
    text: str
    durable: bool
    fact: str | None = None
    context: tuple[str, ...] = ()  # up to two previous turns, oldest first
    extra: Mapping[str, Any] = field(default_factory=dict)  # e.g. role, source


@dataclass(frozen=True)
class GateFile:
    name: str
    language: str
    path: Path
    items: tuple[GateItem, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def positives(self) -> int:
        return sum(1 for it in self.items if it.durable)

    @property
    def negatives(self) -> int:
        return len(self.items) - self.positives


@dataclass(frozen=True)
class Memory:
    id: str
    text: str
    speaker: str | None = None
    timestamp: str | None = None
    session: int | str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Store:
    """The memories of one user; a query may only be answered from its own store."""

    store_id: str
    memories: tuple[Memory, ...]


@dataclass(frozen=True)
class Query:
    id: str
    store_id: str
    query: str
    relevant: tuple[str, ...]
    category: str
    answer: str | None = None
    subcategory: str | None = None
    timestamp: str | None = None
    context: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RetrievalFile:
    name: str
    language: str
    path: Path
    stores: tuple[Store, ...]
    queries: tuple[Query, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)

    def store(self, store_id: str) -> Store:
        for s in self.stores:
            if s.store_id == store_id:
                return s
        raise KeyError(store_id)

    @property
    def memories(self) -> dict[str, tuple[Memory, ...]]:
        """Memories per store id."""
        return {s.store_id: s.memories for s in self.stores}


# ------------------------------------------------------------------------- helpers


REPO_EVAL_DIR = DATA_DIR / "eval"
TEAM_EVAL_DIR = REPO_ROOT.parent / "shared" / "eval"

# The files that are not in the repository: why, and their public source.
NOT_REDISTRIBUTED: dict[str, tuple[str, str]] = {
    "locomo.dev.json": ("LoCoMo, CC BY-NC 4.0", "https://github.com/snap-research/LoCoMo data/locomo10.json @ 3eb6f2c"),
    "memdaily.dev.json": ("MemDaily, no licence stated", "https://github.com/nuster1128/MemSim @ db9d5d5"),
    "msc_gate.balanced.dev.json": ("MSC persona summaries, ParlAI's data terms", "https://parl.ai/projects/msc/"),
    "msc_gate.realistic.dev.json": ("MSC persona summaries, ParlAI's data terms", "https://parl.ai/projects/msc/"),
    "zh_gate.smoke.dev.json": (
        "MemDaily (no licence stated) and MemoryBank",
        "https://github.com/nuster1128/MemSim @ db9d5d5 and https://github.com/zhongwanjun/MemoryBank-SiliconFriend",
    ),
}


def default_eval_dir() -> Path:
    """``$EVAL_DIR`` if set, else ``<repo>/../shared/eval`` (the team's layout)."""
    env = os.environ.get("EVAL_DIR")
    if env:
        return Path(env)
    return TEAM_EVAL_DIR


def eval_dirs() -> list[Path]:
    """Where evaluation files are looked for, in order: ``$EVAL_DIR``, the repository's
    ``bench/data/eval``, the team's ``../shared/eval``."""
    env = os.environ.get("EVAL_DIR")
    return [*([Path(env)] if env else []), REPO_EVAL_DIR, TEAM_EVAL_DIR]


def known_files() -> list[str]:
    """Every evaluation file a benchmark may use: those in the repository and the others."""
    return sorted({p.name for p in REPO_EVAL_DIR.glob("*.json")} | set(NOT_REDISTRIBUTED))


def eval_file(name: str) -> Path:
    """The evaluation file `name` from the first place that has it; `MissingEvalFile`
    saying in one line where it comes from and where to put it when none has."""
    for directory in eval_dirs():
        if (directory / name).is_file():
            return directory / name
    why, source = NOT_REDISTRIBUTED.get(name, ("not a file this repository knows", "bench/data/eval/README.md"))
    raise MissingEvalFile(
        f"{name} is not in the repository ({why}): get it from {source}, convert it as bench/data/eval/README.md "
        f"says and put it in {REPO_EVAL_DIR.relative_to(REPO_EVAL_DIR.parents[2])}/ (or set EVAL_DIR)"
    )


class _Checker:
    """Builds error messages of the form '<file>: <where>: <problem>'."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> EvalDataError:
        loc = f"{where}: " if where else ""
        return EvalDataError(f"{self.path}: {loc}{problem}")

    def obj(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(where, f"expected an object, got {type(value).__name__}")
        return value

    def req(self, rec: Mapping[str, Any], key: str, typ: type | tuple[type, ...], where: str) -> Any:
        if key not in rec:
            raise self.fail(where, f"missing required key {key!r}")
        return self.typed(rec[key], key, typ, where)

    def opt(self, rec: Mapping[str, Any], key: str, typ: type | tuple[type, ...], where: str) -> Any:
        value = rec.get(key)
        return None if value is None else self.typed(value, key, typ, where)

    def typed(self, value: Any, key: str, typ: type | tuple[type, ...], where: str) -> Any:
        # bool is an int subclass: never accept it where a number/str is expected, and
        # never accept 0/1 where a bool is expected.
        ok = isinstance(value, typ) and not (isinstance(value, bool) and bool not in _as_tuple(typ))
        if not ok:
            names = "/".join(t.__name__ for t in _as_tuple(typ))
            raise self.fail(where, f"key {key!r} must be {names}, got {type(value).__name__}")
        return value

    def str_list(self, rec: Mapping[str, Any], key: str, where: str, *, required: bool) -> tuple[str, ...]:
        value = self.req(rec, key, list, where) if required else self.opt(rec, key, list, where)
        if value is None:
            return ()
        for i, v in enumerate(value):
            if not isinstance(v, str):
                raise self.fail(where, f"{key}[{i}] must be str, got {type(v).__name__}")
        return tuple(value)


def _as_tuple(typ: type | tuple[type, ...]) -> tuple[type, ...]:
    return typ if isinstance(typ, tuple) else (typ,)


def _read_json(path: Path) -> tuple[_Checker, Mapping[str, Any]]:
    chk = _Checker(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise chk.fail("", "file not found") from None
    except OSError as exc:
        raise chk.fail("", f"cannot read file ({exc})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise chk.fail("", f"not valid JSON ({exc})") from None
    return chk, chk.obj(data, "top level")


def _where(kind: str, index: int, rec: Mapping[str, Any]) -> str:
    rid = rec.get("id") if isinstance(rec, Mapping) else None
    return f"{kind}[{index}]" + (f" (id {rid!r})" if isinstance(rid, str) else "")


def file_kind(path: str | Path) -> str:
    """'gate' or 'retrieval', from the top-level keys (raises if neither)."""
    chk, top = _read_json(Path(path))
    if "items" in top:
        return "gate"
    if "stores" in top or "queries" in top:
        return "retrieval"
    raise chk.fail("top level", "neither a gatekeeper file ('items') nor a retrieval file ('stores'/'queries')")


# -------------------------------------------------------------------------- gate


_GATE_ITEM_KEYS = {"id", "text", "durable", "fact", "context"}


def load_gate(path: str | Path) -> GateFile:
    """Load and validate a gatekeeper file.

    Required per item: ``id`` (str), ``text`` (str), ``durable`` (bool). ``fact`` (str
    or null) and ``context`` (list of str) are optional here because hand-made files
    and live logs often lack them; everything else lands in ``extra``.
    """
    p = Path(path)
    chk, top = _read_json(p)
    name = chk.opt(top, "name", str, "top level") or p.stem
    language = chk.opt(top, "language", str, "top level") or "unknown"
    raw_items = chk.req(top, "items", list, "top level")
    items: list[GateItem] = []
    seen: set[str] = set()
    for i, rec in enumerate(raw_items):
        where = _where("items", i, rec)
        rec = chk.obj(rec, where)
        item_id = chk.req(rec, "id", str, where)
        if item_id in seen:
            raise chk.fail(where, f"duplicate item id {item_id!r}")
        seen.add(item_id)
        items.append(
            GateItem(
                id=item_id,
                text=chk.req(rec, "text", str, where),
                durable=chk.req(rec, "durable", bool, where),
                fact=chk.opt(rec, "fact", str, where),
                context=chk.str_list(rec, "context", where, required=False),
                extra={k: v for k, v in rec.items() if k not in _GATE_ITEM_KEYS},
            )
        )
    meta = {k: v for k, v in top.items() if k not in {"name", "language", "items"}}
    return GateFile(name=name, language=language, path=p, items=tuple(items), meta=meta)


# --------------------------------------------------------------------- retrieval


_MEMORY_KEYS = {"id", "text", "speaker", "timestamp", "session"}
_QUERY_KEYS = {"id", "store_id", "query", "relevant", "category", "answer", "subcategory", "timestamp", "context"}


def load_retrieval(path: str | Path) -> RetrievalFile:
    """Load and validate a retrieval file.

    Checks what the scoring relies on: every query names an existing store, its
    ``relevant`` list is non-empty and every id in it exists in that store (a query
    may only be answered from its own store), and ids are unique.
    """
    p = Path(path)
    chk, top = _read_json(p)
    name = chk.opt(top, "name", str, "top level") or p.stem
    language = chk.opt(top, "language", str, "top level") or "unknown"

    stores: list[Store] = []
    ids_by_store: dict[str, set[str]] = {}
    for si, srec in enumerate(chk.req(top, "stores", list, "top level")):
        swhere = f"stores[{si}]"
        srec = chk.obj(srec, swhere)
        store_id = chk.req(srec, "store_id", str, swhere)
        swhere = f"stores[{si}] (store_id {store_id!r})"
        if store_id in ids_by_store:
            raise chk.fail(swhere, f"duplicate store_id {store_id!r}")
        mems: list[Memory] = []
        mem_ids: set[str] = set()
        for mi, mrec in enumerate(chk.req(srec, "memories", list, swhere)):
            mwhere = f"{swhere}.{_where('memories', mi, mrec)}"
            mrec = chk.obj(mrec, mwhere)
            mid = chk.req(mrec, "id", str, mwhere)
            if mid in mem_ids:
                raise chk.fail(mwhere, f"duplicate memory id {mid!r}")
            mem_ids.add(mid)
            mems.append(
                Memory(
                    id=mid,
                    text=chk.req(mrec, "text", str, mwhere),
                    speaker=chk.opt(mrec, "speaker", str, mwhere),
                    timestamp=chk.opt(mrec, "timestamp", str, mwhere),
                    session=chk.opt(mrec, "session", (int, str), mwhere),
                    extra={k: v for k, v in mrec.items() if k not in _MEMORY_KEYS},
                )
            )
        ids_by_store[store_id] = mem_ids
        stores.append(Store(store_id=store_id, memories=tuple(mems)))

    queries: list[Query] = []
    seen_q: set[str] = set()
    for qi, qrec in enumerate(chk.req(top, "queries", list, "top level")):
        where = _where("queries", qi, qrec)
        qrec = chk.obj(qrec, where)
        qid = chk.req(qrec, "id", str, where)
        if qid in seen_q:
            raise chk.fail(where, f"duplicate query id {qid!r}")
        seen_q.add(qid)
        store_id = chk.req(qrec, "store_id", str, where)
        if store_id not in ids_by_store:
            raise chk.fail(where, f"store_id {store_id!r} names no store in the file")
        relevant = chk.str_list(qrec, "relevant", where, required=True)
        if not relevant:
            raise chk.fail(where, "'relevant' is empty")
        missing = [r for r in relevant if r not in ids_by_store[store_id]]
        if missing:
            raise chk.fail(where, f"relevant ids not in store {store_id!r}: {missing[:5]}")
        queries.append(
            Query(
                id=qid,
                store_id=store_id,
                query=chk.req(qrec, "query", str, where),
                relevant=relevant,
                category=chk.req(qrec, "category", str, where),
                answer=chk.opt(qrec, "answer", str, where),
                subcategory=chk.opt(qrec, "subcategory", str, where),
                timestamp=chk.opt(qrec, "timestamp", str, where),
                context=chk.str_list(qrec, "context", where, required=False),
                extra={k: v for k, v in qrec.items() if k not in _QUERY_KEYS},
            )
        )
    meta = {k: v for k, v in top.items() if k not in {"name", "language", "stores", "queries"}}
    return RetrievalFile(name=name, language=language, path=p, stores=tuple(stores), queries=tuple(queries), meta=meta)
