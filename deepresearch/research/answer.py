"""A direct answer from the evidence: candidate spans typed by the question word, scored
deterministically: the answer of a run with no model (research/reader.py reads with one), and
whether the best candidate is supported (the reflect step's "sufficient").

who → names, when → dates, where → places, how many → numbers, which/what → names.
A candidate scores by the relevance of the sentence it stands in (similarity to the question
or to the hop query that found it), its closeness to the question's words there, the rank
of its passage, and how many passages support it; spans made of the question's own words
are never answers. Yes/no questions are answered from the compared entities' passages.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import TYPE_CHECKING

from deepresearch.research.evidence import cited_passages, sentence_relevance, support_text
from deepresearch.research.queries import NOT_NAMES, missing_words, names_in, new_to, query_key, stems, topic_words
from deepresearch.research.state import Candidate as Candidate  # the typed candidate, kept in the state
from deepresearch.text import YEAR, content_words, stem, words

if TYPE_CHECKING:
    from deepresearch.research.state import ResearchState, Source
PASSAGES_SCANNED = 8
MIN_ANSWER_SCORE = 0.05
SUPPORT_BONUS = 0.02
HOP_ENTITY_WEIGHT = 0.6  # a name the run already followed is a step on the way, rarely the answer
_AUX = frozenset("is are was were do does did can could has have had will would should".split())
_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_DAY_DATE = rf"{_MONTH}\s+\d{{1,2}},?\s+\d{{3,4}}|\d{{1,2}}\s+{_MONTH}\s+\d{{3,4}}"  # "June 8, 1951", "8 June 1951"
FULL_DATE = re.compile(rf"\b(?:{_DAY_DATE})\b")
DATE = re.compile(
    rf"\b(?:{_DAY_DATE}|{_MONTH}\s+\d{{3,4}}"
    r"|(?:1[0-9]|20)\d{2}s?|\d{1,2}(?:st|nd|rd|th) century)\b"
)
NUMBER = re.compile(
    r"\b\d[\d,.]*(?:\s+(?:million|billion|thousand|hundred))?\b|\b(?:one|two|three|four|five|six|seven|eight|nine|ten"
    r"|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|hundred)\b",
    re.I,
)
_ORG_WORDS = frozenset(
    "university college school company corporation records club party association award awards festival league"
    " team council church society museum river county city state street station airport film album song".split()
)
_NOT_PERSON = {
    stem(w)
    for w in (
        " ".join(_ORG_WORDS) + " united states kingdom republic island islands district atoll ocean sea"
        " mountain province empire union north south east west new"
    ).split()
}
_PLACE_CUE = re.compile(r"\b(in|at|from|near|to|outside|across|of)\s+(?:the\s+)?$", re.I)
_EARLIER = re.compile(r"\b(first|earlier|older|oldest|before|earliest|sooner)\b", re.I)
_LATER = re.compile(r"\b(later|last|younger|youngest|newer|more recent|more recently|latest|most recent)\b", re.I)


def question_type(question: str) -> str:
    """yesno | choice | number | explain | date | person | place | entity: by the first word of the sentence that asks
    (`asking_sentence`) and the question words anywhere. An auxiliary first asks yes or no, and "how" or "why" first
    asks for an explanation, unless a "which year" phrase asks for something else: a title opens the question ("Do
    Re Mi, a film by …, was released in which year?", "How to Eat, released in which year, is a book …")."""
    q = question.strip().lower()
    asking = asking_sentence(question).lower()
    first = asking.split(" ", 1)[0] if asking else ""
    if choice_options(question):
        return "choice"
    titled = _WH_PHRASE.search(q) is not None  # "Do Re Mi, …", "How to Eat, …": a title opens it
    if first in _AUX and not titled:
        return "yesno"
    if re.search(r"\bhow (many|much|long|old|tall|far|large|big|high)\b|\bwhat (number|percentage|population)\b", q):
        return "number"
    if first in ("how", "why") and not titled:
        return "explain"  # answered by the best sentences, not by a span
    if re.search(r"\bwhen\b|\b(what|which) (year|date|decade|century|month|day)\b", q):
        return "date"
    if re.search(r"\bwho(m|se)?\b", q):
        return "person"
    if re.search(
        r"\bwhere\b|\b(what|which) (city|country|state|county|town|place|region|province|nation|continent|island"
        r"|location|district|village|municipality)\b",
        q,
    ):
        return "place"
    return "entity"


# A sentence ends at a word of two letters or more (not a title, not an initial, not "U.S.") and its mark.
_TITLES = r"(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|Prof|Gen|Col|Capt|Lt|Rev|Sgt|No|Vol|vs)[.]"
_SENTENCE_END = re.compile(rf"(?<![\w.])(?!{_TITLES})\w{{2,}}[)\"'’]?[.!?]\s+(?=[A-Z])")
_ASKING_WORDS = _AUX | {"who", "whom", "whose", "what", "which", "when", "where", "why", "how"}
_WH_PHRASE = re.compile(r"\b(?:what|which) (?:year|date|decade|century|month|day)\b(?!-)")


def asking_sentence(question: str) -> str:
    """The sentence that asks: the last one when the question states something first and then asks ("The director
    X has a knighthood. Does the director Y also have one?"), else the whole question. A last piece that does not
    open with a question word or an auxiliary is not a sentence of its own ("… the town where John Q. Public was
    born?"), and a title or an initial ends none ("Where did Mr. Will Smith study?")."""
    whole = question.strip()
    ends = list(_SENTENCE_END.finditer(whole))
    last = whole[ends[-1].end() :] if ends else whole
    return last if last != whole and last.split(" ", 1)[0].lower() in _ASKING_WORDS else whole


def choice_options(question: str) -> list[str]:
    """The two named options of an either-or question (empty when there are none): "…, A or B?",
    "Which X, A or B, is …?", and, in a comparison (first, older, more, … — not "the first …"),
    "Between [two bands] A and B[,] which …?" and "… A or B?" with no comma, each option then the run
    of capitalized words that ends its side ("Which band was formed first The Exies or Circus
    Diablo?"). Quotes around an option are not part of it ("Bambi" or "Underdog")."""
    q = question.strip()
    comma = _COMMA_OPTIONS.search(q) or _MIDDLE_OPTIONS.match(q)
    between = _BETWEEN.match(q) if _COMPARATIVE.search(q) else None  # "Between …" or "In between …"
    if comma:
        options = [_unquoted(comma.group(1)), _unquoted(comma.group(2))]
    elif between:
        options = [_from_first_name(_unquoted(between.group(1))), _unquoted(between.group(2))]
        if all(o.replace(",", "").isdigit() for o in options):
            return []  # "between 1990 and 2000": a span of years, not two options
    elif (
        _COMPARES.search(q) and q.count(" or ") == 1 and q.split(" ", 1)[0].lower() in ("which", "who", "what", "whose")
    ):
        before, after = q.rstrip("? ").split(" or ")
        options = [_unquoted(_name_run(before, 1)), _unquoted(_name_run(after, 0))]
    elif q.count(" or ") == 1 and q.split(" ", 1)[0].lower() in _AUX and _SUBJECT_OPTIONS.match(q):
        # "Did Qionghai or Suining have …?", "Is the Marsilea or the Brabejum …?": the subject is one of two
        # names, so the answer is a name, not yes/no ("Can it be read over NFS or SMB?" stays yes/no)
        before, after = q.rstrip("? ").split(" or ")
        options = [_unquoted(_name_run(before, 1)), _unquoted(_leading_name(after))]
    else:
        return []
    return options if all(o[:1].isupper() or o[:1].isdigit() for o in options) else []


def _leading_name(text: str) -> str:
    """The run of capitalized words (small words inside) that opens `text` ("the Brabejum the genus …" →
    Brabejum, "The Exies formed …" → The Exies); a quoted name is read to its closing quote."""
    tokens = text.split()
    start = 1 if tokens and tokens[0] == "the" else 0
    end = start
    while end < len(tokens) and (_named(tokens[end]) or (end > start and tokens[end].lower() in _INNER_SMALL)):
        end += 1
        if tokens[end - 1][-1:] in _QUOTES:
            break  # "Underdog" older
    while end > start and tokens[end - 1].lower() in _INNER_SMALL:
        end -= 1  # a name does not end on "of" or "the"
    return " ".join(tokens[start:end])


def _named(token: str) -> bool:
    """A word that can open or carry a name: capitalized or a number, after any opening quote."""
    first = token.lstrip(_QUOTES)[:1]
    return first.isupper() or first.isdigit()


def _from_first_name(text: str) -> str:
    """`text` from its first capitalized word on ("two bands Audioslave" → Audioslave)."""
    tokens = text.split()
    start = next((i for i, t in enumerate(tokens) if _named(t)), len(tokens))
    return " ".join(tokens[start:])


def _unquoted(option: str) -> str:
    return option.strip().strip(_QUOTES).strip()


_QUOTES = "\"'“”‘’"
# "…, A or B?" (or ": A or B?"), and "Which breed, A or B, is used for hunting?"
_COMMA_OPTIONS = re.compile(r"(?:,|:)\s*(?:the\s+)?([^,?]+?)\s+or\s+(?:the\s+)?([^,?]+?)\s*\?*$")
_MIDDLE_OPTIONS = re.compile(
    r"(?i:which|who|what)\b[^,?]*,\s*(?:the\s+)?([^,?]+?)\s+or\s+(?:the\s+)?([^,?]+?)\s*,\s*[a-z][^,?]*\?\s*$"
)


# "[In] between A and B, which/who …" at the question's start (one "and" on each side: "Simon and Garfunkel
# and …" is not certain); the comma may be missing, and words before the first name are not part of it
# ("two bands Audioslave").
_BETWEEN = re.compile(
    r"(?:\w+\s+)?between\s+(?:the\s+)?((?:(?!\band\b)[^,?])+?)\s+and\s+(?:the\s+)?((?:(?!\band\b)[^,?])+?)\s*,?\s*"
    r"(?:which|who)\b",
    re.I,
)
_COMPARATIVE_WORDS = (
    r"first|last|earlier|later|older|oldest|younger|youngest|more|most|less|least|larger|largest"
    r"|bigger|smaller|longer|shorter|higher|taller|earliest|latest|newer|recently|sooner|\w+er than"
)
_COMPARATIVE = re.compile(rf"(?<![Tt]he )\b(?i:{_COMPARATIVE_WORDS})\b")  # not "the first President of …"
# "formed first The Exies", not "first president"
_COMPARES = re.compile(_COMPARATIVE.pattern + r"(?!\s+(?!the\b|an?\b)[a-z])")
# An auxiliary, then at most "the" and one common noun ("the genus"), then the first option and "or".
_CAPITALIZED = r"[\"“]?[A-Z0-9][^\s,?]*"
_SUBJECT_OPTIONS = re.compile(
    rf"\w+\s+(?:(?:the|a|an)\s+)?(?:[a-z]+\s+)?{_CAPITALIZED}(?:\s+(?:(?:of|the|de|la|von|van|der|&)\s+)*{_CAPITALIZED})*\s+or\s+"
)
_INNER_SMALL = frozenset("of the and de del la le von van der du da & for".split())


def _name_run(text: str, first: int) -> str:
    """The run of capitalized words (small words inside) that ends `text`, starting at word
    `first` at the earliest (1 on a question's own side: its opening word is no option)."""
    tokens = text.split()
    start = len(tokens)
    while start > first and (_named(tokens[start - 1]) or tokens[start - 1].lower() in _INNER_SMALL):
        start -= 1
    while start < len(tokens) and not _named(tokens[start]):
        start += 1  # a run opens on a name (or "The"), not on "of" or "the"
    return " ".join(tokens[start:])


def best_answer(state: ResearchState, passages: list[str]) -> Candidate | None:
    """The scored answer of the evidence so far: a candidate span, a yes/no, or an option."""
    kind = question_type(state.topic)
    if kind == "yesno":
        found = yes_no(state, passages)
        if found is None:
            return None
        said, lead = found
        return Candidate(said, 1.0, lead[0][0], lead[0][1], [sid for _, sid in lead], kind)
    if kind == "choice":
        return choose_option(state, passages)
    ranked = candidates(state, passages, kind)
    return ranked[0] if ranked and ranked[0].score >= MIN_ANSWER_SCORE else None


def _spans(sentence: str, kind: str) -> list[tuple[str, int]]:
    """(span, character offset) of the answer-typed spans in one sentence."""
    if kind == "date":
        return [(m.group(0), m.start()) for m in DATE.finditer(sentence)]
    if kind == "number":
        return [(m.group(0), m.start()) for m in NUMBER.finditer(sentence) if not YEAR.fullmatch(m.group(0))]
    # A date is not a name ("October 5"), whatever its capital letter.
    dates = [m.group(0) for m in DATE.finditer(sentence)]
    return [
        (name, sentence.find(name))
        for name in names_in(sentence)
        if not re.match(_MONTH, name) and not any(name in d for d in dates)
    ]


_WH = frozenset("who whom whose what which where when how".split())


def slot_words(question: str) -> set[str]:
    """Stems of the key words next to the question word ("developed by what company" → developed,
    company): the answer fills that slot, so it stands near them in the evidence."""
    tokens = words(question)
    at = next((i for i, w in enumerate(tokens) if w in _WH), None)
    if at is None:
        return set()
    window = tokens[max(0, at - 3) : at + 4]
    return {stem(w) for w in window if w not in _WH and w in set(content_words(question))}


def proximity(sentence: str, offset: int, span: str, question_stems: set[str]) -> float:
    """1 next to a question word in the sentence, falling with the distance in words; 0.3 with none there."""
    tokens = words(sentence)
    start = len(words(sentence[:offset]))
    end = start + max(1, len(words(span)))
    hits = [i for i, w in enumerate(tokens) if stem(w) in question_stems and not start <= i < end]
    if not hits:
        return 0.3
    distance = min(min(abs(i - start), abs(i - (end - 1))) for i in hits)
    return 1.0 / (1.0 + distance / 4.0)


def _type_fit(span: str, kind: str, before: str) -> float:
    """Down-weight spans that do not look like the asked type: an organisation or a place for
    "who", a name not introduced by a place preposition ("based in Columbus") for "where"."""
    span_stems = stems(span)
    if kind == "person":
        if span_stems & _NOT_PERSON or len(span.split()) > 4 or any(c.isdigit() for c in span):
            return 0.4
        return 1.0 if len(span.split()) >= 2 else 0.35  # people are rarely named by one word
    if kind in ("place", "entity") and span.lower() in NOT_NAMES:
        return 0.0
    if kind == "place":
        return 1.0 if _PLACE_CUE.search(before) else 0.5
    return 1.0


def supported(state: ResearchState) -> bool:
    """The answer slot is filled: a candidate whose passage chain (with the passages it names)
    covers every key word of the question."""
    candidate = state.candidate
    if question_type(state.topic) == "explain":
        # How/why: the cited passages together must speak to every key word of the question.
        by_sid = state.source_by_sid()
        return not missing_words(state.topic, " ".join(by_sid[sid].text for sid in cited_passages(state)))
    if candidate is None:
        return False
    if candidate.kind in ("yesno", "choice"):
        return True
    return not missing_words(state.topic, support_text(state, candidate.sid, cited_passages(state)))


def candidates(state: ResearchState, passages: list[str], kind: str | None = None) -> list[Candidate]:
    """Scored answer candidates from the given passages (best first), typed by the question."""
    kind = kind or question_type(state.topic)
    if kind in ("yesno", "choice", "explain"):
        return []
    question_stems = stems(state.topic)
    key_words = topic_words(state.topic)
    key_stems = stems(" ".join(key_words))
    slot = slot_words(state.topic)
    followed = {query_key(h.get("entity", "")) for h in state.hops.values()}
    by_sid = state.source_by_sid()
    found: dict[str, Candidate] = {}
    for position, sid in enumerate(passages[:PASSAGES_SCANNED]):
        source = by_sid[sid]
        passage_weight = 1.0 / (1.0 + 0.15 * position)
        # The answer stands where the chain of passages that led here covers the question best,
        # next to the question's words or the hop query's (the bridge entity and what it leaves open).
        missing = missing_words(state.topic, support_text(state, sid, passages))
        coverage = 1.0 - len(missing) / len(key_words) if key_words else 1.0
        anchors = question_stems | stems(source.query)
        hop_words = stems(source.query) if source.query != state.topic else set()
        wanted = key_stems | (stems(source.query) if source.query != state.topic else set())
        for sentence in source.sentences:
            words = stems(sentence.text)
            similarity = sentence_relevance(sentence, source.query != state.topic)
            for span, offset in _spans(sentence.text, kind):
                # Meaning (embedding similarity) plus wording: the share of the question's key words
                # (and the hop query's) the sentence states besides the span — "… based in Columbus".
                lexical = len((words - stems(span)) & wanted) / len(wanted) if wanted else 0.0
                relevance = similarity + lexical
                if kind not in ("date", "number") and not new_to(span, question_stems):
                    continue  # the question's own words are never its answer
                if kind in ("date", "number") and span in state.topic:
                    continue
                fit = _type_fit(span, kind, sentence.text[:offset]) * (
                    HOP_ENTITY_WEIGHT if query_key(span) in followed else 1.0
                )
                near = proximity(sentence.text, offset, span, anchors)
                if slot:
                    near = 0.4 * near + 0.6 * proximity(sentence.text, offset, span, slot | hop_words)
                value = relevance * near * passage_weight * fit * (0.5 + 0.5 * coverage)
                key = " ".join(content_words(span)) or span.lower()
                current = found.get(key)
                if current is None:
                    found[key] = Candidate(span, value, sentence.text, sid, [sid], kind)
                else:
                    if sid not in current.support:
                        current.support.append(sid)
                    if value > current.score:
                        current.text, current.score, current.sentence, current.sid = span, value, sentence.text, sid
    out = []
    for c in found.values():
        c.score = round(c.score + SUPPORT_BONUS * min(3, len(c.support) - 1), 4)
        out.append(c)
    return sorted(out, key=lambda c: -c.score)


def _passage_of(name: str, sources: list[Source]) -> Source | None:
    """The passage about `name`: its title matches, else the one naming it most often."""
    name_stems = stems(name)
    titled = [s for s in sources if s.title and stems(s.title)]
    exact = [s for s in titled if stems(s.title) == name_stems or name.lower() in s.title.lower()]
    if exact:  # "John le Carré" before "John le Carré: The Biography"
        return min(exact, key=lambda s: (s.title.lower() != name.lower(), stems(s.title) != name_stems))
    mentions = [(s.text.lower().count(name.lower()), i) for i, s in enumerate(sources)]
    best = max(mentions, default=(0, -1))
    return sources[best[1]] if best[0] else None


def _entities(question: str) -> list[str]:
    """The two compared entities of a yes/no question ("Are A and B both …")."""
    names = names_in(question[question.find(" ") + 1 :])
    if len(names) >= 2:
        return names[:2]
    match = re.match(r"^\w+\s+(.+?)\s+and\s+(.+?)\s+(?:both|the same|from|in|of|located|each)\b", question, re.I)
    if not match:
        return []
    # "Are Nantong and Jingdezhen situated in …", "Were A and The Emperor's New Groove released by the same …":
    # the verb after a name is not part of it.
    names = [match.group(1), match.group(2)]
    return [_TRAILING_LOWER.sub("", n) if re.search(r"\b[A-Z]", _TRAILING_LOWER.sub("", n)) else n for n in names]


_TRAILING_LOWER = re.compile(r"(?:\s+[a-z][\w-]*)+$")


def _first_sentence(source: Source) -> str:
    return source.sentences[0].text if source.sentences else source.text[:300]


def yes_no(state: ResearchState, passages: list[str]) -> tuple[str, list[tuple[str, str]]] | None:
    """("Yes"/"No", [(sentence, sid)…]) from the two compared entities' passages, or None: "released
    by the same X" compares the names after "released by" in their lead sentences (`_agents`), any
    other "same X" the values their lead sentences give; any other question about the two ("Are A and B both
    X?", "Did A work with B?") is Yes when both lead sentences state every predicate word, else
    undecided (None: the reader reads it)."""
    sources = [state.source_by_sid()[sid] for sid in passages]
    entities = _entities(state.topic)
    if len(entities) != 2:
        return None
    found = [_passage_of(e, sources) for e in entities]
    if any(f is None for f in found) or found[0] is found[1]:
        return None
    a, b = found[0], found[1]
    assert a is not None and b is not None
    entity_stems = stems(" ".join(entities)) | {"both", "same"}
    predicate = [w for w in stems(state.topic) if w not in entity_stems]
    lead = [_first_sentence(a), _first_sentence(b)]
    agent = _agents(state.topic, lead)
    if agent is not None:
        # Same X by a verb both lead sentences use ("released by the same company"): the names after it.
        answer = "Yes" if agent[0] & agent[1] else "No"
    elif re.search(r"\bsame\b", state.topic, re.I):
        # Same X: the values each passage gives near the predicate words must meet.
        values = []
        for sentence in lead:  # the lead sentence says what and where the subject is
            found_values = [
                v.lower() for v in names_in(sentence) if new_to(v, stems(" ".join(entities))) and not v.isupper()
            ]  # codes (IATA, ICAO) are labels, not values
            # An address runs from specific to general ("Jefferson County, New York, United States"):
            # sharing only the most general, last value is not being in the same place.
            values.append(set(found_values[:-1]) if len(found_values) > 1 else set(found_values))
        answer = "Yes" if values[0] & values[1] else "No"
    else:
        # Both X (or any other predicate): each lead sentence must carry every predicate word. One that does
        # not is no "No": the word may be missing for a synonym ("vocalist" for "singer"), so the reader reads it.
        lead_stems = [_all_stems(sentence) for sentence in lead]
        if not predicate or not all(_states_stem(w, held) for w in predicate for held in lead_stems):
            return None
        answer = "Yes"
    return answer, [(lead[0], a.sid), (lead[1], b.sid)]


# "Were A and B released by the same company?": the participle whose agent the question compares.
_BY_SAME = re.compile(r"\b([a-z]+ed)\s+by\s+(?:the\s+)?same\b", re.I)


def _agents(question: str, lead: list[str]) -> list[set[str]] | None:
    """For "Were A and B released by the same company?": the name each lead sentence gives right after
    "released by" ("… released by RKO Radio Pictures"), when both sentences have one; else None. (Only
    agents: "located in" gives places at different depths, "Mercer County" and "New Jersey".)"""
    match = _BY_SAME.search(question)
    if match is None:
        return None
    after = [re.search(rf"\b{match.group(1)}\s+by\s+(.{{0,80}})", sentence, re.I) for sentence in lead]
    named = [{v.lower() for v in names_in(m.group(1))[:1]} if m else set() for m in after]
    return named if named[0] and named[1] else None


def choose_option(state: ResearchState, passages: list[str]) -> Candidate | None:
    """For an either-or question, the option its passages decide (its own passage, found by title):
    asking which came first or later, the option whose passage's first-stated year fits; asking who
    lived longer, the longer span of the (born – died) dates its passage gives; asking which has more
    (or fewer) of a counted thing ("more studio albums", "a greater population"), the count each
    passage states of it; asking which has a property ("Which singer is American, A or B?"), the
    option whose passage states every asked word the other's does and more (ATTRIBUTE_OPTIONS).
    None when the question ranks anything else ("larger", "more popular": no passage states the
    ranking) or the passages do not decide: the run abstains (reader.READ_OPTIONS; the first
    option, printed before, was right 1 time in 4)."""
    options = choice_options(state.topic)
    sources = [state.source_by_sid()[sid] for sid in passages]
    found = [(o, _passage_of(o, sources)) for o in options]
    if not found or any(src is None for _, src in found) or found[0][1] is found[1][1]:
        return None
    texts = [src.text for _, src in found if src is not None]
    if _LIFESPAN.search(state.topic):
        pick = _by_lifespan(state.topic, texts)
    elif _EARLIER.search(state.topic) or _LATER.search(state.topic):
        pick = _by_year(state.topic, texts)
    elif measure := _MEASURE.search(state.topic):
        pick = _by_count(measure, texts)
    elif ATTRIBUTE_OPTIONS and not _RANKS.search(_THRESHOLD.sub("", state.topic)):
        pick = _by_attribute(state.topic, options, texts)
    else:
        pick = None
    if pick is None:
        return None
    option, src = found[pick]
    assert src is not None
    support = [s.sid for _, s in found if s is not None]
    return Candidate(option, 1.0, _first_sentence(src), src.sid, support, "choice")


# Decide "Which X is Y, A or B?" by the asked words each option's passage states (measured on the
# tuning reads of HotpotQA, docs/BENCHMARKS.md session 20); off, such a question abstains.
ATTRIBUTE_OPTIONS = True
_THRESHOLD = re.compile(r"\b(?:more|less|fewer)\s+than\s+\d[\d,]*", re.I)  # "more than 300 papers" is a property
# A ranking ("the greater population", "faster", "the most popular"): no passage states it, whoever names more words.
_RANKS = re.compile(
    rf"\b(?i:{_COMPARATIVE_WORDS}|(?:larg|bigg|small|great|high|tall|long|short|fast|slow|quick|heavi|light|wid"
    r"|deep|rich|poor|strong|weak|cheap|low|clos|near|busi|wealthi|hott|cold|warm)(?:er|est)|newest|better|best"
    r"|worse|worst|fewer|fewest)\b"
)  # the comparative words wherever they stand ("the larger"), and more of them


def _by_year(question: str, texts: list[str]) -> int | None:
    """The option (0 or 1) whose passage's first-stated year is the earlier (or the later) one."""
    years = []
    for text in texts:
        match = YEAR.search(text)
        years.append(int(match.group(1)) if match else None)
    if years[0] is None or years[1] is None or years[0] == years[1]:
        return None
    earlier = 0 if years[0] < years[1] else 1
    return earlier if _EARLIER.search(question) else 1 - earlier


# "Who lived longer, A or B?", "Which died younger …": decided by the (born – died) dates each passage gives.
_LIFESPAN = re.compile(r"\b(?:lived|live) longer\b|\blonger (?:life|lifespan)\b|\bdied (?:younger|older)\b", re.I)
_YOUNGER_DEATH = re.compile(r"\bdied younger\b", re.I)
_LIFE_DATE = rf"(?:{_DAY_DATE}|(?:1[0-9]|20)\d{{2}})"
_LIFE_DATES = re.compile(rf"\((?:[^()]*?[\s(])??({_LIFE_DATE})\s*[–—-]+\s*({_LIFE_DATE})\s*\)")


def _by_lifespan(question: str, texts: list[str]) -> int | None:
    """The option (0 or 1) whose passage's first (born – died) dates span longer (shorter for "died
    younger"): in days when both give full dates, else in years; None when a passage gives no such
    dates or the spans tie."""
    spans = [_life_span(text) for text in texts]
    if spans[0] is None or spans[1] is None or spans[0][1] != spans[1][1] or spans[0][0] == spans[1][0]:
        return None
    longer = 0 if spans[0][0] > spans[1][0] else 1
    return 1 - longer if _YOUNGER_DEATH.search(question) else longer


def _life_span(text: str) -> tuple[int, str] | None:
    """(length, "days" or "years") of the first (born – died) dates in `text`; both full dates give days."""
    match = _LIFE_DATES.search(text)
    if match is None:
        return None
    born, died = _as_date(match.group(1)), _as_date(match.group(2))
    if born is not None and died is not None:
        return ((died - born).days, "days") if died > born else None
    first, last = (int(YEAR.findall(match.group(i))[-1]) for i in (1, 2))
    return (last - first, "years") if last > first else None


def _as_date(text: str) -> date | None:
    """A full date ("5 June 1928", "April 12, 1908") as a date; None for a bare year."""
    text = " ".join(text.replace(",", " ").split())
    for pattern in ("%d %B %Y", "%B %d %Y"):
        try:
            return datetime.strptime(text, pattern).date()
        except ValueError:
            continue
    return None


# "Which has more studio albums / a greater population, A or B?": the counted thing follows the comparative.
_MORE = r"more|greater|larger|bigger|higher"
_FEWER = r"fewer|less|smaller|lower"
_MEASURE = re.compile(rf"\b({_MORE}|{_FEWER})\s+((?:[a-z-]+\s+){{0,2}}?(?:[a-z-]+s|population))\b", re.I)
_COUNT_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
        " seventeen eighteen nineteen twenty".split()
    )
}  # the counts passages spell out ("two studio albums"); digits are read as written
_COUNT = r"(\d[\d,]*(?:\.\d+)?(?:\s+(?:thousand|million|billion))?|" + "|".join(_COUNT_WORDS) + r")"
_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9}


