"""Normalisation, keywords and keyword scoring (memory/language/lexical.py); no database."""

from __future__ import annotations

import pytest

from memory.language import lexical
from memory.language.lexical import EXACT, PARTIAL, SUBSTRING, analyse, keywords, lexical_score, match_level, normalise


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我喜欢的颜色是什么", "用户喜欢的颜色是什么"),
        ("你喜欢的颜色: 蓝色", "用户喜欢的颜色: 蓝色"),
        ("您的生日是五月三日", "用户的生日是5月3日"),  # numerals before a unit become digits
        ("我要去北京", "用户要去北京"),  # jieba would glue 我要 into one word: rewrite before segmenting
    ],
)
def test_chinese_pronouns_become_one_neutral_form(text: str, expected: str) -> None:
    assert normalise(text) == expected


def test_group_pronouns_self_and_greetings_are_left_alone() -> None:
    assert normalise("我们和你们，自我介绍，你好") == "我们和你们,自我介绍,你好"


def test_english_pronouns_become_user_and_users() -> None:
    assert normalise("I'm sure my sister told you") == "user is sure user's sister told user"
    assert normalise("Your dog likes me") == "user's dog likes user"
    # words that only contain a pronoun are not touched
    assert normalise("Mike is mine-sweeping in Iowa") == "mike is user's-sweeping in iowa"


def test_normalise_folds_case_and_width_and_can_keep_pronouns() -> None:
    assert normalise("ＡＢＣ１２３ Python") == "abc123 python"
    assert normalise("我喜欢", pronouns=False) == "我喜欢"


def test_english_keywords_drop_stop_words_and_question_words() -> None:
    assert keywords("What does Melanie do with her family on hikes?") == ["melanie", "family", "hikes"]
    assert keywords("What is my sister's name?") == ["user", "sister", "name"]


def test_chinese_keywords_are_segmented_without_function_words() -> None:
    assert keywords("我喜欢的颜色是什么") == ["用户", "喜欢", "颜色"]
    assert keywords("对于我使用的手机，以下哪个是最可能的描述？") == ["用户", "使用", "手机", "描述"]


def test_mixed_language_and_empty_input() -> None:
    assert keywords("编程语言偏好: Python") == ["编程语言", "偏好", "python"]
    assert keywords("") == [] and keywords("？？") == []
    assert lexical_score([], "anything") == 0.0


def test_index_text_holds_sub_words_and_stems_for_full_text_search() -> None:
    lex = lexical.index_text("编程语言偏好: Python, hiking")
    assert set(lex.split()) >= {"编程", "语言", "编程语言", "偏好", "python", "hiking", "hik"}
    assert "用户" in lexical.index_text("我喜欢蓝色").split()


def test_match_levels_exact_normalised_substring_partial() -> None:
    memory = analyse("你喜欢的颜色: 蓝色; I went hiking with my family")
    assert match_level("颜色", memory) == EXACT  # a word of the memory
    assert match_level("用户", memory) == EXACT  # only after pronoun normalisation
    assert match_level("hikes", memory) == EXACT  # only after stemming
    assert match_level("蓝", memory) == SUBSTRING  # inside a longer word
    assert match_level("颜料", memory) == PARTIAL  # only part of the keyword occurs
    assert match_level("grandfamily", memory) == PARTIAL
    assert match_level("绿色", memory) == PARTIAL  # shares 色 only
    assert match_level("编程", memory) == 0.0
    assert match_level("颜料", memory, partial=False) == 0.0


def test_first_person_question_matches_second_person_memory_fully() -> None:
    assert lexical_score(keywords("我喜欢的颜色是什么"), "你喜欢的颜色: 蓝色") == 1.0


def test_formal_you_matches_plain_you() -> None:
    assert lexical_score(keywords("你的生日"), "您的生日是五月三日") == 1.0
    without = lexical_score(keywords("你的生日", pronouns=False), "您的生日是五月三日", pronouns=False)
    assert without < 1.0


def test_a_keyword_inside_a_longer_word_gets_a_partial_score() -> None:
    score = lexical_score(keywords("编程"), "编程语言偏好: Python")
    assert score == SUBSTRING and 0 < score < 1.0


def test_score_is_the_mean_over_keywords_or_weighted_mean() -> None:
    words = ["颜色", "编程"]  # one full match, one none
    assert lexical_score(words, "你喜欢的颜色: 蓝色") == pytest.approx(0.5)
    assert lexical_score(words, "你喜欢的颜色: 蓝色", weights=[3.0, 1.0]) == pytest.approx(0.75)


def test_lex_fields_never_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(text: str, *, pronouns: bool = True) -> str:
        raise RuntimeError("segmenter broke")

    monkeypatch.setattr(lexical, "index_text", boom)
    assert lexical.lex_fields("我喜欢蓝色") == {}


def test_a_number_is_a_word_of_its_own_however_it_is_written() -> None:
    assert keywords("我身高160cm") == ["用户", "身高", "160", "cm"]
    assert keywords("I bought an iPhone13") == ["user", "bought", "iphone", "13"]
    question = keywords("谁的生日是8月3日")
    assert lexical_score(question, "我舅舅的生日是08月03日") == lexical_score(question, "我舅舅的生日是8月3日") == EXACT
    assert match_level("160", analyse("我舅舅身高160厘米")) == EXACT
    assert match_level("8", analyse("生日是18号")) == 0.0  # a number is not part of another


@pytest.mark.parametrize(
    ("question", "focus"),
    [
        ("我上司是啥职位来着？", {"职位"}),
        ("你最喜欢哪种运动", {"运动"}),  # after the measure word
        ("我同事多大年纪啊？", {"年纪"}),
        ("What colour is my car?", {"colour"}),
        ("我参观的那家医院是啥医院来着", set()),  # 医院 is also what it is about
        ("我上司是研发总监", set()),  # no question
    ],
)
def test_question_focus_is_the_word_asked_for(question: str, focus: set[str]) -> None:
    assert lexical.question_focus(question) == focus


def test_chinese_numerals_before_a_unit_match_digits() -> None:
    question = keywords("有几个人在八月份过生日？")
    assert "8" in question
    assert match_level("8", analyse("刘梓涵是我的上司，其生日是08月26日")) == EXACT
    assert keywords("规模是四千人") == keywords("规模是4000人") == ["规模", "4000", "人"]
    assert keywords("他二十五岁") == keywords("他25岁")
    assert normalise("我们一起去一个人也行有一点累") == "我们一起去一个人也行有一点累"  # no numbers there


@pytest.mark.parametrize("text", ["七十〇年", "二十零年", "十十一月"])
def test_numerals_the_converter_cannot_read_are_kept_as_written(text: str) -> None:
    # cn2an raises KeyError on these; a stored row with one used to break every look-up
    # that had it among its candidates.
    assert "七十〇年" in lexical.normalise("我生于七十〇年") and lexical.normalise(text, pronouns=False) == text
    assert lexical.analyse(text).words and lexical.keywords(text)
