"""The operator's pages in headless Chromium, against the real store.

What a user stores goes in through the product's own write path (`MemoryService.remember`
with the real gatekeeper and a scripted extraction model, the archive's and the shared
contexts' stores); the browser logs in through the form and reads, searches, forgets and
replays as an operator would. Screenshots of the user page (English and Chinese) and of
the recall box are written by these same checks: to a temporary directory, and to
`docs/screenshots/` when UPDATE_SCREENSHOTS=1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from memory.admin.cli import main as admin_main
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.journal.queue import DurableWriteQueue
from memory.language.prefilter import GateAction
from memory.settings import MemoryMode
from memory.storage.archive import ArchivedMessage, archive_for
from memory.storage.contexts import ContextStore
from memory.storage.store import MemoryStore
from memory.types import InvalidMemoryText, Turn, now_iso
from memory.web.server import serve
from tests.conftest import make_service, scripted_extraction, wait_until
from tests.web.conftest import ROOT, Web, follow, logged_in_context, start_web

SHOTS = ROOT / "docs" / "screenshots"

# The user's words, in the order said, and the facts the (scripted) extraction model finds.
SAID = [
    ("My sister is called Anna.", {"text": "User's sister is Anna", "category": "relationships", "slot": "sister"}),
    ("I'm allergic to peanuts.", {"text": "User is allergic to peanuts", "category": "personal_facts",
                                  "slot": "allergy"}),  # fmt: skip
    ("我最喜欢的颜色是蓝色。", {"text": "用户最喜欢的颜色是蓝色", "category": "preferences",
                              "slot": "favourite_colour"}),
    ("Actually my sister's name is Maria, not Anna.",
     {"text": "User's sister is Maria", "category": "relationships", "slot": "sister"}),
    ("其实我现在最喜欢绿色了。", {"text": "用户最喜欢的颜色是绿色", "category": "preferences",
                                "slot": "favourite_colour"}),
]  # fmt: skip
TURNS = [("call-1", "I went hiking in the Alps last weekend"), ("call-1", "The weather was perfect"),
         ("call-2", "我周末在杭州喝了龙井茶")]  # fmt: skip
HOSTILE = (
    """<script>document.body.dataset.pwned = "script"; alert("xss")</script> and """
    """<img src=x onerror="document.body.dataset.pwned = 'img'; alert('xss')"> said the caller"""
)


@dataclass
class People:
    gated: str  # facts and their history, turns, an archived call, a shared context
    web: Web
    normal_web: Web


async def remember_gated(store: MemoryStore, user_id: str, said: list[tuple[str, dict[str, str]]]) -> None:
    extraction = scripted_extraction({text: [fact] for text, fact in said})
    service = make_service(store, MemoryMode.GATED, gatekeeper=Gatekeeper(extraction))
    for i, (text, _fact) in enumerate(said):
        report = await service.remember(Turn(user_id, text, "call-0", f"{user_id}-g{i}", now_iso()))
        assert report.gate is not None and report.gate.decision.action in (GateAction.EXTRACT, GateAction.FORCE), (
            text,
            report.gate,
        )
        assert report.writes and report.writes[0].event in ("ADD", "UPDATE"), report


async def remember_normal(store: MemoryStore, user_id: str, turns: list[tuple[str, str]]) -> None:
    service = make_service(store, MemoryMode.NORMAL)
    for i, (session, text) in enumerate(turns):
        report = await service.remember(Turn(user_id, text, session, f"{user_id}-n{i}", now_iso(), seq=i))
        assert [w.event for w in report.writes] == ["ADD"], report


async def dead_letter(server: Web, turn: Turn, why: str) -> None:
    """The turn through a real journal whose store refuses it for good: a dead letter."""

    async def refuse(_turn: Turn) -> None:
        raise InvalidMemoryText(why)

    queue = DurableWriteQueue(server.settings.journal_path, refuse)
    queue.enqueue(turn)
    queue.start()
    await wait_until(lambda: queue.dead_lettered == 1, what="the turn to be dead-lettered")
    await queue.aclose()


def archive_call(store: MemoryStore, user_id: str, chat_id: str, summary: str, *messages: str) -> None:
    rows = [ArchivedMessage(f"{user_id}:{chat_id}:{i}", chat_id, user_id, text, "user" if i % 2 == 0 else "assistant",
                            now_iso()) for i, text in enumerate(messages)]  # fmt: skip
    rows.append(ArchivedMessage(f"{user_id}:{chat_id}:s", chat_id, user_id, summary, "summary", now_iso(),
                                covers=tuple(r.id for r in rows)))  # fmt: skip
    archive_for(store).add(rows)


@pytest.fixture(scope="module")
async def people(store: MemoryStore, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[People]:
    user = f"alice-{uuid.uuid4().hex[:6]}"
    await remember_gated(store, user, SAID)
    await remember_normal(store, user, TURNS)
    archive_call(store, user, "call-1", "Alice talked about hiking in the Alps; her sister Maria may join next time.",
                 "I went hiking in the Alps last weekend", "That sounds wonderful!")  # fmt: skip
    contexts = ContextStore(store.pool, store.table, store.settings.context_max_chars)
    ctx = contexts.create(user, "receptionist", "Caller wants to book a table for two on Friday")
    contexts.append(user, ctx, "booking", "Booked 19:00 at 龙井茶馆")
    gated = await start_web(store, tmp_path_factory.mktemp("pages-journal"))
    normal = await start_web(store, tmp_path_factory.mktemp("pages-journal-normal"), mode=MemoryMode.NORMAL)
    yield People(user, gated, normal)
    await gated.runner.cleanup()
    await normal.runner.cleanup()


@pytest.fixture(scope="module")
async def context(browser: Any, people: People) -> AsyncIterator[Any]:
    ctx = await logged_in_context(browser, people.web, accept_downloads=True)
    yield ctx
    await ctx.close()


@pytest.fixture
async def page(context: Any) -> AsyncIterator[Any]:
    """A tab that fails the test on any dialog (an alert would mean stored text ran)."""
    tab = await context.new_page()
    dialogs: list[str] = []
    tab.on("dialog", lambda d: (dialogs.append(d.message), __import__("asyncio").ensure_future(d.dismiss())))
    yield tab
    await tab.close()
    assert not dialogs, f"a dialog opened: {dialogs}"


def screenshot_dir(tmp_path: Path) -> Path:
    return tmp_path


async def save_screenshot(page: Any, tmp_path: Path, name: str) -> Path:
    """Into the test's temporary directory; copied to docs/screenshots/ with UPDATE_SCREENSHOTS=1."""
    path = tmp_path / name
    await page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000  # a rendered page, not a blank
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SHOTS / name)
    return path


