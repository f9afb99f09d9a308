"""A long turn split into parts the store keeps whole."""

from __future__ import annotations


def test_a_long_chinese_turn_is_cut_after_a_sentence_not_inside_a_number() -> None:
    # Chinese has no spaces: the cut fell at exactly the limit, "1391234567 | 8".
    from memory.language.split import split_turn

    sentence = "今天我们去公园散步，天气很好，孩子们玩得很开心。"
    text = sentence * 40 + "我的手机号是13912345678，别忘了。" + sentence * 40
    limit = text.index("13912345678") + 5  # a cut at the limit would fall inside the number
    parts = split_turn(text, limit)
    assert "".join(parts) == text and all(len(p) <= limit for p in parts)
    assert any("13912345678" in p for p in parts)
    assert all(p.endswith(("。", "，")) for p in parts[:-1])
