"""The operator's first look: a user's counts open as tiles, not an unstyled list; the recall
view does not list 用户 (the pronouns made neutral) as a word of 我妹妹叫什么, and says
what it stands for."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory.storage.store import MemoryStore
from tests.web.conftest import Web, follow, logged_in_context, start_web


@pytest.fixture(scope="module")
async def server(store: MemoryStore, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Web]:
    web = await start_web(store, tmp_path_factory.mktemp("first-hour-journal"))
    yield web
    await web.runner.cleanup()


@pytest.fixture
async def page(browser: Any, server: Web) -> AsyncIterator[Any]:
    context = await logged_in_context(browser, server)
    tab = await context.new_page()
    yield tab
    await context.close()


@pytest.fixture(scope="module")
def person(store: MemoryStore) -> str:
    user = f"first-hour-{uuid.uuid4().hex[:6]}"
    store.upsert_fact(user, "用户的妹妹叫安娜", category="relationships", slot="sister")
    store.add_raw(user, "I keep bees on the roof")
    return user


async def test_a_users_counts_open_as_tiles(page: Any, server: Web, person: str, tmp_path: Path) -> None:
    await page.goto(f"{server.url}/user?id={person}")
    tiles = page.locator("dl.counts > div")
    assert await tiles.count() == 12  # the twelve counts (the stored densities since issue 52)
    assert await page.eval_on_selector("dl.counts", "e => getComputedStyle(e).display") == "grid"
    assert await page.eval_on_selector("dl.counts dd", "e => getComputedStyle(e).marginLeft") == "0px"
    boxes = [await tiles.nth(i).bounding_box() for i in range(12)]
    rows = {round(b["y"]) for b in boxes if b}
    assert len(rows) <= 3, rows  # side by side in a few rows at 1280 px, not one a line
    await page.screenshot(path=str(tmp_path / "user-counts.png"))


async def test_the_recall_view_says_what_the_user_word_stands_for(page: Any, server: Web, person: str) -> None:
    await page.goto(f"{server.url}/user?id={person}")
    await follow(page, "text=What would it recall?")
    await page.fill("input[name=q]", "我妹妹叫什么")
    await follow(page, "form.search button[type=submit]")
    keywords = await page.locator("p.keywords code").all_inner_texts()
    assert "妹妹" in keywords and "用户" not in keywords and "user" not in keywords, keywords
    note = await page.locator("p.user-words").inner_text()
    assert "用户" in note and "我" in note, note
