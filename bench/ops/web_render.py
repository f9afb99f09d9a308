"""How long the operator's pages take for a user with 10,000 memories: `python -m bench.ops.web_render`.

The store holds one user with `--memories` memories (half GATED facts with a category, a
slot and a Mem0 history entry each; half NORMAL turns in calls of 25), their archived
calls, and `--others` rows of 90 other users, bulk-loaded once (COPY; vectors are random
unit vectors: no page reads them but "what would it recall", whose cost is the query's
embedding, the search and the density pass over the user's vectors, not their meaning).
The server is the one `python -m memory.web` runs, on a free port, over the store opened
as it opens it (Mem0 loaded at start, on a thread: `warm_up_ms`); each page is fetched
`--repeat` times over HTTP (time to the last byte; after two warm-ups, the first fetch
reported apart) and, with Debian's chromium, loaded in
headless Chromium (navigation start to the load event: parsing, styles, layout). The
baseline is the same pages for a user with 10 memories, in the same run.

Prints a table, then one JSON line with `user_page_p95_ms` (HTTP), `user_page_browser_p95_ms`
and `under_1s` (both p95 under 1000 ms), `recall_page_first_ms` (the first "what would it
recall" after the start: the user's densities) and `recall_under_1s` (first and p95), and
the load average beside them. Issue 40's figure: `--memories 50000`.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import random
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from memory.settings import DURABLE_CATEGORIES, LiveKitCredentials, MemorySettings, WebSettings, load_settings
from memory.storage.archive import archive_for
from memory.storage.store import MemoryStore
from memory.web.app import WARMED, build_app
from memory.web.server import serve
from memory.web.views import Operator

BIG = "bench-web-10k"
SMALL = "bench-web-10"
SECRET = "bench-web-secret-0123456789"
AUTH = {"Authorization": f"Bearer {SECRET}"}
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]  # fmt: skip

SENTENCES = [
    "I went hiking in the Alps with my sister and we stayed in a small hut",
    "My favourite colour used to be blue but lately I like green more",
    "We are planning a trip to Kyoto in April to see the cherry blossoms",
    "I have been learning the cello for two years and practise on Sundays",
    "我周末在杭州喝了龙井茶，还去西湖边走了走",
    "我妹妹下个月结婚，我要去北京参加婚礼",
    "My dentist appointment moved to Tuesday afternoon at three",
    "我对花生过敏，吃饭的时候一定要小心",
]


def text(i: int) -> str:
    return f"{SENTENCES[i % len(SENTENCES)]} ({i})"


def _unit_vectors(rng: np.random.Generator, n: int, dims: int) -> np.ndarray:
    vectors = rng.standard_normal((n, dims)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def preload(store: MemoryStore, memories: int, others: int, calls: int = 200) -> None:
    """COPY the rows once (binary, the HNSW index dropped meanwhile and built after, as
    bench.latency.run does); a second run on the same --data-dir reuses them."""
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql
    from psycopg.types.json import Jsonb

    table = sql.Identifier(store.table)
    with store.pool.connection() as conn:
        have = conn.execute(
            sql.SQL("SELECT count(*) FILTER (WHERE payload->>'user_id' = %s), count(*) FROM {}").format(table), [BIG]
        ).fetchone()
    if have == (memories, memories + others + 10):
        print(f"preload: reusing {have[1]} rows ({have[0]} for {BIG})", flush=True)
        return
    t0 = time.perf_counter()
    rng = np.random.default_rng(7)
    dims = store.settings.embedding_dims
    now = datetime.now(UTC)
    rows = [(BIG, i) for i in range(memories)] + [(SMALL, i) for i in range(10)]
    rows += [(f"bench-other-{i % 90}", i) for i in range(others)]
    vectors = _unit_vectors(rng, len(rows), dims)
    history: list[dict[str, Any]] = []
    hnsw = sql.Identifier(f"{store.table}_hnsw_idx")
    # A connection of its own: pgvector's adapters must not stay on the pool's connections.
    with psycopg.connect(store.url) as conn:
        register_vector(conn)
        conn.execute(sql.SQL("TRUNCATE {}").format(table))
        conn.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(archive_for(store).table)))
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(hnsw))
        copy_rows = sql.SQL("COPY {} (id, vector, payload, user_id) FROM STDIN WITH (FORMAT BINARY)").format(table)
        with conn.cursor().copy(copy_rows) as copy:
            copy.set_types(["uuid", "vector", "jsonb", "text"])
            for n, (user, i) in enumerate(rows):
                when = (now - timedelta(minutes=7 * (len(rows) - n))).isoformat()
                payload: dict[str, Any] = {"data": text(i), "user_id": user, "created_at": when, "updated_at": when,
                                           "hash": ""}  # fmt: skip
                mem_id = uuid.uuid4()
                if i % 2 == 0:  # a GATED fact
                    payload |= {"category": DURABLE_CATEGORIES[(i // 2) % 4], "slot": f"slot_{i}"}
                    if user == BIG:
                        history.append({"memory_id": str(mem_id), "old_memory": None, "new_memory": text(i),
                                        "event": "ADD", "created_at": when, "updated_at": when})  # fmt: skip
                else:  # a NORMAL turn of a call
                    payload |= {"session_id": f"call-{i // 50}", "seq": (i // 2) % 25, "turn_id": f"t{i}"}
                copy.write_row([mem_id, vectors[n], Jsonb(payload), user])
        per_call = 11
        archived = _unit_vectors(rng, calls * per_call, dims)
        columns = "id, chat_id, user_id, content, embedding, message_type, created_at"
        with conn.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)").format(
            sql.Identifier(archive_for(store).table), sql.SQL(columns)
        )) as copy:  # fmt: skip
            copy.set_types(["text", "text", "text", "text", "vector", "text", "timestamptz"])
            for c in range(calls):
                for m in range(per_call):
                    kind = "summary" if m == per_call - 1 else ("user" if m % 2 == 0 else "assistant")
                    copy.write_row([f"{BIG}:{c}:{m}", f"call-{c}", BIG, text(c * per_call + m),
                                    archived[c * per_call + m], kind,
                                    now - timedelta(hours=calls - c) + timedelta(minutes=m)])  # fmt: skip
        conn.commit()
        print(f"preload: {len(rows)} rows copied in {time.perf_counter() - t0:.0f} s; building the HNSW index ...",
              flush=True)  # fmt: skip
        conn.execute("SET maintenance_work_mem = '256MB'")
        conn.execute(sql.SQL("CREATE INDEX {} ON {} USING hnsw (vector vector_cosine_ops)").format(hnsw, table))
        conn.execute(sql.SQL("ANALYZE {}").format(table))
        conn.commit()
    store.mem0.db.batch_add_history(history)
    print(f"preload: done in {time.perf_counter() - t0:.0f} s ({len(history)} history entries)", flush=True)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


async def fetch_times(http: aiohttp.ClientSession, url: str, repeat: int) -> tuple[float, list[float]]:
    """The first fetch's time (cold: nothing cached), and `repeat` more after two warm-ups."""
    out = []
    for _ in range(repeat + 2):
        t0 = time.perf_counter()
        async with http.get(url, headers=AUTH) as resp:
            await resp.read()
            assert resp.status == 200, (url, resp.status)
        out.append((time.perf_counter() - t0) * 1000)
    return out[0], out[2:]


