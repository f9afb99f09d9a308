"""Issue 30, finding 9: redaction covers the phrasings that got through (an IBAN, a card
failing its check digit, codes and combinations after their keyword, "use X as the
password", a short API key, a short JWT, "Hunter two"), every rule is needed (take it out
and a probe gets through: the bare-SSN and key-after-keyword rules among them), and the
plain speech people want remembered stays as it was said."""

from __future__ import annotations

import pytest

from bench.privacy.hostile_probes import PLAIN_SAID, SECRETS_HELD_OUT, SECRETS_ISSUE30, SECRETS_SAID
from memory.language.redact import MARK, redact_secrets

# Each rule with sentences that only it catches: take the rule out and one gets through.
ONLY_THIS_RULE: dict[str, list[tuple[str, str]]] = {
    "url_password": [
        ("the db is postgres://admin:S3cretPa55@db.internal:5432/app", "S3cretPa55"),
        ("mysql://root:Abc@123@10.0.0.2:3306/crm", "Abc@123"),
    ],
    "id_document": [("passport no. 912803456", "912803456"), ("我的护照号码 G12345678", "G12345678")],
    "credentials": [("user admin pass Admin@2020", "Admin@2020"), ("creds are bob / Harbor", "Harbor")],
    "zh_card_code": [("信用卡背面的安全码 7 2 6", "7 2 6")],
    "zh_password_in_clause": [("支付密码是生日后六位 880315", "880315")],
    "card_shape": [
        ("card is 4111.1111.1111.1111 if you need it", "4111.1111.1111.1111"),
        ("here: 5500 0000 0000 0004", "5500 0000 0000 0004"),
    ],
    "card_after_keyword": [
        ("my card number is 4111 1111 1111 1112", "1111 1111 1112"),
        ("我的信用卡号是 4111 1111 1111 1112", "1111 1111 1112"),
    ],
    "iban": [
        ("send it to GB82 WEST 1234 5698 7654 32 please", "WEST 1234 5698"),
        ("NL91ABNA0417164300", "ABNA0417164300"),
    ],
    "cn_id": [("put 11010519491231002X on the form", "11010519491231002X")],
    "cn_id15": [("我的身份证号是110105491231002", "110105491231002")],
    "cn_id_after_keyword": [("我的身份证是 11010119900307781 1", "11010119900307781")],
    "ssn_after_keyword": [("my SSN is 123456789", "123456789"), ("social security number 123 45 6789", "123 45 6789")],
    "ssn_shape": [("Put 219-09-9999 in the field for the tax form", "219-09-9999")],
    "pem_private_key": [("-----BEGIN RSA PRIVATE KEY----- MIIEowIBAAKCAQEA7x end", "MIIEowIBAAKCAQEA7x")],
    "jwt": [
        ("here's the JWT: eyJhbGciOiJIUzI1NiJ9.e30.ZRrHA1JJJW8opsbCGfG_HACGpVUMN_a9IV7pAx_Zmeo", "eyJhbGciOiJIUzI1NiJ9")
    ],
    "key_shape": [
        ("here is the secret: AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ("sk-proj-AbCdEfGhIjKlMnOpQrSt123456 works", "AbCdEfGhIjKlMnOp"),
    ],
    "key_after_keyword": [
        ("api key is abc123def456", "abc123def456"),
        ("the WPA key on the router sticker is 8B2F9C1D7E", "8B2F9C1D7E"),
        ("我的阿里云AccessKey是 LTAI5tQ9Zx8Wv7Yu6Ts5", "LTAI5tQ9Zx8Wv7Yu6Ts5"),
        ("the API token: 7f3a9c2e1b4d8f60", "7f3a9c2e1b4d8f60"),
    ],
    "passphrase": [("my passphrase is correct horse battery staple", "horse battery staple")],
    "password_after_keyword": [
        ("my password is sunshine", "sunshine"),
        ("the password for my bank is Quokka", "Quokka"),
    ],
    "password_bare": [("the router password 83920145 in case you need it", "83920145")],
    "use_as_password": [("use sunshine as the password", "sunshine"), ("sunshine is my password", "sunshine")],
    "pass_word": [("the pass is hunter2", "hunter2")],
    "security_answer": [("The answer to my security question is Fluffy", "Fluffy"), ("密保问题的答案是小花", "小花")],
    "code_after_keyword": [
        ("the code is 4711", "4711"),
        ("my bank PIN is 4711", "4711"),
        ("my backup codes: 5521-0098, 7713-4420", "7713-4420"),
        ("the key safe by the door is 2 2 5 9", "2 2 5 9"),
    ],
    "combination": [("safe combination is 12-34-56", "12-34-56")],
    "account_after_keyword": [
        ("the account number is 12345678", "12345678"),
        ("account 55779911", "55779911"),
        ("routing 011000015", "011000015"),
        ("收款账户 6217 0010 2003 4456", "6217 0010 2003 4456"),
    ],
    "zh_password_after_keyword": [
        ("门禁密码为八三九二", "八三九二"),
        ("我的密码是 correct horse battery", "horse battery"),
        ("微信密码我用的是 wx_Happy", "wx_Happy"),
    ],
    "zh_password_bare": [("验证码 836 219，帮我记一下", "836 219"), ("银行卡密码839201", "839201")],
    "zh_lock_code": [("门禁的码是 3 3 9 1", "3 3 9 1"), ("保险柜组合 18-04-27", "18-04-27")],
    "password_like_token": [
        ("the password's just my dog's name plus 99, Biscuit99", "Biscuit99"),
        ("my Gmail password? Sunflower#7", "Sunflower#7"),
    ],
}


def test_every_rule_has_its_probes() -> None:
    from memory.language.secret_rules import RULES

    assert set(ONLY_THIS_RULE) == {r.name for r in RULES}
    assert len({r.name for r in RULES}) == len(RULES)


@pytest.mark.parametrize("name", sorted(ONLY_THIS_RULE))
def test_each_rule_is_needed_take_it_out_and_a_secret_gets_through(name: str) -> None:
    from memory.language.secret_rules import RULES

    without = tuple(r for r in RULES if r.name != name)
    for text, secret in ONLY_THIS_RULE[name]:
        out, kinds = redact_secrets(text)
        assert secret not in out and MARK in out and kinds, (name, out)
    assert any(secret in redact_secrets(text, without)[0] for text, secret in ONLY_THIS_RULE[name]), name


@pytest.mark.parametrize(("text", "secret"), SECRETS_ISSUE30 + SECRETS_SAID + SECRETS_HELD_OUT)
def test_secrets_as_callers_say_them_are_redacted(text: str, secret: str) -> None:
    out, kinds = redact_secrets(text)
    assert secret not in out and kinds, out


NEAR_MISSES = [
    "My PIN is the one I always use",
    "the code is on the back of the box",
    "my password is too long to remember",
    "We need to pass 3 exams this year",
    "My account is 5 years old",
    "Key West is 160 miles from Miami",
    "The key to success is practice",
    "I changed my password to something easier",
    "my password was weak so I changed it",
    "my password is case-sensitive",
    "call me on 0151 234 5678",
    "My card number? I do not have it with me",
    "the answer to my question is yes",
    "my secret is that I love 80s music",
    "I live at 221B Baker Street",
    "my login is my email address",
    "the pass was 2500 metres high",
    "Password managers cost 3 dollars a month",
    "My employee ID number is 4471",
    "密码是我生日",
    "我的卡号忘记了",
    "我的门禁卡坏了，码是多少来着",
    "token 是什么意思",
    "my password manager is 1Password",
    "密码过期时间是 2024年5月1日",
    "支付密码是六位数字",
    "account 2 of 3 is the joint one",
    "my account has 1200 followers",
    "the account was opened in 2015",
    "my routing number is on the cheque",
    "postgres://localhost:5432/dev is the local db",
    "the invite came from https://maria@calendar.example.com/invite",
    "my driver's license expires in 2026",
    "the backup codes are in the drawer",
]


@pytest.mark.parametrize("text", PLAIN_SAID + NEAR_MISSES)
def test_plain_speech_near_the_keywords_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == (text, [])


def test_a_spoken_password_keeps_its_number_words_and_stops_before_the_sentence_goes_on() -> None:
    assert redact_secrets("my password is Hunter two")[0] == f"my password is {MARK}"
    assert redact_secrets("I changed my password to Bluebird77 yesterday")[0] == (
        f"I changed my password to {MARK} yesterday"
    )


def test_an_iban_needs_its_check_digits() -> None:
    assert redact_secrets("DE89 3704 0044 0532 0130 00")[0] == MARK
    assert redact_secrets("DE88 3704 0044 0532 0130 00")[1] == []  # one check digit off: not an IBAN


def test_every_secret_of_a_long_turn_is_redacted() -> None:
    text = ("my password is " + "a1" * 5000 + " and the code is 4711. ") * 20
    out, kinds = redact_secrets(text)
    assert "4711" not in out and "a1a1" not in out and len(kinds) >= 40


def test_a_value_may_hold_an_exclamation_or_question_mark_and_a_space_may_come_before_a_chinese_verb() -> None:
    # Issue 40: "!" inside a typed password ended the value there ("[redacted]!99" kept
    # the rest), and "CVV2 是 228" (a space before 是) was not taken for a card's code.
    assert redact_secrets("user admin pass Kite!99")[0] == f"user admin pass {MARK}"
    assert redact_secrets("my password is Tangerine!4 ok")[0] == f"my password is {MARK} ok"
    assert redact_secrets("my password is hunter2! thanks")[0] == f"my password is {MARK}! thanks"
    assert redact_secrets("CVC2 是 517")[0] == f"CVC2 是 {MARK}"
