"""Issue 53: secrets said the way speech-to-text writes them, generated (hypothesis):
digits as English words ("four four seven one", "double four", "triple seven", "oh"),
Chinese numerals (幺, 两, 〇, 三个六), spaced and dashed digit groups, letters spelled one
by one; each is redacted in what is stored, the words around it kept. Look-alikes a user
wants remembered (prices, dates, phone numbers, counts said as words) are left alone.
Expected values come from the generated digits, never from the module under test."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.language.redact import MARK, redact_secrets
from memory.language.spoken import spoken_digits

EN = "zero one two three four five six seven eight nine".split()
ZH = {
    "0": "零〇",
    "1": "一幺",
    "2": "二两",
    "3": "三",
    "4": "四",
    "5": "五",
    "6": "六",
    "7": "七",
    "8": "八",
    "9": "九",
}
# The same examples on every run (derandomize): a property test that found a new case by
# chance would fail one CI run in many; new cases are looked for on purpose, not in CI.
SETTINGS = settings(
    max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

digits = st.text(alphabet=string.digits, min_size=4, max_size=8)


@st.composite
def said_in_english(draw: st.DrawFn, value: str) -> str:
    """`value` said digit by digit: a separator between digits, "oh" for some zeros,
    "double"/"triple" for some repeats."""
    words: list[str] = []
    i = 0
    while i < len(value):
        d = value[i]
        run = 1
        while i + run < len(value) and value[i + run] == d and run < 3:
            run += 1
        word = "oh" if d == "0" and draw(st.booleans()) else EN[int(d)]
        if run >= 2 and draw(st.booleans()):
            words.append(("double " if run == 2 else "triple ") + word)
            i += run
            continue
        words.append(word)
        i += 1
    sep = draw(st.sampled_from([" ", ", ", " - ", " "]))
    return sep.join(words)


@st.composite
def said_in_chinese(draw: st.DrawFn, value: str) -> str:
    chars = [draw(st.sampled_from(ZH[d])) for d in value]
    if draw(st.booleans()):  # said in groups, as people read a number out
        cut = draw(st.integers(min_value=2, max_value=len(chars) - 2))
        return "".join(chars[:cut]) + " " + "".join(chars[cut:])
    return "".join(chars)


def _gone(out: str, said: str) -> bool:
    return said not in out and MARK in out


@SETTINGS
@given(st.data(), digits)
def test_english_digit_words_become_the_digits_and_the_pin_is_redacted(data: st.DataObject, value: str) -> None:
    said = data.draw(said_in_english(value))
    form = spoken_digits(f"my PIN is {said}, thanks")
    assert form.text.replace("-", "").replace(" ", "").startswith(f"myPINis{value}")
    out, kinds = redact_secrets(f"my PIN is {said}, thanks")
    assert out == f"my PIN is {MARK}, thanks", (said, out)
    assert kinds


@SETTINGS
@given(st.data(), digits)
def test_chinese_numerals_become_the_digits_and_the_code_is_redacted(data: st.DataObject, value: str) -> None:
    said = data.draw(said_in_chinese(value))
    assert value in spoken_digits(f"验证码是{said}").text.replace("-", "")
    out, _ = redact_secrets(f"验证码是{said}，别告诉别人")
    assert out == f"验证码是{MARK}，别告诉别人", (said, out)


@SETTINGS
@given(digits, st.sampled_from([" ", "-"]))
def test_spaced_and_dashed_single_digits_are_one_number(value: str, sep: str) -> None:
    said = sep.join(value)
    assert spoken_digits(f"the door code is {said} ok").text == f"the door code is {value} ok"
    assert redact_secrets(f"the door code is {said} ok")[0] == f"the door code is {MARK} ok"


@SETTINGS
@given(st.sampled_from("0123456789"), st.sampled_from([2, 3]))
def test_double_and_triple_repeat_a_digit(d: str, times: int) -> None:
    word = {2: "double", 3: "triple"}[times]
    text = f"cvv {word} {EN[int(d)]} {EN[int(d)] if times == 2 else ''}".strip()
    want = d * times + (d if times == 2 else "")
    assert want in spoken_digits(text).text
    assert _gone(redact_secrets(text)[0], EN[int(d)])


@SETTINGS
@given(st.text(alphabet=string.ascii_uppercase + string.digits, min_size=5, max_size=10).filter(
    lambda v: any(c.isdigit() for c in v) and any(c.isalpha() for c in v)))  # fmt: skip
def test_letters_spelled_one_by_one_are_one_word(value: str) -> None:
    said = " ".join(value)
    assert value in spoken_digits(f"wifi password is {said}").text
    out, _ = redact_secrets(f"the wifi password is {said}")
    assert value[-3:] not in out.replace(" ", "") and MARK in out


@SETTINGS
@given(st.data())
def test_a_recovery_phrase_of_list_words_is_redacted(data: st.DataObject) -> None:
    from mnemonic import Mnemonic

    words = Mnemonic("english").wordlist
    phrase = " ".join(data.draw(st.lists(st.sampled_from(words), min_size=12, max_size=12)))
    out, kinds = redact_secrets(f"here is my wallet backup: {phrase}")
    assert out == f"here is my wallet backup: {MARK}", out
    assert "recovery_phrase" in kinds or "password" in kinds


def test_a_recovery_phrase_that_repeats_a_function_word_is_redacted() -> None:
    # Found by the property above: a draw may repeat a listed word that speech uses ("hello").
    out, _ = redact_secrets("here is my wallet backup: " + "abandon " * 7 + "hello hello hello hello hello")
    assert out == f"here is my wallet backup: {MARK}", out


@SETTINGS
@given(st.sampled_from(["security word", "memorable word", "secret word"]),
       st.sampled_from(["Marmalade", "tiptoe", "blue harbour", "Okonkwo"]))  # fmt: skip
def test_a_security_word_is_redacted(name: str, value: str) -> None:
    out, _ = redact_secrets(f"my {name} is {value}.")
    assert out == f"my {name} is {MARK}.", out


@SETTINGS
@given(st.text(alphabet=string.digits, min_size=6, max_size=8))
def test_a_one_time_code_with_no_keyword_is_redacted(value: str) -> None:
    for text in (f"they texted me {value} to log in", f"it just popped up, {' '.join(EN[int(d)] for d in value)}"):
        out, _ = redact_secrets(text)
        assert value not in out and MARK in out, out


@SETTINGS
@given(st.text(alphabet=string.digits, min_size=9, max_size=9))
def test_tax_and_travel_document_numbers_are_redacted(value: str) -> None:
    for text in (f"my tax ID number is {value}", f"my visa number is {value}", f"港澳通行证号码是 C{value[:8]}",
                 f"我的税号是 {value}ABC"):  # fmt: skip
        out, _ = redact_secrets(text)
        assert value[:6] not in out and MARK in out, out


# ----------------------------------------------------------------- look-alikes
@SETTINGS
@given(st.integers(min_value=2, max_value=99), st.integers(min_value=100, max_value=9999))
def test_prices_and_counts_said_as_words_are_left_alone(n: int, price: int) -> None:
    from text_to_num import alpha2digit  # noqa: F401  (the library reads them; the text must not change)

    said = {2: "two", 3: "three", 21: "twenty one", 45: "forty five"}.get(n, str(n))
    for text in (f"I have {said} kids and {said} cats", f"the flight cost {price} dollars",
                 f"it costs twenty three dollars and {price} cents", f"we walked {price} steps today"):  # fmt: skip
        assert redact_secrets(text)[0] == text


@SETTINGS
@given(st.integers(min_value=1, max_value=28), st.sampled_from(["March", "June", "October"]),
       st.integers(min_value=1990, max_value=2030))  # fmt: skip
def test_dates_are_left_alone(day: int, month: str, year: int) -> None:
    for text in (f"my birthday is {month} {day}, {year}", f"we met on {day}/{month[:3]}/{year}",
                 f"我生日是{year}年{day % 12 + 1}月{day}日", f"the meeting moved to {year}-06-{day:02d}"):  # fmt: skip
        assert redact_secrets(text)[0] == text


@SETTINGS
@given(st.text(alphabet=string.digits, min_size=10, max_size=10))
def test_a_phone_number_to_remember_is_left_alone(number: str) -> None:
    spoken = ", ".join(" ".join(EN[int(d)] for d in part) for part in (number[:3], number[3:6], number[6:]))
    for text in (f"remember my sister's number, {number[:3]} {number[3:6]} {number[6:]}",
                 f"my mum's phone number is {spoken}", f"call the dentist on {number[:3]}-{number[3:6]}-{number[6:]}",
                 f"我妈的手机号是 {number[:3]} {number[3:7]} {number[7:]}"):  # fmt: skip
        assert redact_secrets(text)[0] == text, text


def test_the_stored_text_keeps_the_words_around_the_secret() -> None:
    assert redact_secrets("ok so my pin is four four seven one, and my dog is Rex")[0] == (
        f"ok so my pin is {MARK}, and my dog is Rex"
    )
    assert redact_secrets("银行卡密码是幺三八两九零，别忘了")[0] == f"银行卡密码是{MARK}，别忘了"


@SETTINGS
@given(st.integers(min_value=1900, max_value=2099), st.sampled_from(["uh", "um"]), st.booleans())
def test_a_pin_like_a_year_read_out_after_a_filler_is_redacted(value: int, filler: str, as_words: bool) -> None:
    said = ", ".join(EN[int(d)] for d in str(value)) if as_words else str(value)
    out, _ = redact_secrets(f"pin code for the card, {filler}, {said}")
    assert out == f"pin code for the card, {filler}, {MARK}", out
    born = f"I was born in, {filler}, {value}"
    assert redact_secrets(born)[0] == born


@SETTINGS
@given(st.text(alphabet=string.digits, min_size=9, max_size=9), st.sampled_from(["ITIN", "EIN", "tax id"]))
def test_spaced_digit_groups_with_dashes_between_are_one_number(value: str, name: str) -> None:
    said = " - ".join(" ".join(part) for part in (value[:3], value[3:5], value[5:]))
    assert spoken_digits(f"my {name} is {said}").text == f"my {name} is {value[:3]}-{value[3:5]}-{value[5:]}"
    out, _ = redact_secrets(f"my {name} is {said}")
    assert out == f"my {name} is {MARK}", out


@SETTINGS
@given(st.text(alphabet=string.digits, min_size=10, max_size=10))
def test_a_phone_number_read_in_spaced_groups_is_left_alone(number: str) -> None:
    said = " - ".join(" ".join(part) for part in (number[:3], number[3:6], number[6:]))
    text = f"call my brother on {said}"
    assert redact_secrets(text)[0] == text


@SETTINGS
@given(st.data(), digits)
def test_the_map_back_gives_what_was_said(data: st.DataObject, value: str) -> None:
    said = data.draw(said_in_english(value))
    text = f"well {said} is it"
    form = spoken_digits(text)
    assert len(form.pieces) == 1
    piece = form.pieces[0]
    start, end = form.to_original(piece.at, piece.at + len(piece.digits))
    assert text[start:end] == said
    assert form.text[: piece.at] == "well " and form.text[piece.at + len(piece.digits) :] == " is it"


# ----------------------------------------------------------------- more purpose forms (second pass)
NAMES = st.sampled_from(["Kowalski", "Mr Patel", "Hillcrest", "Buttons", "Okonkwo", "Rover"])


@SETTINGS
@given(st.text(alphabet=string.digits, min_size=4, max_size=4), st.booleans(), st.sampled_from(["social", "SSN"]))
def test_the_last_four_of_a_social_are_redacted(value: str, as_words: bool, name: str) -> None:
    said = " ".join(EN[int(d)] for d in value) if as_words else value
    out, _ = redact_secrets(f"the last four of my {name} are {said}")
    assert out == f"the last four of my {name} are {MARK}", out


@SETTINGS
@given(NAMES, st.sampled_from(["secret question", "security question"]))
def test_the_answer_after_its_question_is_redacted_not_the_question(value: str, name: str) -> None:
    out, _ = redact_secrets(f"the {name} is my first school and the answer is {value}")
    assert value not in out and out.endswith(MARK), out


@SETTINGS
@given(NAMES, st.sampled_from(["which the bank asks for", "the one for my card", "for account security"]))
def test_a_maiden_name_with_what_it_opens_said_between_is_redacted(value: str, between: str) -> None:
    out, _ = redact_secrets(f"my mum's maiden name, {between}, is {value}")
    assert value not in out and out.endswith(MARK), out


@SETTINGS
@given(NAMES, st.sampled_from(["one of my security answers", "my security answer", "among the security answers"]))
def test_an_answer_said_before_its_security_question_is_redacted(value: str, tail: str) -> None:
    out, _ = redact_secrets(f"my first pet was {value}, that's {tail}")
    assert value not in out and MARK in out, out


@SETTINGS
@given(NAMES, st.sampled_from(["for the security question", "for my bank's security question", "as my secret answer"]))
def test_an_answer_said_just_before_for_the_security_question_is_redacted(value: str, tail: str) -> None:
    out, _ = redact_secrets(f"I told them my favourite place is {value} {tail}")
    assert value not in out and MARK in out, out


@SETTINGS
@given(NAMES, st.sampled_from(["the name of my first school", "my first pet", "the street I grew up on"]),
       st.sampled_from(["which is my security answer", "the bank question", "one of my security answers"]))  # fmt: skip
def test_an_answer_whose_purpose_is_said_in_between_is_redacted(value: str, asked: str, between: str) -> None:
    out, _ = redact_secrets(f"{asked}, {between}, is {value}")
    assert value not in out and out.endswith(MARK), out


@SETTINGS
@given(st.text(alphabet=string.digits, min_size=4, max_size=4), st.sampled_from(["ssn", "social", "social security"]))
def test_the_digits_a_social_ends_in_are_redacted(value: str, name: str) -> None:
    said = " ".join(EN[int(d)] for d in value)
    out, _ = redact_secrets(f"my {name} ends in {said}")
    assert out == f"my {name} ends in {MARK}", out


@SETTINGS
@given(st.text(alphabet=string.digits, min_size=9, max_size=9), st.sampled_from(["it's", "um, it's", "uh"]))
def test_a_passport_number_a_few_words_after_its_name_is_redacted(value: str, filler: str) -> None:
    said = " ".join(EN[int(d)] for d in value)
    out, _ = redact_secrets(f"my passport number, {filler} {said}")
    assert out == f"my passport number, {filler} {MARK}", out


@SETTINGS
@given(st.text(alphabet=string.digits, min_size=9, max_size=9), st.booleans())
def test_an_employer_id_number_is_redacted(value: str, as_words: bool) -> None:
    said = " ".join(EN[int(d)] for d in value) if as_words else f"{value[:2]}-{value[2:]}"
    out, _ = redact_secrets(f"the employer id number is {said}")
    assert out == f"the employer id number is {MARK}", out


@SETTINGS
@given(st.text(alphabet=string.digits, min_size=9, max_size=9), st.sampled_from(["number is", "no. is", "number"]))
def test_a_passport_number_read_out_in_groups_is_redacted(value: str, said: str) -> None:
    out, _ = redact_secrets(f"passport {said} {value[:3]} {value[3:6]} {value[6:]}")
    assert out == f"passport {said} {MARK}", out


@SETTINGS
@given(st.integers(min_value=1, max_value=12), st.integers(min_value=25, max_value=35))
def test_a_card_expiry_read_digit_by_digit_is_redacted(month: int, year: int) -> None:
    said = f"{month // 10} {month % 10} / {year // 10} {year % 10}"
    out, _ = redact_secrets(f"the card expires {said}")
    assert out == f"the card expires {MARK}", out


@SETTINGS
@given(st.text(alphabet=string.digits, min_size=4, max_size=4), NAMES, st.integers(min_value=10, max_value=59))
def test_look_alikes_of_the_second_pass_are_left_alone(value: str, name: str, minute: int) -> None:
    for text in (f"the last four digits of my phone are {value}", f"the last four of my card are {value}",
                 f"my mum's maiden name is {name}, she grew up in Leeds", "it was a great trip, that's my answer",
                 f"passport photo appointment is at 10 {minute}", f"I finish at 11 / {minute} tonight",
                 f"my favourite place is {name} for the holidays", f"my employer id badge says {name}",
                 f"my son, which is my whole world, is {name}", f"my son, the bank manager, is {name}",
                 f"the meeting ends in {value} seconds",
                 f"call the passport office on 0300 {value} 000"):  # fmt: skip
        assert redact_secrets(text)[0] == text, text
