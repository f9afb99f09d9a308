"""Every word a page shows exists in English and Chinese; stored text is never translated."""

from __future__ import annotations

import re
from pathlib import Path

from memory.retrieval import retriever
from memory.userdata import count_names
from memory.web import i18n

TEMPLATES = Path(i18n.__file__).parent / "templates"


def test_every_key_the_templates_use_has_both_languages() -> None:
    used = set()
    for path in TEMPLATES.glob("*.html"):
        used |= set(re.findall(r"\bt\('([a-z_:]+)'", path.read_text()))
    # Keys chosen at run time: a candidate's outcome, a place a forget counts, a chart, a login error.
    used |= {retriever.BELOW_THRESHOLD, retriever.COPY, retriever.ACKNOWLEDGEMENT, retriever.PAST_TOP_K}
    used |= set(count_names())  # every place and part a page counts, by its one name
    used |= {f"{key}_one" for key in re.findall(r"plural\('([a-z_]+)'", " ".join(
        p.read_text() for p in TEMPLATES.glob("*.html")))}  # fmt: skip
    used |= {"new_turns", "new_facts", "recalls", "archived", "too_many", "wrong_secret", "unknown_user"}
    missing = sorted(used - set(i18n.WORDS))
    assert not missing, missing
    for key, (en, zh) in i18n.WORDS.items():
        assert en.strip() and zh.strip(), key
        assert set(re.findall(r"{(\w+)}", en)) == set(re.findall(r"{(\w+)}", zh)), key  # the same fields


def test_the_language_comes_from_the_link_then_the_cookie_then_the_browser() -> None:
    assert i18n.pick_lang("zh", "en", "en-US") == "zh"
    assert i18n.pick_lang(None, "zh", "en-US") == "zh"
    assert i18n.pick_lang("fr", None, "zh-CN,zh;q=0.9") == "zh"
    assert i18n.pick_lang(None, None, None) == "en"
    t = i18n.translator("zh")
    shown = t("replaced", old="User's sister is Anna", new="用户的妹妹叫玛丽亚")
    assert shown == "“User's sister is Anna”改为“用户的妹妹叫玛丽亚”"  # stored text as written, in either language
