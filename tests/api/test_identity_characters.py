"""The identity rule on the characters a reviewer tried: every character that shows as
nothing is refused, so no user can be a look-alike of another in the operator's listing."""

import pytest

from memory.errors import InvalidIdentity
from memory.types import memory_user_id

INVISIBLE = {
    "left-to-right isolate": "\u2066",
    "pop directional isolate": "\u2069",
    "byte order mark": "\ufeff",
    "soft hyphen": "\u00ad",
    "mongolian vowel separator": "\u180e",
    "tag latin a": "\U000e0041",
    "cancel tag": "\U000e007f",
    "line separator": "\u2028",
    "paragraph separator": "\u2029",
    "variation selector 16": "\ufe0f",
    "variation selector 1": "\ufe00",
    "variation selector 17": "\U000e0100",
    "combining grapheme joiner": "\u034f",
    "hangul filler": "\u3164",
    "halfwidth hangul filler": "\uffa0",
    "hangul choseong filler": "\u115f",
    "mongolian free variation selector": "\u180b",
}


@pytest.mark.parametrize("char", list(INVISIBLE.values()), ids=list(INVISIBLE))
def test_an_invisible_character_is_refused_with_the_rules_words(char: str) -> None:
    with pytest.raises(InvalidIdentity, match=f"zero-width characters \\(U\\+{ord(char):04X} at 5\\)"):
        memory_user_id("alice" + char)


@pytest.mark.parametrize("char", [c for c in INVISIBLE.values() if not c.isspace()])
def test_an_invisible_character_in_a_stored_id_is_still_accepted_for_reading_and_forgetting(char: str) -> None:
    assert memory_user_id("alice" + char, stored=True) == "alice" + char


def test_visible_marks_and_emoji_are_kept_as_given() -> None:
    for name in ("José", "Jose\u0301", "张伟", "🦊fox", "ａｌｉｃｅ"):
        assert memory_user_id(name) == name


def test_composed_and_decomposed_forms_stay_two_users() -> None:
    assert memory_user_id("Jos\u00e9") != memory_user_id("Jose\u0301")


def test_the_token_endpoint_refuses_the_identity_but_keeps_a_display_name_with_a_variation_selector() -> None:
    from memory.web.token_endpoint import BadRequest, token_request

    named = token_request({"participant_identity": "anna", "participant_name": "Anna \u2764\ufe0f"})
    assert named["name"] == "Anna \u2764\ufe0f"
    with pytest.raises(BadRequest, match="U\\+FE0F at 4"):
        token_request({"participant_identity": "anna\ufe0f"})
