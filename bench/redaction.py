"""Redaction measured: what it catches and what it wrongly changes.

    uv run python -m bench.redaction [--data FILE ...] [--show N]

- Probes (`bench/hostile_probes.py`): secret sentences in English and Chinese, as callers
  say them; caught = the secret's value no longer in the text. Plain sentences with
  numbers and keywords that must stay as they were.
- False positives: every text of the evaluation files (retrieval memories and queries,
  gatekeeper turns and facts; bench/data/eval/README.md): none of them holds a
  secret, so each text the redaction changes is one ordinary memory damaged. Per file
  and per rule, with the texts changed (`--show`).

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from bench.evaldata import MissingEvalFile, eval_file, file_kind, known_files, load_gate, load_retrieval
from bench.hostile_probes import PLAIN, PLAIN_SAID, SECRETS, SECRETS_HELD_OUT, SECRETS_ISSUE30, SECRETS_SAID
from memory.language.redact import redact_secrets
from memory.language.secret_rules import RULES


def texts_of(path: Path) -> list[str]:
    """Every text a user said or a memory holds in an eval file."""
    if file_kind(path) == "gate":
        gate = load_gate(path)
        return [t for it in gate.items for t in (it.text, it.fact, *it.context) if t]
    ret = load_retrieval(path)
    return [m.text for s in ret.stores for m in s.memories] + [q.query for q in ret.queries]


def probes() -> dict[str, object]:
    out: dict[str, object] = {}
    for name, items in (("issue30", SECRETS_ISSUE30), ("earlier", SECRETS), ("said", SECRETS_SAID),
                        ("held_out", SECRETS_HELD_OUT)):  # fmt: skip
        missed = [text for text, secret in items if secret in redact_secrets(text)[0]]
        out[f"probes_{name}"] = len(items)
        out[f"probes_{name}_missed"] = len(missed)
        out[f"probes_{name}_missed_list"] = missed
    plain = [t for t in PLAIN + PLAIN_SAID if redact_secrets(t)[0] != t]
    out["plain"] = len(PLAIN) + len(PLAIN_SAID)
    out["plain_changed"] = len(plain)
    out["plain_changed_list"] = plain
    return out


def false_positives(paths: list[Path], show: int) -> dict[str, object]:
    per_file: dict[str, tuple[int, int]] = {}
    by_rule: Counter[str] = Counter()
    examples: list[str] = []
    started = time.perf_counter()
    chars = 0
    for path in paths:
        texts = texts_of(path)
        changed = 0
        for text in texts:
            chars += len(text)
            kept = text
            for rule in RULES:
                out, _ = redact_secrets(kept, (rule,))
                if out != kept:
                    by_rule[rule.name] += 1
                    kept = out
            if kept != text:
                changed += 1
                if len(examples) < show:
                    examples.append(f"{path.name}: {text[:160]!r} -> {kept[:160]!r}")
        per_file[path.name] = (changed, len(texts))
    elapsed = time.perf_counter() - started
    total = sum(n for _, n in per_file.values())
    return {
        "eval_texts": total,
        "eval_changed": sum(c for c, _ in per_file.values()),
        "eval_changed_per_file": {k: c for k, (c, _) in per_file.items()},
        "eval_texts_per_file": {k: n for k, (_, n) in per_file.items()},
        "eval_changed_by_rule": dict(by_rule),
        "eval_examples_list": examples,
        "us_per_1000_chars": round(elapsed / max(chars, 1) * 1e9, 1),
    }


def _default_paths() -> list[Path]:
    """Every evaluation file found; one line for each that is not, saying where it comes from."""
    found = []
    for name in known_files():
        try:
            found.append(eval_file(name))
        except MissingEvalFile as exc:
            print(f"bench.redaction: not measured on {exc}", file=sys.stderr)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", nargs="*", help="eval files (default: every one found, bench/data/eval/README.md)")
    ap.add_argument("--show", type=int, default=20, help="texts changed to print")
    args = ap.parse_args()
    paths = [Path(p) for p in args.data] if args.data else _default_paths()
    result = probes()
    if paths:
        result.update(false_positives(paths, args.show))
    for key, value in result.items():
        if key.endswith("_list"):
            for line in value:  # type: ignore[attr-defined]
                print(f"  {key}: {line}")
        else:
            print(f"{key:32} {value}")
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("_list")}, ensure_ascii=False))


if __name__ == "__main__":
    main()