def _by_count(measure: re.Match[str], texts: list[str]) -> int | None:
    """The option (0 or 1) whose passage states the larger count of the thing `measure` (a `_MEASURE` match
    of the question) names, the smaller for "fewer", "less" …; None when a passage states none or they tie."""
    counts = [_count_of(measure.group(2).lower(), text) for text in texts]
    if counts[0] is None or counts[1] is None or counts[0] == counts[1]:
        return None
    larger = 0 if counts[0] > counts[1] else 1
    return 1 - larger if re.fullmatch(_FEWER, measure.group(1).lower()) else larger


def _count_of(thing: str, text: str) -> float | None:
    """The first count `text` states of `thing`'s last word: a number just before it ("released six
    studio albums", "two albums") or just after it ("The population was 3,001"); a bare year is no count."""
    head = re.escape(thing.split()[-1])
    before = rf"\b{_COUNT}\s+(?:[\w-]+\s+){{0,2}}?{head}\b"
    verb, about = r"(?:(?:was|is|of|stood at|reached)\s+)?", r"(?:(?:about|approximately|around|nearly|over)\s+)?"
    after = rf"\b{head}\s+{verb}{about}{_COUNT}"
    found = sorted(
        (m.start(), m.group(1).lower()) for pattern in (before, after) for m in re.finditer(pattern, text, re.I)
    )
    for _, number in found:
        if number in _COUNT_WORDS:
            return float(_COUNT_WORDS[number])
        value, *scale = number.replace(",", "").split()
        if scale or "," in number or not YEAR.fullmatch(value):  # "the 2010 census population": a date, no count
            return float(value) * (_SCALE[scale[0]] if scale else 1)
    return None


def _by_attribute(question: str, options: list[str], texts: list[str]) -> int | None:
    """The option whose passage states a strict superset of the question's asked words (its own
    words but the options'): "American" and "singer" for Nick Hexum, only "singer" for Mark King."""
    asked = _all_stems(question) - _all_stems(" ".join(options))
    held = [{w for w in asked if _states_stem(w, _all_stems(text))} for text in texts]
    if held[0] > held[1]:
        return 0
    if held[1] > held[0]:
        return 1
    return None


def _all_stems(text: str) -> set[str]:
    """Stems of `text`'s words and of their hyphenated parts ("singer-songwriter": songwriter too)."""
    return stems(text) | stems(text.replace("-", " "))


def _states_stem(word: str, text_stems: set[str]) -> bool:
    """`word`'s stem is among `text_stems`, or one of five letters or more starts the other ("japan",
    "japane(se)"; not "rock", "rocket")."""
    if word in text_stems:
        return True
    return any(min(len(t), len(word)) >= 5 and (t.startswith(word) or word.startswith(t)) for t in text_stems)