async def cells(page: Any, selector: str) -> list[list[str]]:
    return await page.eval_on_selector_all(
        selector, "rows => rows.map(r => Array.from(r.querySelectorAll('td')).map(td => td.innerText.trim()))"
    )


# ------------------------------------------------------------------------------ pages
async def test_a_users_facts_and_their_history_show_after_the_product_stores_them_in_english_and_chinese(
    page: Any, people: People, tmp_path: Path
) -> None:
    base = people.web.url
    await page.goto(f"{base}/?q={people.gated[:8]}")
    await follow(page, f"text={people.gated}")  # from the users list, searched by identity
    assert await page.inner_text("h1") == people.gated
    facts = await cells(page, "#facts tr.fact")
    texts = [row[0] for row in facts]
    assert sorted(texts) == sorted(["User's sister is Maria", "User is allergic to peanuts", "用户最喜欢的颜色是绿色"])
    sister = next(row for row in facts if row[0] == "User's sister is Maria")
    assert sister[1] == "sister"
    assert "added as “User's sister is Anna”" in sister[3]
    assert "“User's sister is Anna” became “User's sister is Maria”" in sister[3]
    categories = await page.eval_on_selector_all("#facts h3.category", "hs => hs.map(h => h.dataset.category)")
    assert categories == ["relationships", "preferences", "personal_facts"]  # the settings' order
    assert await page.inner_text("#facts h3.category >> nth=0") == "Relationships"
    turns = await page.inner_text("#turns")
    assert "The weather was perfect" in turns and "我周末在杭州喝了龙井茶" in turns
    # A call is headed by when it began and how long it lasted, not by its id.
    assert "call-1" not in turns and re.search(r"Call of \d{4}-\d\d-\d\d \d\d:\d\d · ", turns), turns
    calls = await page.inner_text("#calls")
    assert "her sister Maria may join next time" in calls
    assert "Booked 19:00 at 龙井茶馆" in await page.inner_text("#contexts")
    await save_screenshot(page, tmp_path, "web-user-en.png")

    await follow(page, "text=中文")
    assert "按类别的事实（GATED）" in await page.inner_text("#facts h2")
    assert await page.inner_text("#facts h3.category >> nth=0") == "人际关系"
    zh = await cells(page, "#facts tr.fact")
    green = next(row for row in zh if row[0] == "用户最喜欢的颜色是绿色")  # a Chinese fact, as written
    assert "“用户最喜欢的颜色是蓝色”改为“用户最喜欢的颜色是绿色”" in green[3]
    assert "User's sister is Maria" in [row[0] for row in zh]  # stored text is never translated
    await save_screenshot(page, tmp_path, "web-user-zh.png")
    await page.goto(f"{base}/?lang=en")


