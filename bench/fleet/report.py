"""The fleet benchmark's figures: the calls assessed (answered, remembered, within budget),
the read replicas' share, and the printed table."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from bench.fleet.calls import TABLE, Fleet
from bench.fleet.plan import Call


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def assess(fleet: Fleet, plan: list[Call], direct_url: str) -> dict[str, Any]:
    """The run's figures, from what the calls reported and what the database holds."""
    import psycopg

    on = [c for c in plan if c.memory]
    killed_worker_calls = {c.call_id for c in plan if c.state == "dropped"}
    # cross-worker recall: the word of the caller's previous call, said on another worker
    checks = found = skipped = 0
    misses: list[dict[str, Any]] = []
    by_caller: dict[str, list[Call]] = defaultdict(list)
    for c in plan:
        if c.kind == "regular":
            by_caller[c.caller].append(c)
    for caller_calls in by_caller.values():
        said: tuple[str, Call] | None = None  # the last word a completed turn said, and its call
        for c in sorted(caller_calls, key=lambda x: x.number):
            question = next((t for t in c.turns if t["text"].startswith("Do you remember") and not t.get("own")), None)
            if question is not None and said is not None:
                if said[1].call_id in killed_worker_calls:
                    skipped += 1  # its write may wait in the killed worker's journal for its next call
                elif said[1].worker != c.worker:
                    checks += 1
                    hit = said[0] in question.get("expect_found", [])
                    found += hit
                    if not hit:
                        misses.append({"call": c.call_id, "said_in": said[1].call_id,
                                       "missed_budget": question.get("missed_budget")})  # fmt: skip
            statement = next((t for t in c.turns if "lucky word is" in t["text"] and t.get("replied")), None)
            if statement is not None and c.word is not None:
                said = (c.word, c)
    with psycopg.connect(direct_url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT payload->>'user_id', payload->>'slot', payload->>'data', payload->>'timestamp' FROM {TABLE} "
            "WHERE payload->>'user_id' = ANY(%s) AND payload ? 'write_id'",
            [sorted({c.caller for c in on})],
        ).fetchall()
    stored: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for user, slot, text, when in rows:
        stored[(user, slot)].append((text, when))
    # every seat a completed turn said: stored once
    lost = duplicated = completed = 0
    lost_ids: list[str] = []
    for c in on:
        if c.kind != "regular" or c.seat_slot is None:
            continue
        turn = next((t for t in c.turns if "seat for trip" in t["text"] and t.get("replied")), None)
        if turn is None:
            continue  # dropped before the turn completed: never said in full
        completed += 1
        n = len(stored.get((c.caller, c.seat_slot), []))
        if n == 0:
            lost += 1
            lost_ids.append(c.call_id)
        elif n > 1:
            duplicated += n - 1
    # two workers changing one fact at once: one row, holding the later said
    lost_updates = 0
    pairs = defaultdict(list)
    for c in on:
        if c.kind == "contested":
            pairs[c.pair].append(c)
    pair_detail = []
    for p, sides in sorted(pairs.items()):
        said = [(t["journaled"]["said_at"], c.colour) for c in sides for t in c.turns if t.get("journaled")]
        rows_ = stored.get((sides[0].caller, "favourite_colour"), [])
        expected = max(said)[1] if said else None
        ok = len(rows_) == 1 and expected is not None and rows_[0][0] == f"User's favourite colour is {expected}"
        lost_updates += 0 if ok or len(said) < 2 else 1
        pair_detail.append({"pair": p, "workers": [c.worker for c in sides], "said": len(said), "rows": len(rows_),
                            "ok": ok})  # fmt: skip

    # first audio: memory on against memory off, same run
    def delays(calls: list[Call]) -> list[float]:
        return [t["first_audio_s"] * 1000 for c in calls for t in c.turns if t.get("first_audio_s") is not None]

    on_ms, off_ms = delays([c for c in on if c.kind == "regular"]), delays([c for c in plan if not c.memory])
    # Paired: each memory-off call speaks a memory-on call's script (same audio, same
    # lines): turn by turn, on minus off.
    paired: list[float] = []
    for off_call in (c for c in plan if not c.memory and c.source):
        on_turns = {t["index"]: t for t in fleet.calls[off_call.source].turns if t.get("first_audio_s") is not None}
        for t in off_call.turns:
            twin = on_turns.get(t["index"])
            if twin is not None and t.get("first_audio_s") is not None:
                paired.append((twin["first_audio_s"] - t["first_audio_s"]) * 1000)
    replicas = replica_figures(plan) if fleet.args.replicas else {}
    writes = sum(1 for c in on for w in c.writes if w in ("ADD", "UPDATE"))
    writes += sum(int(d.get("written") or 0) for d in fleet.drained.values())
    return {
        "cross_worker_recall": round(found / checks, 4) if checks else None,
        "recall_checks": checks,
        "recall_checks_skipped_killed_worker": skipped,
        "recall_misses": misses,
        "lost_updates": lost_updates,
        "contested_pairs": pair_detail,
        "fact_turns_completed": completed,
        "turns_lost": lost,
        "turns_lost_calls": lost_ids,
        "turns_duplicated": duplicated,
        "first_audio_ms_p50_on": round1(pct(on_ms, 50)),
        "first_audio_ms_p95_on": round1(pct(on_ms, 95)),
        "first_audio_ms_p50_off": round1(pct(off_ms, 50)),
        "first_audio_ms_p95_off": round1(pct(off_ms, 95)),
        "added_ms_p50": round1((pct(on_ms, 50) or 0) - (pct(off_ms, 50) or 0)) if on_ms and off_ms else None,
        "added_ms_p95": round1((pct(on_ms, 95) or 0) - (pct(off_ms, 95) or 0)) if on_ms and off_ms else None,
        "added_ms_paired_p50": round1(pct(paired, 50)),
        "added_ms_paired_p95": round1(pct(paired, 95)),
        "paired_turns": len(paired),
        "turns_on": len(on_ms),
        "turns_off": len(off_ms),
        "writes": writes,
        **replicas,
    }


