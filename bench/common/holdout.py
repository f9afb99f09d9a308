"""A held-out third of the development files, fixed before any rule was tuned.

Issue 32 asks for a figure on data nobody looked at while writing rules or choosing
switches. This module draws, with a fixed seed, a third of the *conversations* of the
MSC gatekeeper files (grouped by dialogue number across sessions, so a persona never
sits on both sides) and a third of the *stores* of the retrieval files that are tuned
on (LoCoMo, MemDaily). MADial has one store per file and is only checked, never tuned.

The split lives in ``bench/data/holdout.json`` (committed); ``python -m bench.common.holdout``
re-derives it and fails if the file differs, so the split cannot drift silently.
``--part dev`` / ``--part holdout`` on ``bench.retrieval.run`` and ``bench.gate.run`` select
a side; the default is the whole file, as before.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import sys
from pathlib import Path

from bench.common.evaldata import GateFile, RetrievalFile, default_eval_dir
from bench.common.paths import DATA as DATA_DIR

SEED = 32
SPLIT_PATH = DATA_DIR / "holdout.json"
_MSC_ID = re.compile(r"^msc-(?P<split>\w+)-s(?P<session>\d+)-d(?P<dialog>\d+)-t(?P<turn>\d+)$")
_GATE_FILES = ("msc_gate.realistic.dev", "msc_gate.balanced.dev")
_RETRIEVAL_FILES = ("locomo.dev", "memdaily.dev")
PARTS = ("all", "dev", "holdout")


def msc_conversation(item_id: str) -> str:
    """The conversation an MSC gate item belongs to: ``<split>-d<dialog>``, any session."""
    m = _MSC_ID.match(item_id)
    if not m:
        raise ValueError(f"not an MSC gate item id: {item_id!r}")
    return f"{m['split']}-d{m['dialog']}"


def _third(keys: list[str], salt: str) -> list[str]:
    keys = sorted(set(keys))
    k = round(len(keys) / 3)
    return sorted(random.Random(f"{SEED}:{salt}").sample(keys, k))


def derive(eval_dir: Path | None = None) -> dict:
    """Recompute the split from the files' ids alone (no labels, no text)."""
    eval_dir = eval_dir or default_eval_dir()
    conversations: list[str] = []
    for name in _GATE_FILES:
        data = json.loads((eval_dir / f"{name}.json").read_text(encoding="utf-8"))
        conversations += [msc_conversation(it["id"]) for it in data["items"]]
    stores: dict[str, list[str]] = {}
    for name in _RETRIEVAL_FILES:
        data = json.loads((eval_dir / f"{name}.json").read_text(encoding="utf-8"))
        stores[name] = _third([s["store_id"] for s in data["stores"]], name)
    return {
        "seed": SEED,
        "note": "held out before any rule or switch was tuned (issue 32); open once at the end",
        "msc_conversations": _third(conversations, "msc"),
        "retrieval_stores": stores,
    }


def load() -> dict:
    return json.loads(SPLIT_PATH.read_text(encoding="utf-8"))


def gate_side(item_id: str, split: dict | None = None) -> str:
    """``dev`` or ``holdout`` for an MSC item; non-MSC items (zh smoke) are ``dev``."""
    if not _MSC_ID.match(item_id):
        return "dev"
    split = split or load()
    return "holdout" if msc_conversation(item_id) in set(split["msc_conversations"]) else "dev"


def store_side(file_name: str, store_id: str, split: dict | None = None) -> str:
    """``dev`` or ``holdout`` for a store of a retrieval file (files without a split: dev)."""
    split = split or load()
    held = split["retrieval_stores"].get(file_name, [])
    return "holdout" if store_id in held else "dev"


def select_retrieval(data: RetrievalFile, part: str, split: dict | None = None) -> RetrievalFile:
    """The file with only the stores (and their queries) of `part` (``all``: unchanged)."""
    if part == "all":
        return data
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    split = split or load()
    name = data.name
    keep = {s.store_id for s in data.stores if store_side(name, s.store_id, split) == part}
    return dataclasses.replace(
        data,
        stores=tuple(s for s in data.stores if s.store_id in keep),
        queries=tuple(q for q in data.queries if q.store_id in keep),
    )


def select_gate(gate: GateFile, part: str, split: dict | None = None) -> GateFile:
    """The file with only the items of `part` (MSC by conversation; others are all ``dev``)."""
    if part == "all":
        return gate
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    split = split or load()
    return dataclasses.replace(gate, items=tuple(it for it in gate.items if gate_side(it.id, split) == part))


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    fresh = derive()
    if "--write" in args:
        SPLIT_PATH.write_text(json.dumps(fresh, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {SPLIT_PATH}")
        return 0
    if fresh != load():
        print(f"{SPLIT_PATH} differs from the split derived with seed {SEED}", file=sys.stderr)
        return 1
    print(
        f"split ok: {len(fresh['msc_conversations'])} MSC conversations held out; "
        + ", ".join(f"{k}: {v}" for k, v in fresh["retrieval_stores"].items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