@pytest.mark.parametrize(
    ("mode", "query"),
    [("GATED", "What's my sister's name?"), ("GATED", "我最喜欢什么颜色？"), ("NORMAL", "where did I go hiking")],
)
async def test_the_recall_box_shows_what_memory_admin_search_returns(
    page: Any, people: People, mode: str, query: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], store: MemoryStore, tmp_path: Path, browser: Any,
) -> None:  # fmt: skip
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    if store.settings.database_url:  # the run's server (PgBouncer, or the mutant runner's): the store's own
        monkeypatch.setenv("MEMORY_DATABASE_URL", store.settings.database_url)
    monkeypatch.setenv("MEM0_SETTING", mode)
    capsys.readouterr()
    assert admin_main(["--json", "search", people.gated, query]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["memories"], cli  # the case recalls something

    server = people.web if mode == "GATED" else people.normal_web
    if server is not people.web:
        other = await logged_in_context(browser, server)
        page = await other.new_page()
    await page.goto(f"{server.url}/user?id={people.gated}")
    await follow(page, "text=What would it recall?")
    await page.fill("input[name=q]", query)
    await follow(page, "form.search button[type=submit]")
    recalled = await cells(page, "#recalled tbody tr")
    assert [(r[7], r[1]) for r in recalled] == [(m["text"], f"{m['score']:.4f}") for m in cli["memories"]]
    # and the scores that ranked them, as the CLI gives them
    assert [(r[2], r[3]) for r in recalled] == [
        (f"{c['lexical']:.4f}", f"{c['vector']:.4f}") for c in cli["considered"] if c["outcome"] == "recalled"
    ]
    # each score column states its range, and every score shown is within it (a fused 1.053 was)
    heads = await page.eval_on_selector_all("#recalled thead th", "ths => ths.map(th => th.innerText.trim())")
    assert heads[1:5] == ["Fused (0–1)", "Lexical (0–1)", "Vector (0–1)", "Cosine (−1–1)"]
    assert all(0 <= float(r[i]) <= 1 for r in recalled for i in (1, 2, 3))
    assert all(r[4] == "-" or -1 <= float(r[4]) <= 1 for r in recalled)
    assert cli["ranges"]["score"] == [0, 1]
    cut = await cells(page, "#cut tbody tr")
    assert [r[4] for r in cut] == [c["text"] for c in cli["considered"] if c["outcome"] != "recalled"]
    block = await page.inner_text("#block")
    assert [json.loads(line)["note"] for line in block.splitlines()] == [m["text"] for m in cli["memories"]]
    if query.startswith("What"):
        assert recalled[0][7] == "User's sister is Maria"
        await save_screenshot(page, tmp_path, "web-recall.png")
    if server is not people.web:
        await other.close()


async def test_stored_markup_shows_as_text_and_runs_nothing(
    page: Any, people: People, store: MemoryStore, user_id: str
) -> None:
    # Through every way text gets in: a spoken turn (NORMAL), a fact the model extracted
    # (GATED), an archived message and summary, a shared context's note, a dead letter.
    await remember_normal(store, user_id, [("call-x", HOSTILE)])
    fact = {"text": f"User said {HOSTILE}", "category": "personal_facts", "slot": "quote"}
    await remember_gated(store, user_id, [(f"Remember this: {HOSTILE}", fact)])
    archive_call(store, user_id, "call-x", f"Summary: {HOSTILE}", HOSTILE)
    ContextStore(store.pool, store.table, 4000).create(user_id, "agent", HOSTILE)
    await dead_letter(people.web, Turn(user_id, HOSTILE, "call-x", f"{user_id}-dead", now_iso()), "refused")

    base = people.web.url
    for path in (f"/user?id={user_id}", f"/recall?id={user_id}&q=what+did+the+caller+say", "/dead-letters",
                 f"/?q={user_id}"):  # fmt: skip
        await page.goto(base + path)
        assert await page.evaluate("document.body.dataset.pwned") is None, path
        assert await page.locator("main script, main img, main [onerror]").count() == 0, path
        if path != f"/?q={user_id}":
            shown = await page.locator("td.text, p.summary, pre.block").all_inner_texts()
            assert any("<script>document.body.dataset.pwned" in s for s in shown), (path, shown)
            assert any("""<img src=x onerror="document.body.dataset.pwned = 'img'""" in s for s in shown), path
    await page.goto(f"{base}/user?id={user_id}")
    assert await page.locator("#calls p.summary", has_text="<script>").count() == 1
    assert await page.locator("#contexts td.text", has_text="<img src=x").count() == 1


async def test_forget_through_the_page_leaves_nothing_in_any_table(
    page: Any, people: People, store: MemoryStore, user_id: str
) -> None:
    marker = f"zebrafinch{uuid.uuid4().hex[:8]}"
    await remember_gated(store, user_id, [
        (f"My dog is called {marker}.", {"text": f"User's dog is {marker}", "category": "relationships",
                                          "slot": "dog"}),
        (f"Actually my dog is called {marker}-two.", {"text": f"User's dog is {marker}-two",
                                                      "category": "relationships", "slot": "dog"}),
    ])  # fmt: skip
    await remember_normal(store, user_id, [("call-f", f"I walked {marker} today")])
    archive_call(store, user_id, "call-f", f"Walked {marker}", f"I walked {marker} today", "Nice!")
    ContextStore(store.pool, store.table, 4000).create(user_id, "agent", f"About {marker}")
    queue = DurableWriteQueue(people.web.settings.journal_path, lambda t: None)  # never started: the row waits
    queue.enqueue(Turn(user_id, f"{marker} is waiting", "call-f", f"{user_id}-w", now_iso()))
    assert sum(rows_naming(store, user_id, marker).values()) >= 6

    await page.goto(f"{people.web.url}/user?id={user_id}")
    await follow(page, "text=Forget this user…")
    await page.fill("input[name=confirm]", user_id + "x")  # a slip of the keyboard
    await follow(page, "form.forget button[type=submit]")
    assert await page.is_visible("#mismatch")
    assert store.list_user(user_id)  # nothing was forgotten
    await page.fill("input[name=confirm]", user_id)
    await follow(page, "form.forget button[type=submit]")
    assert await page.is_visible("#nothing-left"), await page.inner_text("main")
    left = await page.eval_on_selector_all("#forgotten td.left", "tds => tds.map(t => t.innerText)")
    assert left == ["0"] * 7  # the seven places of userdata.PLACES, the stored densities among them

    assert rows_naming(store, user_id, marker) == {}
    with closing(sqlite3.connect(store.settings.mem0_dir / "history.db")) as db:
        assert db.execute("SELECT count(*) FROM history WHERE new_memory LIKE ? OR old_memory LIKE ?",
                          [f"%{marker}%"] * 2).fetchone()[0] == 0  # fmt: skip
    with closing(sqlite3.connect(people.web.settings.journal_path)) as db:
        waiting = db.execute("SELECT count(*) FROM pending_writes WHERE payload LIKE ?", [f"%{marker}%"]).fetchone()
        assert waiting[0] == 0
    await page.goto(f"{people.web.url}/user?id={user_id}")
    assert "Nothing is stored under" in await page.inner_text("main")


def rows_naming(store: MemoryStore, user_id: str, marker: str) -> dict[str, int]:
    """Rows of any table of the database whose text holds the user id or the marker, the
    forget record aside (it keeps the id and the removed ids, never text, by design)."""
    found = {}
    with store.pool.connection() as conn:
        columns = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND data_type IN ('text', 'jsonb', 'ARRAY', 'character varying')"
        ).fetchall()
        for table, column in columns:
            n = conn.execute(f'SELECT count(*) FROM "{table}" WHERE "{column}"::text LIKE %s OR "{column}"::text '
                             "LIKE %s", [f"%{user_id}%", f"%{marker}%"]).fetchone()[0]  # fmt: skip
            if n and not (table.endswith("_forgets") and column in ("user_id", "memory_ids")):
                found[f"{table}.{column}"] = n
    return found


