"""Cues that a statement is about the user: first person, implied first person, a
relation named without another owner, an attribute, "here", a generic evaluation.

Each is a reason tag of its own (``REASONS``), so a dashboard can tell why a turn was
sent to extraction and ``bench.gate.run`` can switch one off.
"""

from __future__ import annotations

import re

from memory.language.prefilter.text import CJK, LATIN, alt, words

_FP_EN = re.compile(
    r"\b(?:i|me|my|mine|myself|we|us|our|ours|ourselves|i'm|im|i've|ive|i'd|i'll|we're|we've|we'll|we'd)\b"
)
# Formulas that contain a first-person word without saying anything about the user:
# hortative "let's", interjections ("oh my god", "my bad"), requests to the listener
# ("let me know", "tell me"), bare agreement ("me too": decided from context).
_NOT_FP_EN = re.compile(
    r"\blet's\b|\blets\b|\blet us\b|\bthe us\b|\bu\.s\.|\b(?:oh )?my (?:god|gosh|goodness|lord|word|bad|pleasure)\b"
    r"|\b(?:let|tell|show|remind|excuse|ask|send|give|teach|help|pardon) me\b|\bme (?:too|neither|either)\b"
)
_FP_ZH = re.compile(r"我|咱|俺|本人")
_NOT_FP_ZH = re.compile(r"(?:给|帮|告诉|教|请|提醒|问)我|我也是$")

# Subject-less first-person verb phrases common in speech ("Been working as a nurse").
IMPLIED_I_EN = re.compile(
    r"^(?:just |really |still |finally |actually |also |always |never |usually |currently |recently )*"
    r"(?:love|loved|hate|hated|like|liked|enjoy|enjoyed|prefer|adore|been|got|gotta|have|had|went|moved"
    r"|was (?:thinking|planning|hoping|going to|born|raised|working)"
    r"|started|starting|getting|going to|gonna|planning|trying|working|studying|living|grew up|used to"
    r"|can't wait|cannot wait|need|needed|want|wanted|wanna|work|live|lived|spent|bought|made|finished"
    r"|graduated|retired|married|divorced|born|raised|raising|teach|taught|play|played|drive|own|visited"
    r"|visiting|heading|off to|back from|stuck|busy|tired|learning|thinking of|thinking about)\b"
)

# Relations named without another owner. English: role words used as names ("Mom is
# visiting") or a definite "the kids / the dog"; bare plurals ("kids are ...") are
# generic and do not count. Chinese: kin terms, which normally drop 我的.
KIN_EN = re.compile(
    r"(?<!your )(?<!his )(?<!her )(?<!their )(?<!a )(?<!the )(?<!'s )\b(?:mom|mommy|mum|mama|dad|daddy|papa"
    r"|grandma|grandpa|granny|nana|hubby|wifey)\b"
    r"|\bthe (?:kids|kid|boys|girls|wife|husband|baby|babies|twins|family|dog|dogs|puppy|cat|cats|kitten|pets"
    r"|in-laws|folks|grandkids)\b"
)
_KIN_ZH_WORDS = words("kin_zh")
KIN_ZH = re.compile(rf"(?<![你您他她它]的)(?<![你您他她])(?:{alt(_KIN_ZH_WORDS)})")

# Attribute statements: "<someone>'s name/birthday/... is ...", "X的生日是...".
ATTRIBUTE_EN = re.compile(
    r"(?:\w's|\bhis|\bher|\btheir|\bthe) (?:\w+ )?(?:name|names|birthday|age|job|phone|number|email|address"
    r"|anniversary|favorite|favourite|wedding|appointment|flight|meeting|party|allergy)(?: \w+)?(?:'s| is| are| was)\b"
    r"|\b(?:named|called) [a-z]"
)
ATTRIBUTE_ZH = re.compile(
    r"的[\u3400-\u9fff]{1,6}(?:是|为|叫|在)|叫做|名叫|名字叫"
    r"|^(?![这那它你您])[\u3400-\u9fff]{2,3}(?:是个|是一名|是一位)[\u3400-\u9fff]"  # <name>是个医生
)

# Locative deixis: "here" in a statement is where the speaker lives or is
# ("it rains a lot here"); presentatives ("here you go") and "same here" are not.
HERE_EN = re.compile(
    r"(?<!same )(?<!right )\b(?:here|over here|out here|around here|locally)\b(?!\s+(?:is|are|you go|we go|it is))"
)

# Generic evaluations state the speaker's taste ("dogs are fun", "jazz is the best",
# "西湖真心不错"): a non-deictic subject, a copula or intensifier, an evaluative word.
_EVALUATIVE_EN = words("evaluative_en")
_EVALUATIVE_ZH = words("evaluative_zh")
GENERIC_EVALUATION_EN = re.compile(
    r"^(?!(?:that|this|it|they|he|she|you|there|what|which|who|these|those|its|it's|that's|thats|your|here)\b)"
    r"[a-z][\w' -]{0,40}?\b(?:is|are|was|were|can be|must be|seem|seems|look|looks|taste|tastes|feel|feels)\s+"
    r"(?:so |really |very |pretty |super |absolutely |just |the |a |an |quite |too |always |much |way |truly "
    r"|kind of |such )*"
    rf"(?:{alt(_EVALUATIVE_EN)})\b"
)
GENERIC_EVALUATION_ZH = re.compile(
    r"^(?![这那它你您他她])[^你您]{1,12}?(?:真心|真的|真是|确实|实在)?(?:最|真|很|挺|特别|非常|超级|超|太|蛮)"
    rf"(?:{alt(_EVALUATIVE_ZH)})"
)


def first_person(c: str) -> bool:
    if CJK.search(c) and _FP_ZH.search(_NOT_FP_ZH.sub("", c)):
        return True
    return bool(LATIN.search(c) and _FP_EN.search(_NOT_FP_EN.sub(" ", c)))
