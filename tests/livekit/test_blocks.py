"""The lines of a memory block."""

from __future__ import annotations

import json


def test_memory_dates_are_the_users_days_not_utcs() -> None:
    # Said at 07:30 in Beijing, the memory showed the day before (UTC).
    from zoneinfo import ZoneInfo

    from memory.livekit.blocks import format_memories
    from memory.types import MemoryRecord

    rec = MemoryRecord(id="m", text="我今天下午两点有面试", user_id="u", created_at="2026-11-24T23:30:00+00:00")
    assert json.loads(format_memories([rec], zone=ZoneInfo("Asia/Shanghai")))["said"] == "2026-11-25"
    assert json.loads(format_memories([rec]))["said"] == "2026-11-24"  # UTC unless MEMORY_TIMEZONE says otherwise