async def test_a_cross_site_form_is_refused_and_forgets_nobody(
    context: Any, people: People, store: MemoryStore, user_id: str
) -> None:
    """A page of another server on this machine (another port: the same *site*, so the
    SameSite cookie goes along) posts the forget form with the user's identity typed in."""
    await remember_normal(store, user_id, [("call-c", "I play the cello on Sundays")])
    target = f"{people.web.url}/forget"
    form = (f'<form method="post" action="{target}"><input name="id" value="{user_id}">'
            f'<input name="confirm" value="{user_id}"><button id="go">win a prize</button></form>')  # fmt: skip

    async def prize(_request: web.Request) -> web.Response:
        return web.Response(text=form, content_type="text/html")

    attacker = web.Application()
    attacker.router.add_get("/", prize)
    runner, url = await serve(attacker, "127.0.0.1", 0)
    tab = await context.new_page()
    try:
        await tab.goto(url)
        async with tab.expect_response(target) as answer:
            await tab.click("#go")
        response = await answer.value
        assert response.status == 403 and "Forbidden" in await tab.inner_text("body")
    finally:
        await tab.close()
        await runner.cleanup()
    assert [r.text for r in store.list_user(user_id)] == ["I play the cello on Sundays"]


async def test_dead_letters_are_listed_and_replayed_from_the_page(page: Any, people: People, user_id: str) -> None:
    await dead_letter(
        people.web, Turn(user_id, "我的生日是五月三日", "call-d", f"{user_id}-d1", now_iso()), "the store refused it"
    )
    await page.goto(f"{people.web.url}/dead-letters")
    row = page.locator("table.dead tr", has_text=f"{user_id}-d1")
    assert "我的生日是五月三日" in await row.inner_text() and "the store refused it" in await row.inner_text()
    await row.locator("input[type=checkbox]").check()
    await follow(page, "text=Replay selected")
    assert await page.inner_text("#replayed") == "1 back in the queue."
    assert [(r["turn_id"], r["state"]) for r in people.web.operator.admin.journal_rows(user_id)] == [
        (f"{user_id}-d1", "pending")
    ]
    assert await page.locator("table.dead tr", has_text=f"{user_id}-d1").count() == 0


async def test_export_downloads_what_memory_admin_export_prints(
    page: Any, people: People, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], store: MemoryStore
) -> None:
    await page.goto(f"{people.web.url}/user?id={people.gated}")
    async with page.expect_download() as download:
        await page.click("text=Export (JSON)")
    got = json.loads(Path(await (await download.value).path()).read_text(encoding="utf-8"))
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    if store.settings.database_url:  # the run's server (PgBouncer, or the mutant runner's): the store's own
        monkeypatch.setenv("MEMORY_DATABASE_URL", store.settings.database_url)
    capsys.readouterr()
    assert admin_main(["export", people.gated]) == 0
    printed = json.loads(capsys.readouterr().out)
    for doc in (got, printed):
        doc.pop("exported_at")
        doc.pop("store")  # names the data directory: the page's journal is its own
        doc.pop("journal"), doc["counts"].pop("journal")
    assert got == printed
    assert {m["text"] for m in got["memories"]} >= {"User's sister is Maria", "用户最喜欢的颜色是绿色"}
