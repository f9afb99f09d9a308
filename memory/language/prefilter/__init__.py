"""Gatekeeper stage 1: a cheap local pre-filter for the GATED write path.

Why it exists
-------------
In GATED mode every completed user turn is a candidate memory, but most voice
traffic is chit-chat. An LLM extraction call per turn costs money and tokens, so
this pre-filter (regular expressions only: no model, no network, tens of
microseconds) decides first:

* ``FORCE``   the user explicitly asks to be remembered ("remember that ...",
              "please remember", "don't forget", 请记住, 帮我记住, 记住, 别忘了). The
              turn still goes to the LLM to be canonicalised, but the write is forced.
* ``SKIP``    nothing durable can be in it: empty text, greetings, acknowledgements,
              thanks and fillers, reactions to what the assistant said, pure
              questions, stance-only remarks ("I hope so", 我会试试), and English
              statements that do not refer to the user at all.
* ``EXTRACT`` anything that might carry a durable fact goes to the LLM.

The costs are asymmetric: a wrong SKIP loses a fact for good, a wrong EXTRACT costs
one LLM call that returns nothing. The rules therefore SKIP only what they positively
recognise as transient, and were tuned on the dev data as a whole for recall of
durable turns first (>= .95 on msc_gate.realistic) and skip rate second.

How a turn is read
------------------
1. Normalise: NFKC (full-width punctuation to ASCII), curly quotes, lower case.
2. Explicit "remember this" requests FORCE (clause-initial imperatives only, so
   "I remember ...", "do you remember ...?" and 你还记得吗 do not).
3. Split into sentences and comma sub-clauses; drop leading fillers ("um, well",
   嗯, 那个) and trailing vocatives (", friend", 朋友). A sub-clause is a *question*
   when it is interrogative in form (wh-word + auxiliary, auxiliary + subject,
   吗/什么/谁/哪 ...) or closes a sentence that ends in "?" (unless it is a first-person
   statement said with rising intonation). Voice transcripts often lack "?", hence the
   form test. A run-on tail question ("I love dogs what about you?") is split off, so
   "I just moved to Berlin, any tips?" keeps its statement; a transcript with no
   punctuation at all is also broken before a first-person subject ("do you like the
   farm i grew up there").
4. A leading *stance frame* is dropped and only its complement is tested: "I hope",
   "I bet", "I'm sorry", "I'd love to", "I'll try", "we could", 我明白, 我会试试 say
   nothing durable about the user ("I hope you win" vs "I hope my son wins").
   *Opinion* frames ("I think", "I feel like", 我觉得) are kept as opinions.
5. A declarative sub-clause discloses (EXTRACT, reason = the cue) when it has
   - ``first_person_statement``: I/me/my/we/our, 我/咱/俺 (not "let's", "oh my god",
     "tell me", "me too", 给我/帮我: formulas, not self-reference);
   - ``implied_first_person``: a subject-less verb phrase typical of speech
     ("been working as a nurse", "just got back from Rome");
   - ``relation_mention``: a relation named without another owner ("Mom is
     visiting", "the kids", 舅舅: Chinese leaves 我的 out before kin terms);
   - ``attribute_statement``: "her name is Anna", "X的生日是...", "X的地点是...";
   - ``speaker_location``: locative "here" ("it rains a lot here");
   - ``opinion``: an opinion frame or a generic evaluation with a non-deictic
     subject ("dogs are fun", "西湖真心不错"): preferences are durable.
6. Context (``context[-1]`` is the turn just before, normally the assistant's):
   - ``answer_to_question``: the assistant asked something ("?", 吗, or for an
     unpunctuated turn a wh-word / "do you"); a contentful declarative reply is an
     answer about the user even without "I" ("Seventeen", "Paris"), and so is a bare
     yes/no to a yes-no question about the user ("Do you have kids?" -> "Yes");
   - ``about_relation``: it mentioned "your <someone>" and the user goes on with
     he/she/they ("Your daughter sounds lovely" -> "She just started school");
   - ``agreement``: "me too" / "same here" / 我也是 after the other side disclosed.
   - ``correction`` / ``change``: the grammar of correcting ("correction:", "I meant",
     "scratch that", 不对, 说错了, "not X, Y") or of changing ("got moved to", "is on
     Sunday now", "no longer", 改到, 推迟, 不再) with no first-person word needed; a change
     must refer back (a definite subject or a word of the earlier turns), else it is
     SKIP ``unanchored_change`` and the gatekeeper checks it against stored facts.
7. Chinese drops the subject 我 freely, so a substantive Chinese statement that is
   not a reaction, advice or general-knowledge phrasing defaults to EXTRACT
   (``default``). English statements with no cue SKIP (``no_self_reference``).
8. Otherwise SKIP with the most specific reason: ``empty``, ``greeting``, ``ack``,
   ``pure_question``, ``stance``, ``reaction``, ``generic_statement``,
   ``no_self_reference``.

Measured with ``python -m bench.gate.run --cv 5`` (dev files; docs/gatekeeper.md has the
per-fold table): msc_gate.realistic recall .970 / skip .558 (keyword baseline .576 /
.807), every held-out fold >= .958 / .547; msc_gate.balanced .956 / .566; zh_gate.smoke
1.000 / .717; 50-100 us a call (p50) on a loaded 2-core machine.
With all punctuation removed (a raw transcript) realistic stays at .946 / .579.
What is still missed is mostly label noise (facts annotated for turns that do not
state them) or facts only recoverable with the whole conversation.

All tables below are general linguistic classes (pronouns, auxiliaries, stance verbs,
kin terms, greeting and thanks formulas), English and Chinese side by side; none is
a list of phrases taken from the evaluation items.
"""

from memory.language.prefilter.decision import REASONS, GateAction, GateDecision
from memory.language.prefilter.formulas import is_acknowledgement
from memory.language.prefilter.repair import anchored_in
from memory.language.prefilter.rules import cues, fired_rules, prefilter
from memory.language.prefilter.text import MAX_CHARS, normalise

__all__ = [
    "GateAction",
    "GateDecision",
    "prefilter",
    "normalise",
    "is_acknowledgement",
    "REASONS",
    "MAX_CHARS",
    "anchored_in",
    "cues",
    "fired_rules",
]
