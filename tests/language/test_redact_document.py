"""The one redaction step for structured input (forms, imports): every value however
nested, secret field names, digit groups typed in separate boxes; deep nesting never
raises RecursionError."""

from __future__ import annotations

import json

from memory.language.redact import MARK, is_secret_field, redact_document


def test_each_value_is_redacted_on_its_own_keys_and_nested_values_included() -> None:
    doc = {
        "notes": "my password is Quokka88 and my sister is Anna",
        "contacts": [{"name": "Anna", "remark": "her PIN is 4711"}, "call 138 0013 8000"],
        "my password is hunter2": True,
        "age": 41,
    }
    out, kinds = redact_document(doc)
    text = json.dumps(out, ensure_ascii=False)
    assert "Quokka88" not in text and "4711" not in text and "hunter2" not in text, text
    assert out["notes"] == f"my password is {MARK} and my sister is Anna"
    assert out["contacts"][0]["name"] == "Anna" and out["contacts"][1] == "call 138 0013 8000"
    assert out["age"] == 41 and f"my password is {MARK}" in out
    assert set(kinds) >= {"password", "code"}
    assert doc["notes"].endswith("Anna") and "Quokka88" in doc["notes"]  # the input is not changed


def test_a_value_under_a_secrets_name_goes_whole() -> None:
    out, kinds = redact_document({
        "Password": "sunshine", "security answer": "Fluffy", "银行卡密码": "八三九二",
        "card_number": 4111111111111112, "pin": ["4", "7"], "remember me": False, "theme": "dark",
    })  # fmt: skip
    assert out == {
        "Password": MARK, "security answer": MARK, "银行卡密码": MARK, "card_number": MARK,
        "pin": [MARK, MARK], "remember me": False, "theme": "dark",
    }  # fmt: skip
    assert kinds.count("field") == 6
    assert not is_secret_field("passport photo taken") and not is_secret_field("theme")


def test_a_card_typed_in_four_boxes_is_redacted_though_no_box_holds_a_card() -> None:
    out, kinds = redact_document({"payment": ["4111", "1111", "1111", "1111"], "lucky": [3, 7, 42]})
    assert out == {"payment": [MARK] * 4, "lucky": [3, 7, 42]}
    assert "card_number" in kinds
    out, _ = redact_document({"card": [4111, 1111, 1111, 1111]})  # as JSON numbers too
    assert out == {"card": [MARK] * 4}


def test_a_number_that_is_a_secret_becomes_the_mark() -> None:
    assert redact_document({"ref": 4111111111111111})[0] == {"ref": MARK}


def test_any_depth_is_walked_without_recursion() -> None:
    deep: object = "my password is hunter2"
    for i in range(20_000):
        deep = [deep] if i % 2 else {"k": deep}
    out, kinds = redact_document(deep)
    for i in range(20_000 - 1, -1, -1):
        out = out[0] if i % 2 else out["k"]
    assert out == f"my password is {MARK}" and kinds == ["password"]
