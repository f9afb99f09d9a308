"""`bench.privacy.hostile`'s forms and contexts sections run against today's product.

The benchmark drives the door, the forms RPC and the shared contexts through their
public entry points; when one of those changes shape, the benchmark must fail here, in
the suite, not first on the day someone measures. The figures it reports are checked
too: no secret reaches the journal, the LLM, the store or a request, and a context's
notes stay within the bound once NFKC has expanded them.
"""

from __future__ import annotations

from pathlib import Path

from bench.privacy import hostile_surfaces
from memory.storage.store import MemoryStore


async def test_forms_and_contexts_sections_keep_every_secret_out(store: MemoryStore, tmp_path: Path) -> None:
    out = await hostile_surfaces.run(store, tmp_path, {"forms", "contexts"})
    assert out["forms_submitted"] > 30 and out["forms_refused"] == 0
    assert out["form_facts_stored"] > 0  # the forms did reach the gatekeeper and the store
    for key in ("form_secrets_journaled", "form_secrets_sent", "form_secrets_stored", "form_secrets_shown"):
        assert out[key] == 0, key
    assert out["context_secrets_tried"] >= 100 and out["context_secrets_stored"] == 0
    assert 0 < out["context_notes_shown_chars"] <= out["context_bound"]


async def test_the_forget_section_runs_and_leaves_nothing_behind(store: MemoryStore, tmp_path: Path) -> None:
    # Its "journal cannot be opened" case once stopped the benchmark: counting what was
    # left read the journal's path with SQLite and raised (an unreadable place is now said).
    out = await hostile_surfaces.run(store, tmp_path, {"forget"})
    cases = [r["case"] for r in out["forget_rows"]]
    assert "journal cannot be opened" in cases and len(cases) == 3
    assert out["forget_left_behind"] == 0, out["forget_rows"]
    assert out["forget_one_line"] is True
