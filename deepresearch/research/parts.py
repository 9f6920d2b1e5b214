"""A multi-hop question split by its own wording, so that a small model reads it one hop at a time.

"In which county is the city where Harris W. Fawell was born?" asks two things: which city that is,
then its county. A 1.5B reader given the whole question over the evidence of both hops often answers
with the middle entity or a fact of the wrong one, and asked to plan the hops itself it makes
unusable plans (docs/BENCHMARKS.md, session 15). Here the question's last describing noun phrase is
the first part, read as a one-hop question:

- a relative clause: "the city where Harris W. Fawell was born", "a team that was formed in 1990",
  "the county in which Leland, North Carolina is located";
- "the N of Name": "the performer of Decade", "the producer of The Jewel of the Nile" (not a
  place's own name: "the village of Clonbrook", "the city of Leeds");
- a possessive: "Hello Love's performer" → "What is the performer of Hello Love?".

Its answer is written into the question in the phrase's place ("In which county is West
Chicago?"), and the next part is looked for, at most MAX_PARTS times. A phrase that is the subject
of "did/does/do" and runs to the question's end holds the main verb ("When did the team that won
the 1959 final win the cup?"): the question keeps its words, and the answer is added in
parentheses. This module only splits and rewrites; `reader.read_in_parts` reads and gates.
"""

from __future__ import annotations

import re
from typing import NamedTuple

MAX_PARTS = 3  # parts read before the rest of the question (MuSiQue asks at most four hops)
MIN_PART_WORDS = 3  # "the band" alone names nothing to look up

_HEAD = r"(?:[a-z][\w'-]*\s){0,2}[a-z][\w'-]*"  # the described noun, lower case, with up to two modifiers
# A relative clause runs to a question mark, a semicolon, a closing full stop or a comma — not a comma inside a number
# ("124,969") or before a capitalized word ("Johnnycake, West Virginia").
_RELATIVE = re.compile(
    rf"\b(?:the|a) {_HEAD} (?:where|that|which|who|whose|in which|of which) "
    r"(?:(?![,?;]).|,(?=\d)|,(?=\s[A-Z]))+?(?=\s*(?:,(?!\d|\s[A-Z])|[?;]|\.\s*$)|\s*$)"
)
# A name: capitalized words, and between them the small words titles and names hold ("The Jewel of the Nile",
# "Bastien und Bastienne", "Haymo of Faversham").
_LINK = r"(?:of|the|and|und|de|del|la|le|les|von|van|der|den|y|du|des|da|a|an)"
_NAME = rf"[A-Z0-9\"'][^\s,?]*(?:\s(?:{_LINK}\s)*[A-Z\"'][^\s,?]*)*"
_OF_NAME = re.compile(rf"\bthe {_HEAD} of {_NAME}")
_POSSESSIVE = re.compile(
    r"\b((?:[A-Z0-9][\w'.-]*\s){0,4}[A-Z0-9][\w.-]*)['’]s "
    r"((?:(?:main|current|first|former|home|national|original|birth) )?[a-z][\w-]*(?: of (?:birth|death|origin))?)\b"
)
_OPENING = re.compile(r"^(?:Did|Does|Do|Is|Was|Were|Are|Has|Have|Had|When|What|Who|Where|Which|How|In|On|At|Of)\s")
_PLACE_NAME = re.compile(
    r"^the (?:village|city|town|county|state|country|river|island|province|district|region|kingdom|republic|lake"
    r"|mount) of "
)
_DO_BEFORE = re.compile(r"\b(?:did|does|do)\s*$", re.I)


class Part(NamedTuple):
    """A phrase of the question (`span`, as the question writes it) and the one-hop question that asks for it."""

    span: str
    question: str


def first_part(question: str) -> Part | None:
    """The part of `question` to read first: its last describing noun phrase, asked as "What is …?"; None when
    the question has none (a one-hop question), or when that phrase is the whole question."""
    found = [
        (m.start(), Part(m.group(0).strip(), f"What is {m.group(0).strip()}?"))
        for m in [*_OF_NAME.finditer(question), *_RELATIVE.finditer(question)]
        if not _PLACE_NAME.match(m.group(0))
    ]
    for m in _POSSESSIVE.finditer(question):  # "Did Billy Corgan's band": the name is "Billy Corgan"
        name = _OPENING.sub("", m.group(1))
        span = question[m.end(1) - len(name) : m.end()]
        found.append((m.end(1) - len(name), Part(span, f"What is the {m.group(2)} of {name}?")))
    if not found:
        return None
    part = max(found, key=lambda f: f[0])[1]
    if len(part.span.split()) < MIN_PART_WORDS or part.span == question.strip().rstrip("?").strip():
        return None
    return part


def answered(question: str, part: Part, answer: str) -> tuple[str, bool]:
    """The question with the part answered, and whether it is now whole (no part left to split off). The answer
    takes the phrase's place — except when the phrase is the subject of "did/does/do" and runs to the question's
    end ("When did the team that won the 1959 final win the cup?"): the main verb is inside it, so the question
    keeps its words and the answer is added in parentheses ("… win the cup (Nottingham Forest)?")."""
    at = question.find(part.span)
    tail = question[at + len(part.span) :].strip()
    if at >= 0 and tail in ("", "?", ".") and _DO_BEFORE.search(question[:at]):
        return f"{question.rstrip().rstrip('?.').rstrip()} ({answer})?", True
    return question.replace(part.span, answer), False


def only_asks(question: str, answer: str) -> bool:
    """Whether the rewritten question only asks what `answer` is ("What is Guyana?", "Name Mary Stanley?"): the
    part was the question. What a comma sets off after the answer describes it, or the name the part was read for,
    and asks nothing more: "What was aviator, whose life was featured in …?", "Name Mary Stanley, 4th Baron
    Stafford, who was the daughter of …?", "What is 100, the maximum nesting depth of shell functions?"."""
    asks = rf"(?:(?:who|what|which)\s+(?:is|was|are|were)|name)\s+{re.escape(answer)}\s*(?:[?.]?\s*$|,)"
    return re.match(asks, question.strip(), re.I) is not None