async def browser_times(base: str, paths: dict[str, str], repeat: int) -> dict[str, list[float]]:
    """Navigation start to the load event of each page in headless Chromium (logged in by the form)."""
    if not os.access(CHROMIUM, os.X_OK):
        return {}
    from playwright.async_api import async_playwright

    out: dict[str, list[float]] = {}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = await browser.new_page()
        await page.goto(f"{base}/login")
        await page.fill("input[name=secret]", SECRET)
        async with page.expect_navigation():
            await page.click("form.login button[type=submit]")
        for name, path in paths.items():
            times = []
            for i in range(repeat + 2):
                await page.goto(base + path, wait_until="load")
                nav = await page.evaluate("JSON.stringify(performance.getEntriesByType('navigation')[0])")
                entry = json.loads(nav)
                if i >= 2:
                    times.append(entry["loadEventEnd"] - entry["startTime"])
            out[name] = times
        await browser.close()
    return out


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="bench-web-"))
    if not args.data_dir:  # registered before the embedded server starts: removed after it stops
        atexit.register(shutil.rmtree, data_dir, True)
    settings: MemorySettings = load_settings({"MEMORY_DATA_DIR": str(data_dir), "MEM0_SETTING": "GATED"},
                                             dotenv=False)  # fmt: skip
    store = MemoryStore.open(settings, load_mem0=False)  # as `python -m memory.web` opens it
    try:
        preload(store, args.memories, args.others, args.calls)
        app = build_app(Operator(store, settings), settings, WebSettings(secret=SECRET),
                        livekit=LiveKitCredentials("wss://example.livekit.cloud", "key", "s" * 40))  # fmt: skip
        started = time.perf_counter()
        runner, base = await serve(app, "127.0.0.1", 0)
        await app[WARMED]  # Mem0, the embedder and the segmenter, loaded as the server starts
        warm_up_ms = (time.perf_counter() - started) * 1000
        mid = max(1, args.memories // 2 // 100 // 2)
        pages = {
            "user, first page": f"/user?id={BIG}",
            f"user, turns page {mid}": f"/user?id={BIG}&tp={mid}&fp={mid}&cp=10",
            "users list": "/",
            "store over time": "/store",
            "recall": f"/recall?id={BIG}&q=what+is+my+sister+planning",
            "baseline: user, 10 memories": f"/user?id={SMALL}",
            "baseline: recall, 10 memories": f"/recall?id={SMALL}&q=what+is+my+sister+planning",
        }
        http_ms: dict[str, list[float]] = {}
        cold_ms: dict[str, float] = {}
        async with aiohttp.ClientSession() as http:
            for name, path in pages.items():
                cold_ms[name], http_ms[name] = await fetch_times(http, base + path, args.repeat)
        wanted = {k: v for k, v in pages.items() if k in ("user, first page", "baseline: user, 10 memories")}
        browser_ms = await browser_times(base, wanted, args.repeat) if not args.no_browser else {}
        await runner.cleanup()
    finally:
        store.close()
    load = os.getloadavg()
    print(f"\n{args.memories} memories of one user among {args.memories + args.others + 10}; {args.repeat} "
          f"fetches a page after 2 warm-ups; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    print(f"{'page (ms)':34} {'first':>7} {'HTTP p50':>9} {'HTTP p95':>9} {'browser p50':>12} {'browser p95':>12}")
    for name, times in http_ms.items():
        b = browser_ms.get(name)
        bcol = f"{pct(b, 50):>12.0f} {pct(b, 95):>12.0f}" if b else f"{'-':>12} {'-':>12}"
        print(f"{name:34} {cold_ms[name]:>7.0f} {pct(times, 50):>9.0f} {pct(times, 95):>9.0f} {bcol}")
    user_http = pct(http_ms["user, first page"], 95)
    user_browser = pct(browser_ms["user, first page"], 95) if browser_ms else None
    return {
        "memories": args.memories,
        "rows": args.memories + args.others + 10,
        "user_page_p50_ms": round(pct(http_ms["user, first page"], 50), 1),
        "user_page_p95_ms": round(user_http, 1),
        "user_page_first_ms": round(cold_ms["user, first page"], 1),
        "user_page_middle_p95_ms": round(pct(http_ms[list(pages)[1]], 95), 1),
        "user_page_browser_p95_ms": None if user_browser is None else round(user_browser, 1),
        "baseline_user_page_p95_ms": round(pct(http_ms["baseline: user, 10 memories"], 95), 1),
        "users_page_p95_ms": round(pct(http_ms["users list"], 95), 1),
        "store_page_p95_ms": round(pct(http_ms["store over time"], 95), 1),
        "recall_page_p95_ms": round(pct(http_ms["recall"], 95), 1),
        "recall_page_first_ms": round(cold_ms["recall"], 1),  # the user's densities computed
        "baseline_recall_page_p95_ms": round(pct(http_ms["baseline: recall, 10 memories"], 95), 1),
        "warm_up_ms": round(warm_up_ms, 1),  # from the server's start until the models are loaded
        "recall_under_1s": cold_ms["recall"] < 1000 and pct(http_ms["recall"], 95) < 1000,
        "under_1s": user_http < 1000 and (user_browser is None or user_browser < 1000),
        "load_avg_1m": round(load[0], 2),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.ops.web_render", description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=10_000, help="memories of the one user (default 10,000)")
    ap.add_argument("--others", type=int, default=20_000, help="rows of 90 other users (default 20,000)")
    ap.add_argument("--calls", type=int, default=200, help="archived calls of the one user, 11 messages each "
                    "(default 200; a reused --data-dir keeps its own)")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=20, help="timed fetches of each page (default 20)")
    ap.add_argument("--data-dir", help="keep the store here and reuse it on the next run (default: a new temp dir)")
    ap.add_argument("--no-browser", action="store_true", help="HTTP only (no chromium)")
    random.seed(7)
    doc = asyncio.run(amain(ap.parse_args(argv)))
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