def replica_figures(plan: list[Call]) -> dict[str, Any]:
    """`--replicas`: the previous turn's fact asked for at once (missed: must be 0), where the
    look-ups read, and their time, for the calls on replicas against those on the primary."""
    out: dict[str, Any] = {}
    for key, on_replicas in (("replicas", True), ("primary_only", False)):
        calls = [c for c in plan if c.kind == "regular" and c.state == "done" and c.replicas == on_replicas]
        own = [t for c in calls for t in c.turns if t.get("own") and t.get("replied")]
        ms = [t["lookup_ms"] for c in calls for t in c.turns if t.get("lookup_ms") is not None]
        out[f"own_words_checked_{key}"] = len(own)
        out[f"own_words_missed_{key}"] = sum(1 for t in own if not t.get("expect_found"))
        out[f"lookup_ms_p50_{key}"] = round1(pct(ms, 50))
        out[f"lookup_ms_p95_{key}"] = round1(pct(ms, 95))
        out[f"lookups_{key}"] = len(ms)
        if on_replicas:
            replica = sum((c.reads or {}).get("replica", 0) for c in calls)
            primary = sum((c.reads or {}).get("primary", 0) for c in calls)
            out["replica_reads"], out["primary_reads_of_replica_calls"] = replica, primary
            why: dict[str, int] = defaultdict(int)
            for c in calls:
                for reason, n in ((c.reads or {}).get("primary_because") or {}).items():
                    why[reason] += n
            out["primary_reads_because"] = {k: v for k, v in why.items() if v}
            out["replica_reads_share"] = round(replica / (replica + primary), 3) if replica + primary else None
    out["own_words_missed"] = out["own_words_missed_replicas"]
    return out


def mean(values: list[float]) -> float | None:
    return statistics.mean(values) if values else None


def round2(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def round1(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def print_table(out: dict[str, Any]) -> None:
    rows = [
        ("workers / calls memory on (completed) / off", f"{out['workers']} / {out['calls']} "
         f"({out['calls_completed']}) / {out['calls_off']}"),
        ("memories in the shared Postgres", f"{out['memories']:,} of {out['users']:,} users"),
        ("worker killed -9 mid-run (calls dropped)", f"{out['killed'].get('worker', '-')} "
         f"({', '.join(out['killed'].get('dropped_calls', [])) or '-'})"),
        ("added first-audio p95 (on - off), ms", f"{out['added_ms_p95']} (p50 {out['added_ms_p50']}); paired "
         f"by turn p95 {out['added_ms_paired_p95']} (p50 {out['added_ms_paired_p50']}, {out['paired_turns']} turns)"),
        ("first audio p95 on / off, ms", f"{out['first_audio_ms_p95_on']} / {out['first_audio_ms_p95_off']}"),
        ("cross-worker recall", f"{out['cross_worker_recall']} of {out['recall_checks']} checks"),
        ("lost updates (contested pairs)", f"{out['lost_updates']} of {len(out['contested_pairs'])}"),
        ("turns lost / duplicated (fact turns)", f"{out['turns_lost']} / {out['turns_duplicated']} of "
         f"{out['fact_turns_completed']}"),
        ("store writes per second", f"{out['writes_per_s']}"),
        ("database transactions per second / per call", f"{out['db_transactions_per_s']} / "
         f"{out['db_transactions_per_call']}"),
        ("CPU seconds per call on / off (job process)", f"{out['cpu_s_per_call_on']} / {out['cpu_s_per_call_off']}"),
        ("job process USS at call end on / off, MB", f"{out['uss_mb_at_call_end_on']} / "
         f"{out['uss_mb_at_call_end_off']}"),
        ("server connections max (budget)", f"{out['server_connections_max']} ({out['server_connections_budget']})"),
        ("PgBouncer clients max (budget)", f"{out['client_connections_max']} ({out['client_connections_budget']})"),
        ("PSS per call on / off, MB", f"{out.get('pss_mb_per_call_memory_on')} / "
         f"{out.get('pss_mb_per_call_memory_off')}"),
        ("retention runs", f"{out['retention_runs']}"),
        *_replica_rows(out),
        ("load average (start, end)", f"{out['load_average_1m']}"),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def _replica_rows(out: dict[str, Any]) -> list[tuple[str, str]]:
    if not out.get("replicas"):
        return []
    return [
        ("replicas; reads of replica calls on a replica", f"{out['replicas']}; {out['replica_reads_share']} "
         f"({out['replica_reads']} of {out['replica_reads'] + out['primary_reads_of_replica_calls']})"),
        ("previous turn's fact missed, replicas / primary only", f"{out['own_words_missed_replicas']} of "
         f"{out['own_words_checked_replicas']} / {out['own_words_missed_primary_only']} of "
         f"{out['own_words_checked_primary_only']}"),
        ("look-up p95 (p50), replicas / primary only, ms", f"{out['lookup_ms_p95_replicas']} "
         f"({out['lookup_ms_p50_replicas']}) / {out['lookup_ms_p95_primary_only']} "
         f"({out['lookup_ms_p50_primary_only']})"),
    ]  # fmt: skip
