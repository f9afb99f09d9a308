"""Redaction measured: what it catches and what it wrongly changes.

    uv run python -m bench.privacy.redaction [--data FILE ...] [--show N]

- Probes (`bench/privacy/hostile_probes.py`): secret sentences in English and Chinese, as callers
  say them; caught = the secret's value no longer in the text. Plain sentences with
  numbers and keywords that must stay as they were.
- Sentence sets of issue 40 (`bench/data/redaction/`): `held_apart.json`, written before
  the rules were changed and never tuned on, and `tuning.json`, written after it to develop
  the rules on: the share of secret-bearing sentences caught (every secret's value gone:
  no run of 4 of its characters left), per language with a 95% bootstrap interval, and the
  look-alikes changed (order numbers, extensions, prices, dates: must stay 0).
- False positives: every text of the evaluation files (retrieval memories and queries,
  gatekeeper turns and facts; bench/data/eval/README.md): none of them holds a
  secret, so each text the redaction changes is one ordinary memory damaged. Per file
  and per rule, with the texts changed (`--show`).
- Cost: microseconds per text of the speech-form pass (`spoken.py`, number words to
  digits, run on every turn before the rules) and of the whole redaction.

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from bench.common.evaldata import MissingEvalFile, eval_file, file_kind, known_files, load_gate, load_retrieval
from bench.common.paths import DATA as DATA_DIR
from bench.common.stats import mean_interval
from bench.privacy.hostile_probes import PLAIN, PLAIN_SAID, SECRETS, SECRETS_HELD_OUT, SECRETS_ISSUE30, SECRETS_SAID
from memory.language.redact import RULES, redact_secrets
from memory.language.spoken import spoken_digits


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


SETS = DATA_DIR / "redaction"


def secret_left(original: str, redacted: str, secret: str) -> bool:
    """Is any of `secret` still in `redacted`: a run of 4 of its characters (spaces left
    out on both sides) that the rest of the sentence does not also hold ("redis" of the
    URL `redis://:redisPass88@...`), or the whole value when it is shorter or has none?"""
    value, text = "".join(secret.split()), "".join(redacted.split())
    rest = "".join(original.replace(secret, "\0").split())
    runs = [value[i : i + 4] for i in range(len(value) - 3) if value[i : i + 4] not in rest]
    if not runs:
        return value in text
    return any(run in text for run in runs)


def sentence_set(name: str) -> dict[str, object]:
    """Share caught and look-alikes changed on one set of `bench/data/redaction/`."""
    path = Path(name) if name.endswith(".json") else SETS / f"{name}.json"
    name = path.stem
    doc = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, object] = {}
    missed: list[str] = []
    for lang in ("en", "zh", "all"):
        items = [it for it in doc["secrets"] if lang in ("all", it["lang"])]
        hits = []
        for it in items:
            redacted = redact_secrets(it["text"])[0]
            hits.append(not any(secret_left(it["text"], redacted, s) for s in it["secrets"]))
            if not hits[-1] and lang == "all":
                missed.append(f"{it['text']!r} -> {redacted!r}")
        caught = sum(hits)
        lo, hi = mean_interval([float(h) for h in hits])
        out[f"{name}_{lang}"] = f"{caught}/{len(items)}"
        out[f"{name}_{lang}_caught_share"] = round(caught / max(len(items), 1), 3)
        out[f"{name}_{lang}_interval"] = [round(lo, 3), round(hi, 3)]
    changed = [f"{it['text']!r} -> {redact_secrets(it['text'])[0]!r}" for it in doc["look_alikes"]
               if redact_secrets(it["text"])[0] != it["text"]]  # fmt: skip
    out[f"{name}_look_alikes"] = len(doc["look_alikes"])
    out[f"{name}_look_alikes_changed"] = len(changed)
    out[f"{name}_missed_list"] = missed
    out[f"{name}_look_alikes_changed_list"] = changed
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


def speech_form_cost(paths: list[Path]) -> dict[str, object]:
    """What the speech-form pass (`spoken_digits`, run on every turn before the rules)
    costs per text, and what the whole redaction costs, over the evaluation texts."""
    texts = [t for path in paths for t in texts_of(path)]
    if not texts:
        return {}
    spoken, whole = [], []
    changed = 0
    for text in texts:
        started = time.perf_counter()
        form = spoken_digits(text)
        spoken.append((time.perf_counter() - started) * 1e6)
        changed += bool(form.pieces)
        started = time.perf_counter()
        redact_secrets(text)
        whole.append((time.perf_counter() - started) * 1e6)
    spoken.sort()
    whole.sort()
    return {
        "spoken_us_per_text_mean": round(sum(spoken) / len(spoken), 1),
        "spoken_us_per_text_p95": round(spoken[int(0.95 * (len(spoken) - 1))], 1),
        "spoken_texts_with_numbers_said": changed,
        "redact_us_per_text_mean": round(sum(whole) / len(whole), 1),
        "redact_us_per_text_p95": round(whole[int(0.95 * (len(whole) - 1))], 1),
    }


def _default_paths() -> list[Path]:
    """Every evaluation file found; one line for each that is not, saying where it comes from."""
    found = []
    for name in known_files():
        try:
            found.append(eval_file(name))
        except MissingEvalFile as exc:
            print(f"bench.privacy.redaction: not measured on {exc}", file=sys.stderr)
    return found


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", nargs="*", help="eval files (default: every one found, bench/data/eval/README.md)")
    ap.add_argument("--show", type=int, default=20, help="texts changed to print")
    ap.add_argument("--sets", nargs="*", default=["held_apart", "tuning"],
                    help="sets of bench/data/redaction/ to measure (held_apart: once, at the end), or a .json "
                         "path of that format (bench/data/blind/redaction_tuning.json)")  # fmt: skip
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.data] if args.data else _default_paths()
    result = probes()
    for name in args.sets:
        result.update(sentence_set(name))
    if paths:
        result.update(false_positives(paths, args.show))
        result.update(speech_form_cost(paths))
    for key, value in result.items():
        if key.endswith("_list"):
            for line in value:  # type: ignore[attr-defined]
                print(f"  {key}: {line}")
        else:
            print(f"{key:32} {value}")
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("_list")}, ensure_ascii=False))


if __name__ == "__main__":
    main()
