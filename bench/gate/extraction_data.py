"""The extraction benchmark's data: items (a user turn with its context and the facts it holds)
and chains (turns that change a fact), loaded from a file or built from the evaluation files
and the handwritten cases (bench/data/extraction_handwritten.json)."""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common.evaldata import EvalDataError, eval_file, load_gate
from bench.common.paths import DATA as DATA_DIR

DEFAULT_PER_SIDE = 30


SEED = 20261126


HANDWRITTEN = DATA_DIR / "extraction_handwritten.json"


CJK = re.compile(r"[\u3400-\u9fff]")


LETTER = re.compile(r"[A-Za-z\u3400-\u9fff]")


@dataclass(frozen=True)
class GoldFact:
    text: str
    category: str | None = None


@dataclass(frozen=True)
class Item:
    id: str
    language: str
    text: str
    facts: tuple[GoldFact, ...]
    durable: bool
    context: tuple[str, ...] = ()  # previous turns as the glue passes them ("user: ...", "assistant: ...")
    instruction: bool = False
    source: str = ""


@dataclass(frozen=True)
class Chain:
    id: str
    language: str
    turns: tuple[str, ...]
    current: str
    history: tuple[str, ...]
    category: str | None = None


@dataclass(frozen=True)
class Dataset:
    name: str
    items: tuple[Item, ...]
    chains: tuple[Chain, ...]
    sources: tuple[str, ...] = ()


def _roles(context: Sequence[str]) -> tuple[str, ...]:
    """Two previous turns of a dialogue as the glue labels them: the last one is the
    other side's (the assistant's), the one before it the user's."""
    labels = ["assistant", "user"]
    return tuple(f"{labels[(len(context) - 1 - i) % 2]}: {t}" for i, t in enumerate(context))


def _fail(path: Path, where: str, problem: str) -> EvalDataError:
    return EvalDataError(f"{path}: {where}: {problem}")


def load_data(path: Path) -> Dataset:
    """Load and check an extraction file; errors name the file, the record and the key."""
    try:
        top = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalDataError(f"{path}: file not found") from None
    except (OSError, ValueError) as exc:
        raise EvalDataError(f"{path}: cannot read JSON ({exc})") from None
    if not isinstance(top, dict) or not isinstance(top.get("items", []), list):
        raise _fail(path, "top level", "expected an object with 'items' (list) and optional 'chains'")
    items: list[Item] = []
    for i, rec in enumerate(top.get("items", [])):
        where = f"items[{i}]"
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str) or not isinstance(rec.get("id"), str):
            raise _fail(path, where, "needs string 'id' and 'text'")
        facts = rec.get("facts")
        if not isinstance(facts, list) or not all(
            isinstance(f, dict) and isinstance(f.get("text"), str) for f in facts
        ):
            raise _fail(path, where, "'facts' must be a list of {'text': str, 'category': str|null}")
        language = rec.get("language") or top.get("language")
        if language not in ("en", "zh"):
            raise _fail(path, where, f"'language' must be 'en' or 'zh', got {language!r}")
        items.append(
            Item(
                id=rec["id"],
                language=language,
                text=rec["text"],
                facts=tuple(GoldFact(f["text"], f.get("category")) for f in facts),
                durable=bool(rec.get("durable", bool(facts))),
                context=tuple(rec.get("context") or ()),
                instruction=bool(rec.get("instruction", False)),
                source=str(rec.get("source", "")),
            )
        )
    chains: list[Chain] = []
    for i, rec in enumerate(top.get("chains", []) or []):
        where = f"chains[{i}]"
        ok = isinstance(rec, dict) and isinstance(rec.get("turns"), list) and len(rec["turns"]) >= 2
        if not ok or not isinstance(rec.get("current"), str) or not isinstance(rec.get("history"), list):
            raise _fail(path, where, "needs 'turns' (2 or more), 'current' (str) and 'history' (list of str)")
        language = rec.get("language") or top.get("language")
        if language not in ("en", "zh"):
            raise _fail(path, where, f"'language' must be 'en' or 'zh', got {language!r}")
        chains.append(
            Chain(
                str(rec.get("id", i)),
                language,
                tuple(rec["turns"]),
                rec["current"],
                tuple(rec["history"]),
                rec.get("category"),
            )
        )
    return Dataset(str(top.get("name", path.stem)), tuple(items), tuple(chains), (str(top.get("source", "")),))


def build_default(per_side: int = DEFAULT_PER_SIDE, seed: int = SEED) -> Dataset:
    """Public turns with gold facts from the eval directory, plus the hand-written set."""
    rng = random.Random(seed)
    items: list[Item] = []
    sources: list[str] = []
    for name, lang in (("msc_gate.realistic.dev.json", "en"), ("zh_gate.smoke.dev.json", "zh")):
        gate = load_gate(eval_file(name))
        sources.append(f"{gate.name}: {gate.meta.get('source', '')}")
        user_side = [it for it in gate.items if it.extra.get("role", "user") == "user"]
        durable = [it for it in user_side if it.durable and it.fact]
        other = [it for it in user_side if not it.durable]
        for it in rng.sample(durable, min(per_side, len(durable))) + rng.sample(other, min(per_side, len(other))):
            items.append(
                Item(
                    id=it.id,
                    language=lang,
                    text=it.text,
                    facts=(GoldFact(it.fact),) if it.durable and it.fact else (),
                    durable=it.durable,
                    context=_roles(it.context),
                    source=gate.name,
                )
            )
    hand = load_data(HANDWRITTEN)
    items += [dataclasses.replace(it, source="handwritten") for it in hand.items]
    sources.append(hand.sources[0])
    return Dataset("extraction.default", tuple(items), hand.chains, tuple(sources))


def dump_data(ds: Dataset, path: Path) -> None:
    path.write_text(
        json.dumps(
            {
                "name": ds.name,
                "source": " | ".join(ds.sources),
                "items": [
                    {
                        "id": it.id,
                        "language": it.language,
                        "text": it.text,
                        "context": list(it.context),
                        "durable": it.durable,
                        "instruction": it.instruction,
                        "source": it.source,
                        "facts": [dataclasses.asdict(f) for f in it.facts],
                    }
                    for it in ds.items
                ],
                "chains": [dataclasses.asdict(c) for c in ds.chains],
            },
            ensure_ascii=False,
            indent=1,
        ),
        encoding="utf-8",
    )
