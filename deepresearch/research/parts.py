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
- a possessive: "Hello Love's performer" → "What is the performer of Hello Love?", "Damerjog's country" (a single
  noun: not "NATO's creators", "Britain's first");
- a clause with no "that" after a definite description: "the country Signmark is from", "the state the Battle of
  Mine Creek was fought";
- a participle and the name it takes: "the country containing Nugegoda", "the country premiering Prison Break".

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
# A clause runs to a question mark, a semicolon, a closing full stop or a comma — not a comma inside a number
# ("124,969") or before a capitalized word ("Johnnycake, West Virginia") — or to the main clause's "did" and its
# subject ("… the continent where X is located did the Renaissance begin?").
_CLAUSE_BODY = r"(?:(?![,?;]).|,(?=\d)|,(?=\s[A-Z]))"
_CLAUSE_STOP = r"(?=\s*(?:,(?!\d|\s[A-Z])|[?;]|\.\s*$)|\s*$|\s+(?:did|does|do)\s+(?:the|a|an|[A-Z]))"
_RELATIVE = re.compile(
    rf"\b(?:the|a) {_HEAD} (?:where|that|which|who|whose|in which|of which) {_CLAUSE_BODY}+?{_CLAUSE_STOP}"
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
# The described noun of a clause with no relative word: one to three words, none of them a function word ("the city
# where …" is a relative clause, "the story behind X" no description).
_FUNCTION = (
    r"(?!(?:of|in|on|at|by|for|to|from|with|behind|about|after|before|under|over|between|into|through|during|against"
    r"|among|like|near|as|than|within|without|where|that|which|who|whom|whose|when|the|a|an|and|or|is|was|are|were)\b)"
)
_NOUNS = rf"(?:{_FUNCTION}[a-z][\w'-]*\s){{0,2}}{_FUNCTION}[a-z][\w'-]*"
# "the city Mara Quell was born", "the country Tromsø is located in": definite (a hop names one thing).
_REDUCED = re.compile(
    rf"\bthe {_NOUNS} (?:the )?{_NAME} (?:is|was|are|were|has|had|[a-z]+ed|[a-z]+s)\b{_CLAUSE_BODY}*?{_CLAUSE_STOP}"
)
_PARTICIPLE = re.compile(rf"\bthe {_NOUNS} [a-z]+ing (?:the )?{_NAME}")
_WH = re.compile(r"\b(?:what|which|who|whom|whose|when|where|how)\b", re.I)
_STATEMENT = re.compile(r"\b(?:is|was|are|were) [A-Z]")  # "… was Chiang Kai-shek": a claim, not a description
# An auxiliary before its subject ("When did the …", "To which country was the …", "What year was the …"): a phrase
# that runs from there to the question's end holds the main verb.
_INVERTED = re.compile(
    r"(?i:\b(?:did|does|do)|\b(?:which|what|whose)\s+[a-z]+\s+(?:is|was|are|were|has|have|had)"
    r"|\b(?:when|where|how|why)\s+(?:is|was|are|were|has|have|had))(?=\s+(?:the|a|an|[A-Z]))"
)
_ADJECTIVE = re.compile(r"(?:est|first|last|second|third|own|next|only)$")  # "Germany's best selling …"
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
        (m.start(), Part(m.group(0).strip(), f"What is {m.group(0).strip()}?"), False)
        for m in [*_OF_NAME.finditer(question), *_RELATIVE.finditer(question), *_unmarked(question)]
        if not _PLACE_NAME.match(m.group(0))
    ]
    for m in _POSSESSIVE.finditer(question):  # "Did Billy Corgan's band": the name is "Billy Corgan"
        name = _OPENING.sub("", m.group(1))
        span = question[m.end(1) - len(name) : m.end()]
        found.append((m.end(1) - len(name), Part(span, f"What is the {m.group(2)} of {name}?"), _one_noun(m.group(2))))
    if not found:
        return None
    _, part, named = max(found, key=lambda f: f[0])
    if (len(part.span.split()) < MIN_PART_WORDS and not named) or part.span == question.strip().rstrip("?").strip():
        return None
    return part


def _unmarked(question: str) -> list[re.Match[str]]:
    """The clauses with no relative word and the participle phrases of `question` that describe one thing: no
    question word inside, no "X was Name" statement, and not the subject of an auxiliary running to the end."""
    out = []
    for m in [*_REDUCED.finditer(question), *_PARTICIPLE.finditer(question)]:
        to_end = not question[m.end() :].strip(" ?.")
        inverted = any(aux.end() <= m.start() for aux in _INVERTED.finditer(question))
        if _WH.search(m.group(0)) or _STATEMENT.search(m.group(0)) or (to_end and inverted):
            continue
        out.append(m)
    return out


def _one_noun(word: str) -> bool:
    """A possessive's single noun that names one thing ("country", "performer"): not a plural or an adjective."""
    return not word.endswith("s") and not _ADJECTIVE.search(word)


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
    """Whether the rewritten question only asks what `answer` is ("What is Guyana?"): the part was the question."""
    asks = rf"(?:who|what|which)\s+(?:is|was|are|were)\s+{re.escape(answer)}\s*\?"
    return re.fullmatch(asks, question.strip(), re.I) is not None
