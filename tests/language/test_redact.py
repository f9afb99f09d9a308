"""Secrets are left out of what is remembered, and plain speech is left alone."""

from __future__ import annotations

import pytest

from memory.language.redact import MARK, redact_secrets


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        ("My card number is 4111 1111 1111 1111, expiry 12/29", "4111", "card_number"),
        ("card 5500-0000-0000-0004 please", "5500", "card_number"),
        ("and the CVV 123", "123", "code"),
        ("my password is hunter2", "hunter2", "password"),
        ('My password is "Tr0ub4dor&3".', "Tr0ub4dor&3", "password"),
        ("Please remember my bank PIN is 4711", "4711", "code"),
        ("the door code to my flat is 1234.", "1234", "code"),
        ("here's my api key sk-proj-AbCdEfGhIjKlMnOpQrSt123", "sk-proj", "key"),
        ("my SSN is 123-45-6789", "6789", "ssn"),
        ("请记住我的银行卡密码是839201", "839201", "password"),
        ("验证码：4711", "4711", "password"),
        ("门禁密码为八三九二", "八三九二", "password"),
        ("身份证号 11010519491231002X", "11010519491231002X", "id_number"),
        # as STT writes them: digits apart, "'s", a card running on into its expiry date
        ("my PIN is 4 7 1 1", "4 7 1 1", "code"),
        ("PIN 4 7 1 1", "4 7 1 1", "code"),
        ("my PIN's 4711", "4711", "code"),
        ("My password's hunter2", "hunter2", "password"),
        ("my password is sunshine", "sunshine", "password"),
        ("密码是 8 3 9 2 0 1", "8 3 9 2 0 1", "password"),
        ("my card is 4111 1111 1111 1111 12 29", "4111", "card_number"),
        # Chinese said without 是, in traditional characters, as a change, an ID in groups
        ("银行卡密码839201", "839201", "password"),
        ("验证码 4711", "4711", "password"),
        ("我的密碼是839201", "839201", "password"),
        ("驗證碼是4711", "4711", "password"),
        ("密码改成了 abc123 了", "abc123", "password"),
        ("我把密码设成了abc123", "abc123", "password"),
        ("身份证号是110105 19491231 002X", "19491231", "id_number"),
        # issue 37: the spaced SSN with no keyword in front (the look-behind ruled out the
        # space before it), and American Express numbers (prefix 34 or 37) without "card"
        ("my number is 123 45 6789", "123 45 6789", "ssn"),
        ("123 45 6789", "123 45 6789", "ssn"),
        ("Put 219 09 9999 in the field for the tax form", "219 09 9999", "ssn"),
        ("here: 3782 822463 10005", "822463", "card_number"),
        ("371449635398431 is the one on file", "371449635398431", "card_number"),
        ("it's 3400 000000 00009 if you need it", "000000", "card_number"),
    ],
)
def test_a_secret_is_replaced_and_the_rest_kept(text: str, secret: str, kind: str) -> None:
    out, kinds = redact_secrets(text)
    assert secret not in out and MARK in out
    assert kind in kinds
    assert out.split(MARK)[0] == text[: len(out.split(MARK)[0])]  # what came before it is unchanged


@pytest.mark.parametrize(
    "text",
    [
        "call me at 138 0013 8000",
        "my number is +1 415 555 0100",
        "my order number is 1234 5678 9012 3456",  # fails the card check digit
        "编号 110105194912310021",  # fails the ID check digit, and no word names it an ID
        "I was born in 1990 and moved in 2001",
        "pin the tail on the donkey is fun",
        "The pin is stuck in the door",
        "I forgot my password yesterday",
        "密码是什么来着？",
        "我的生日是1990年3月7日",
        "My sister's name is Anna",
        "My password is the same as my email address",
        "The wifi password is on the fridge",
        "Let me pin 300 photos to my board",
        "我两个账号的密码是一样的",
        "密码有8位",
        "密码学很有意思",
        "验证码发到手机了吗",
        "验证码是一次性的，用完就没了",
        # Chinese has no spaces: a long run with a digit and a Latin letter is a sentence, not a key
        "我最近在学Python3编程因为公司要求我们所有人都要掌握基本的数据分析能力，挺难的。",
        "我下周三要去北京参加一个关于AI的会议然后周五晚上8点坐飞机回上海",
        "I wrote about it at https://example.com/blog/2024/my-first-marathon-experience",
    ],
)
def test_plain_speech_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == (text, [])


def test_redacting_twice_changes_nothing_more() -> None:
    once, _ = redact_secrets("my password is hunter2 and card 4111111111111111")
    assert redact_secrets(once) == (once, [])
