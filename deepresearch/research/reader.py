"""The answer step: the model reads the best evidence and answers in a few words, citing the
passages it rests on; the answer is kept only when the evidence states it.

The reader sees the best passages of the run's pool (their best sentences, within a token
budget, under short ids S1…S8) and returns `{"answer", "sources"}` through a JSON schema.
Kept: a span the cited passages state (after SQuAD-style normalization; a span another
retrieved passage states is cited from that one; a name read shorter than the evidence writes
it, as the evidence writes it) with the shape the question asks for (a name, not the command's page, when it
asks for an option or a variable), yes/no for a yes/no question. Anything else is rejected, and so is a span made
only of the question's own words.
Yes/no and either-or questions are compared first; an either-or question the comparison does
not decide is not read (READ_OPTIONS). With `research.read_parts`, a question whose wording names a hop ("the
country where X is located") is read one hop at a time first (`read_in_parts`, research/parts.py), and with
`research.search_parts` the question with each part's answer written in is searched before the next part is read;
if any part is rejected, or the chain is unsure, the question is still read whole, but that reading is not the answer
(READ_AFTER_BROKEN_CHAIN): its sentence is shown as the closest one. Without a kept reading (no model, or rejected) the
scored extractive candidate answers — only when it is confident; otherwise the run abstains and the report says the
evidence does not state the answer directly.
"""

from __future__ import annotations

import dataclasses
import math
import re
import string
import unicodedata
from typing import TYPE_CHECKING, Any, NamedTuple

from deepresearch.models.base import field_logprobs
from deepresearch.research import answer as answers
from deepresearch.research import parts, prompts, steps
from deepresearch.research.evidence import (
    best_sentences,
    cited_passages,
    index_sources,
    key_weights,
    name_of,
    question_share,
    ranked_pool,
    sentence_score,
)
from deepresearch.research.model_io import ask, ask_reply
from deepresearch.research.queries import new_to, searched_before, stems, topic_words
from deepresearch.text import content_words

if TYPE_CHECKING:
    from deepresearch.research.deps import Deps, RunContext
    from deepresearch.research.state import ResearchState

READER_PASSAGES = 8
CHARS_PER_TOKEN = 4  # English text in the Qwen/SmolLM2/Gemma tokenizers: ~4 characters a token
READER_MAX_TOKENS = 48  # {"answer": a few words, "sources": up to three ids}
ANSWER_MAX_CHARS = 80
_PUNCT = set(string.punctuation) | {"‘", "’", "“", "”", "–", "—"}
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD normalization (lower case, no punctuation, no articles, single spaces), accents folded."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    text = "".join(" " if c in _PUNCT else c for c in text)
    return " ".join(_ARTICLES.sub(" ", text).split())


def states(span: str, text: str) -> bool:
    """True when `text` contains `span` as whole words, after normalization."""
    needle = normalize_answer(span)
    return bool(needle) and f" {needle} " in f" {normalize_answer(text)} "


def reader_evidence(state: ResearchState, passages: list[str], budget_tokens: int) -> list[tuple[str, str, str, str]]:
    """(id S1…, sid, title, text) of the best passages, each cut to its best sentences so the
    whole fits `budget_tokens`: every passage's best sentence first (in rank order), then its
    lead sentence, then the next best ones, round-robin; kept sentences read in their order."""
    by_sid = state.source_by_sid()
    weights = key_weights(state)
    picks: list[tuple[int, int, str, int]] = []
    for rank, sid in enumerate(passages[:READER_PASSAGES]):
        source = by_sid[sid]
        order = sorted(
            range(len(source.sentences)), key=lambda i: -sentence_score(state, source, source.sentences[i], weights)
        )
        if order and 0 in order:  # the lead sentence says what the passage is about
            order.remove(0)
            order.insert(min(1, len(order)), 0)
        picks += [(turn, rank, sid, i) for turn, i in enumerate(order)]
    budget = budget_tokens * CHARS_PER_TOKEN
    kept: dict[str, list[int]] = {}
    for _, _, sid, i in sorted(picks):
        source = by_sid[sid]
        cost = len(source.sentences[i].text) + 1 + (0 if sid in kept else len(source.title) + 8)
        if cost <= budget:
            budget -= cost
            kept.setdefault(sid, []).append(i)
    out: list[tuple[str, str, str, str]] = []
    for sid in [s for s in passages if s in kept]:
        source = by_sid[sid]
        text = " ".join(source.sentences[i].text for i in sorted(kept[sid]))
        out.append((f"S{len(out) + 1}", sid, source.title, text))
    return out


def _full_text(state: ResearchState, sid: str) -> str:
    source = state.source_by_sid()[sid]
    return f"{source.title}. {source.text}"


def _sentence_with(state: ResearchState, sid: str, span: str) -> str:
    """The passage's sentence that states `span` (its best sentence if none does)."""
    source = state.source_by_sid()[sid]
    for sentence in source.sentences:
        if states(span, sentence.text):
            return sentence.text
    return source.sentences[0].text if source.sentences else source.text[:300]


def check_reading(data: Any, state: ResearchState, evidence: list[tuple[str, str, str, str]]) -> dict[str, Any] | None:
    """The reader's answer if the evidence supports it (see the module docstring), else None."""
    if not isinstance(data, dict) or not isinstance(data.get("answer"), str):
        return None
    text = data["answer"].strip().strip(".,;:").strip()  # a span cut from a sentence keeps no dangling mark
    text = _DISAMBIGUATION.sub("", text)  # "Geet (1944 film)": a page title's disambiguation is not the name
    if text[:1].islower() and len(text.split()) > 3:
        text = text[0].upper() + text[1:]  # a clause read as the answer opens like a sentence
    ids = [i for i in data.get("sources") or [] if isinstance(i, str)]
    local = {pid: sid for pid, sid, _, _ in evidence}
    cited = [local[i] for i in dict.fromkeys(ids) if i in local]
    kind = answers.question_type(state.topic)
    norm = normalize_answer(text)
    if not norm or len(text) > ANSWER_MAX_CHARS:
        return None
    if kind == "yesno" or norm in ("yes", "no"):
        if kind != "yesno" or norm not in ("yes", "no"):
            return None
        return {"text": norm.capitalize(), "kind": kind, "sids": cited, "method": "reader"}
    shape = asked_shape(state.topic)
    if kind == "choice":
        options = answers.choice_options(state.topic)
        option = next((o for o in options if normalize_answer(o) == norm or states(text, o) or states(o, text)), None)
        if option is None:
            return None
        text = option
    elif SHAPE_CHECK and shape == "identifier":
        text = the_identifier(text, state.topic)
        if not text:
            return None
    elif written_by_question(text, state.topic):
        return None  # the question's own words are never its answer
    elif SHAPE_CHECK and not (fits_question(text, shape) and counts_fit(text, state.topic)):
        return None
    pool = [sid for _, sid, _, _ in evidence] + [s.sid for s in state.sources]
    text, where = where_stated(state, text, cited, pool)
    if not where:
        return None
    sids = where + [sid for sid in cited if sid not in where]
    sentence = _sentence_with(state, where[0], text)
    return {
        "text": full_date(text, sentence, state.topic),
        "kind": kind,
        "sids": sids,
        "method": "reader",
        "sentence": sentence,
    }


def written_by_question(span: str, question: str) -> bool:
    """A span made only of the question's words that the question writes as it stands (or one word of
    it); its scattered words joined into a name are not ("Vilnius Old Town" for "… old towns … Vilnius …"), nor is
    an identifier that joins them ("SQLITE_CONFIG_MUTEX" for "… sqlite3_config() … custom mutex …"): a word is
    counted as `states` reads it, after normalization (a possessive's "s" is no word: "country's" is one)."""
    if new_to(span, stems(question)):
        return False
    return states(span, question) or len([w for w in normalize_answer(span).split() if w != "s"]) < 2


# A trailing "(film)", "(1944 film)", "(American band)", "(TV series)" — not "(2021-03-12)" or "(1,110 mm)".
_DISAMBIGUATION = re.compile(r"\s+\((?:\d{4}\s+)?(?:[A-Z][\w.]*\s+)?[a-z][a-z\s-]*\)$")


def where_stated(state: ResearchState, text: str, cited: list[str], pool: list[str]) -> tuple[str, list[str]]:
    """(the span, the passages that state it): the cited ones, else the first of the pool (another
    retrieved passage, cited instead); a name read shorter than the evidence writes it ("G. Hall"
    for "G. Stanley Hall") is taken as the evidence writes it, when only one such name is there."""
    texts = {sid: _full_text(state, sid) for sid in dict.fromkeys(cited + pool)}
    where = [sid for sid in cited if states(text, texts[sid])]
    if not where:
        where = [sid for sid in dict.fromkeys(pool) if states(text, texts[sid])][:1]
    if where:
        return text, where
    found = {sid: longer_names(text, full) for sid, full in texts.items()}
    names = {name for spans in found.values() for name in spans}
    if len(names) != 1:
        return text, []
    return names.pop(), [sid for sid, spans in found.items() if spans][:1]


def longer_names(span: str, text: str) -> set[str]:
    """The names in `text` that hold every word of the capitalized `span` in order with at most
    MAX_NAME_GAP more capitalized words among them ("G. Hall" → "G. Stanley Hall")."""
    tokens = span.split()
    if len(tokens) < 2 or not all(t[:1].isupper() for t in tokens):
        return set()
    gap = rf"(?:\s+[A-Z][\w.'’-]*){{0,{MAX_NAME_GAP}}}?\s+"
    pattern = r"(?<![\w.])" + gap.join(re.escape(t) for t in tokens) + r"(?![\w\-])"  # not half of "Hall-Smith"
    return {m.group(0) for m in re.finditer(pattern, text) if len(m.group(0).split()) - len(tokens) <= MAX_NAME_GAP}


MAX_NAME_GAP = 2  # a middle name or two, an initial


def full_date(text: str, sentence: str, question: str) -> str:
    """A "when" question read as a bare year: the one full date of that year its sentence states
    ("1951" → "8 June 1951"); a "what year" question, or a sentence with no or two such dates, keeps the year."""
    if not re.fullmatch(r"\d{3,4}", text) or not re.match(r"(?:in |by )?when\b", question.strip().lower()):
        return text
    dates = {m.group(0) for m in answers.FULL_DATE.finditer(sentence) if re.search(rf"\b{text}$", m.group(0))}
    return dates.pop() if len(dates) == 1 else text


SHAPE_CHECK = True
_MONTHS = re.compile(answers._MONTH, re.I)
_CAPITALIZED = re.compile(r"(?:^|\s)[(\"'‘“]?[A-Z0-9]")


_HEAD_SHAPES = (
    (re.compile(r"^(?:in |by |since |until )?(?:when\b|(?:what|which) (?:year|date|decade|century)\b)"), "date"),
    (re.compile(r"^(?:in |by )?how (?:many|much)\b"), "number"),
    (re.compile(r"^(?:who|whom|whose)\b"), "person"),
    (re.compile(r"^(?:where)\b"), "place"),
)


# Asked after the question's head ("… a team that was formed in what year?", "… Italy entered when?", "… a city
# with a population of what in 2010?"): a wh-phrase that asks for a date or a number wherever it stands.
_TAIL_SHAPES = (
    (re.compile(r"\b(?:what|which) (?:year|date|decade|century)\b|\bwhen\s*\W*$"), "date"),
    (re.compile(r"\bhow (?:many|much)\b|\bpopulation (?:of|in|was|is) what\b|\bwhat percent(?:age)?\b"), "number"),
)


def asked_shape(question: str) -> str:
    """The answer's shape the question asks for (date, number, person, place, identifier): an identifier when a
    which/what phrase names one (`asks_identifier`; "When listing tags, which config variable …" asks no date), else
    from the words that open the sentence that asks (`answer.asking_sentence`; a "who" or "when" inside a clause,
    "the player who …", asks nothing), else from a wh-phrase asking for a date or a number anywhere ("… formed in
    what year?") — not in a question that opens with "what" or "which": it asks for what its own noun names ("Which
    sqldiff option shows how many rows changed?" asks for an option)."""
    low = " ".join(question.strip().lower().split())
    head = " ".join(answers.asking_sentence(question).lower().split()[:4])
    if asks_identifier(question):
        return "identifier"
    found = next((shape for pattern, shape in _HEAD_SHAPES if pattern.search(head)), "")
    if found or re.match(r"(?:what|which)\b", head):
        return found
    return next((shape for pattern, shape in _TAIL_SHAPES if pattern.search(low)), "")


def fits_question(text: str, kind: str) -> bool:
    """Whether a span has the shape the question asks for: a date or year for when/what year, a
    number for how many/much, a name (a capitalized word, no verb) for who/where; other shapes any span."""
    if kind == "date":
        return bool(answers.DATE.search(text) or re.search(r"\d", text) or _MONTHS.search(text))
    if kind == "number":
        return bool(answers.NUMBER.search(text))
    if kind in ("person", "place"):  # a name, not a clause ("X is a town in …" answers no "who")
        return bool(_CAPITALIZED.search(text)) and not _CLAUSE.search(text)
    return True


_CLAUSE = re.compile(r"\b(?:is|are|was|were|has|have|had)\b")


# What documentation asks a name for: "Which git blame option …", "Which config variable …", "…, which pragma …" —
# a which/what phrase whose noun (within five words, no verb among them: "what does X print … variable" asks no
# variable) is one an identifier answers. Not "key" or "setting": "What key is the symphony in?", "Which setting …"
# ask for words in general questions.
_IDENTIFIER_NOUNS = r"option|flag|switch|variable|directive|parameter|pragma|argument"
_ASKS_IDENTIFIER = re.compile(rf"(?:^|[,;:]\s+)(?:which|what)\s+((?:\S+\s+){{0,4}}?)(?:{_IDENTIFIER_NOUNS})s?\b", re.I)
_AUXILIARIES = frozenset("is are was were does do did can could should must will would has have had be".split())
_MANUAL_PAGE = re.compile(r"\(\d\w*\)$")  # "git-config(1)": a manual page's name, not what it documents
_SIGIL = ("-", "<", "$")  # "--staged", "<IfVersion>", "$sm_path"


def asks_identifier(question: str) -> bool:
    """Whether the question asks for an option, a variable, a directive, a parameter or the like by name."""
    found = _ASKS_IDENTIFIER.search(question)
    return found is not None and not _AUXILIARIES & set(found.group(1).lower().split())


def _words(text: str) -> set[str]:
    """Lower-cased words split at every mark, unlike `text.words`: "git-ls-files" is git, ls, files."""
    return {w for w in re.split(r"[^0-9a-z]+", text.lower()) if w}


def the_identifier(text: str, question: str) -> str:
    """The identifier a span names for a question that asks for one (`asks_identifier`), or "" when it names none.
    A name is one token ("blame.showRoot", "SQLITE_DETERMINISTIC", "FileInfo") or an option with its argument
    ("-s timeout"). From a longer span the one option is taken when the rest is the question's words ("git log
    --first-parent" for "Which git log option …"), and a span's "the … switch" is dropped. Not a name: a clause
    ("Show the commit subjects …"), a manual page ("git-blame(1)"), a number ("-1"), or the command the question
    names, written as one word ("git-ls-files" for "Which git ls-files option …"). An option is compared as
    written: one the question spells out is its own words ("--set-upstream" for "… assume --set-upstream …"), one
    it writes as words is not ("--first-parent" for "… the first-parent chain"); any other name is the question's
    own words as `written_by_question` reads them ("REINDEX" for "Which reindexdb options … reindexing?")."""
    span = re.sub(rf"^the\s+|\s+(?:{_IDENTIFIER_NOUNS})$", "", text.strip(), flags=re.I)
    tokens = span.split()
    asked = _words(question)
    if len(tokens) > 1 and not span.startswith(_SIGIL):
        options = [t for t in tokens if t.startswith(_SIGIL)]
        rest = [t for t in tokens if not t.startswith(_SIGIL)]
        if len(options) != 1 or not all(_words(t) <= asked for t in rest):
            return ""
        span, tokens = options[0], [options[0]]
    if re.search(rf"(?<![\w-]){re.escape(span)}(?![\w-])", question, re.I):
        return ""  # the question writes it
    if not re.search(r"[A-Za-z]", span):
        return ""
    if span.startswith(_SIGIL):
        return span if len(tokens) <= 3 else ""
    if _MANUAL_PAGE.search(span) or written_by_question(span, question):  # one token by now
        return ""
    if not re.search(r"[._=/]", span) and _words(span) <= asked:
        return ""
    return span


_BARE_NUMBER = re.compile(r"^[\d.,\s%$€£]+$")
_ASKS_QUANTITY = re.compile(
    r"\b(?:when|how|number|population|percent(?:age)?|year|date|age|score|rank(?:ed)?|total|amount|size|height|length"
    r"|capacity|area|episode|season|edition|decade|century|time|record|many|much|long|old|tall|far"
    # what documentation asks a number for: a version, a value, a limit, a share
    r"|version|release|value|default|limit|maximum|minimum|threshold|count|share|rate|ratio|proportion|fraction"
    r"|coverage|port|code)\b",
    re.I,
)


def counts_fit(text: str, question: str) -> bool:
    """A bare number answers only a question that asks for a quantity, a time or a rank."""
    return not _BARE_NUMBER.match(text) or bool(_ASKS_QUANTITY.search(question))


def extractive_answer(state: ResearchState, passages: list[str]) -> dict[str, Any]:
    """The scored candidate (or yes/no, or option) when it is confident, else an abstention."""
    if answers.question_type(state.topic) == "explain":
        return {"text": None, "kind": "explain", "sids": [], "method": "sentences"}  # how/why: the best sentences
    found = answers.best_answer(state, passages) if passages else None
    if found is None or not confident(found):
        if found is None:
            return {**abstention(), "score": None, "closest": None}
        closest = [found.sentence, found.sid] if found.sentence else None
        return {**abstention(found.text), "score": found.score, "closest": closest}
    sids = list(dict.fromkeys([found.sid, *found.support]))
    out = {
        "text": found.text,
        "kind": found.kind,
        "sids": sids,
        "method": "extractive",
        "score": found.score,
    }
    if found.kind != "yesno":
        out["sentence"] = found.sentence or _sentence_with(state, found.sid, found.text)
    return out


def confident(found: answers.Candidate) -> bool:
    """Whether the scored answer may be printed as the answer: only for the question types it
    gets right more often than not, a yes/no or one of two named options. Its spans were
    right 14 times in 73 on the tuning questions (HotpotQA and MuSiQue 0–39), and no score
    threshold separated the right ones, so a span question with no reading abstains."""
    return found.kind in TRUSTED_KINDS


TRUSTED_KINDS = ("yesno", "choice")


def abstention(guess: str | None = None) -> dict[str, Any]:
    """No supported answer: the report says so and shows the closest sentences instead."""
    return {"text": None, "kind": "", "sids": [], "method": "abstained", "unconfirmed": guess}


def read(
    state: ResearchState, run: RunContext, evidence: list[tuple[str, str, str, str]]
) -> tuple[dict[str, Any] | None, Any]:
    """(the reader's kept answer or None, its raw output) for the question over `evidence`. A reading the evidence
    supports is still dropped when the model was unsure of it: its answer's tokens' geometric-mean probability
    under `research.reader_min_confidence` (kept readings carry it as "confidence", a dropped one in the raw output)."""
    if not evidence:
        return None, None
    raw: dict[str, Any] = {}

    def keep(data: Any, extra: dict[str, Any]) -> dict[str, Any] | None:
        raw["data"] = data
        reading = check_reading(data, state, evidence)
        sure = answer_confidence(extra)
        if reading is None or sure is None:
            return reading
        if sure < state.options.reader_min_confidence:
            raw["data"] = {**data, "confidence": sure}
            return None
        return {**reading, "confidence": sure}

    messages = prompts.reader_messages(state.topic, [(pid, title, text) for pid, _, title, text in evidence])
    schema = prompts.reader_schema([pid for pid, _, _, _ in evidence], ANSWER_MAX_CHARS)
    return ask_reply(run, state, "answer", messages, schema, keep, READER_MAX_TOKENS), raw.get("data")


def answer_confidence(extra: dict[str, Any]) -> float | None:
    """The geometric-mean probability the model gave the tokens of its "answer" (None: the backend gives none)."""
    logprobs = field_logprobs(extra.get("token_logprobs") or [], "answer")
    return round(math.exp(sum(logprobs) / len(logprobs)), 4) if logprobs else None


# Yes/no and either-or questions: the deterministic comparison answers when it can, the model
# only when it cannot (on HotpotQA 0–19 the comparison was right 5 times in 6, the model 2).
COMPARISONS_FIRST = True
# An either-or question the passages do not decide ("Which plant is larger, A or B?") is not
# read: the model's pick of one of the two names is checked against nothing, and on the 4 such
# questions of HotpotQA 0–89 it picked right 0 times (the better-ranked option, before, 1): abstain.
READ_OPTIONS = False


# A how/why question is answered by the evidence's best sentences, not read: on six how/why
# questions over the shipped sample corpus the reader's span was right once ("BM25"), wrong twice
# (a page title; a date for "why"), rejected three times — ~20 s of model time each
# (docs/BENCHMARKS.md, session 24). The eval sets hold one such question in ~470.
READ_EXPLAIN = False


# A question whose wording names a hop, whose chain broke (a part or the last reading rejected or unsure, or the chain
# unsure as a whole), is still read whole, but that reading is not printed as the answer: the run abstains and shows
# the reading's sentence as the closest one. On the three fresh MuSiQue sets read before (215 questions) those
# readings were right 4 times and wrong 31 (7 partly right); on the registered fresh read, mq-dev8 (135), 3 right
# and 20 wrong; on HotpotQA train 0–99, 3 right, 3 wrong and 1 partly — so it costs HotpotQA's F1 its 0.50 target
# there (docs/BENCHMARKS.md, session 30). True keeps them as answers, as before.
READ_AFTER_BROKEN_CHAIN = False


class Chain(NamedTuple):
    """What reading in parts gave: the final reading (None: no chain held), the state update of the parts' searches,
    whether the chain was tried and broke (not: the question does not split, or a part was answered with a name the
    question writes, so the phrase read was no hop), the hops read (not the final reading) and the question of the
    part that got no sure answer."""

    found: dict[str, Any] | None
    update: dict[str, Any]
    broke: bool
    read: list[dict[str, Any]]
    stuck: str = ""

    @property
    def hops(self) -> list[str]:
        """The answers of the hops read: a whole reading that names one answers with a step of the chain."""
        return [part["answer"] for part in self.read]


NO_CHAIN = Chain(None, {}, False, [])


def answer(state: ResearchState, deps: Deps, run: RunContext) -> dict[str, Any]:
    """The run's short answer: for a how/why question the best sentences (READ_EXPLAIN); for a
    yes/no or either-or question the comparison of the passages
    when it answers (an either-or question it does not decide abstains: READ_OPTIONS); otherwise
    the chain read in parts when it holds (`read_in_parts`), else the model's reading of the whole question when
    the evidence supports it (with a hop read if `research.second_read`) — not when it names the answer of one of
    the failed chain's hops: the question asks what that name leads to ("the spouse of the director of X" read as
    the director); nor when the chain broke (READ_AFTER_BROKEN_CHAIN) — else the confident extractive answer, else
    an abstention, which shows a reading not kept as its closest sentence. The hop's search joins the run's pool
    (sources, hops)."""
    passages = cited_passages(state)
    kind = answers.question_type(state.topic)
    if (kind == "explain" and not READ_EXPLAIN) or (kind in TRUSTED_KINDS and COMPARISONS_FIRST):
        # how/why: the best sentences; yes/no, either-or: the comparison of the passages
        compared = extractive_answer(state, passages)
        if compared.get("text") or kind == "explain" or (kind == "choice" and not READ_OPTIONS):
            run.progress("answer", text=compared["text"], method=compared["method"])
            return {"short_answer": compared}
    chain = NO_CHAIN
    if state.options.read_parts and kind not in TRUSTED_KINDS and passages and run.model_for("answer") is not None:
        chain = read_in_parts(state, deps, run, passages)
        if chain.found is not None:
            run.progress("answer", text=chain.found["text"], method=chain.found["method"])
            return {"short_answer": chain.found, **chain.update}
    evidence = reader_evidence(state, passages, state.options.reader_tokens) if passages else []
    reading, raw = read(state, run, evidence)
    dropped = None
    if reading is not None and any(is_entity(reading["text"], hop) for hop in chain.hops):
        raw, dropped = {**raw, "hop_answer": reading["text"]}, reading  # a step of the question's chain, not its end
    elif reading is not None and chain.broke and not READ_AFTER_BROKEN_CHAIN:
        raw, dropped = {**raw, "chain_broke": reading["text"]}, reading  # read whole, the hops it skipped unchecked
    reading = None if dropped else reading
    update: dict[str, Any] = {}
    if wants_hop(state, run, reading):
        reading, update = with_hop(state, deps, run, evidence, reading)
    found = reading or extractive_answer(state, passages)
    if dropped is not None and found.get("text") is None and dropped.get("sentence"):
        found = {**found, "closest": [dropped["sentence"], dropped["sids"][0]]}  # where the reading stands
    if chain.broke and chain.read and found.get("text") is None:  # how far the chain went, for the report
        found = {**found, "parts_read": chain.read, "stuck": chain.stuck}
    if raw is not None and reading is None:
        found = {**found, "reader_rejected": raw}
    run.progress("answer", text=found.get("text"), method=found["method"])
    return {"short_answer": found, **update}


def read_in_parts(state: ResearchState, deps: Deps, run: RunContext, passages: list[str]) -> Chain:
    """The question read one hop at a time (`parts`): its last describing phrase read first as a one-hop question
    over evidence chosen again for it, the checked answer written into the question in its place, and so on; then
    the rest of the question; an answer the question itself names is no hop's answer (the phrase read was not a hop)
    and ends the chain. With `research.search_parts`, each rewritten question is also searched (it names the
    hop's answer, which the question's own searches did not know), its best passages read first by the next part.
    The `Chain`: the final reading, citing every part's passages, with `parts` — each part's question, answer,
    passages and confidence — and the state update of the parts' searches; no reading when the question does not
    split, when a part or the final reading is rejected or unsure, or when the chain as a whole is unsure — the
    product of its parts' confidences (the chance that every hop is right) under `research.reader_min_confidence` —
    and the whole question is then read as one, over the run's own passages (`broke` says which). A part after the
    first reads only the passages that name the hop before it (`naming_hop`); none naming it breaks the chain. Also
    the answers of the hops read (not the last reading's): a whole reading that names one answers with a step of the
    chain, and is not kept (`answer`)."""
    question, work = state.topic, state
    done: list[dict[str, Any]] = []
    for _ in range(parts.MAX_PARTS):
        part = parts.first_part(question)
        if part is None:
            break
        reading = read_part(work, run, naming_hop(work, passages, done), part.question)
        if reading is None or states(reading["text"], state.topic):
            return Chain(None, {}, reading is None, done, part.question)
        done.append(_part(part.question, reading))
        question, whole = parts.answered(question, part, reading["text"])
        if parts.only_asks(question, reading["text"]):  # the part was the question: its answer is no step
            return Chain(_with_parts(state, reading, done), searched_update(state, work), False, done[:-1])
        if state.options.search_parts:
            work, passages = part_search(work, deps, run, passages, question, reading)
        if whole:
            break
    if not done:
        return NO_CHAIN
    final = read_part(work, run, naming_hop(work, passages, done), question)
    if final is None or states(final["text"], state.topic):
        return Chain(None, {}, final is None, done, question)
    found = _with_parts(state, final, [*done, _part(question, final)])
    return Chain(found, searched_update(state, work), found is None, done, question)


# A part after the first reads only the passages that name the hop before it (the answer its question was rewritten
# with): one that does not name "John Knox" does not say when John Knox died. None naming it breaks the chain.
ANCHOR_PARTS = True


def naming_hop(state: ResearchState, passages: list[str], done: list[dict[str, Any]]) -> list[str]:
    """The passages a part reads: after a hop, those whose title or text names its answer (one of its words of three
    or more letters, or the answer whole when it has none); all of them for the first part."""
    if not ANCHOR_PARTS or not done:
        return passages
    hop = done[-1]["answer"]
    keys = [w for w in content_words(hop) if len(w) >= 3] or [hop]
    return [sid for sid in passages if any(states(k, _full_text(state, sid)) for k in keys)]


def part_search(
    state: ResearchState, deps: Deps, run: RunContext, passages: list[str], question: str, reading: dict[str, Any]
) -> tuple[ResearchState, list[str]]:
    """(the state after searching a rewritten question, the passages its next part reads: the search's best
    HOP_PASSAGES first, then the rest); the same when the question was searched before or the budget is spent. The
    search is a hop from the passage that stated the part's answer, so a passage it finds cites that one too."""
    if run.budget.spent() or searched_before(question, state.queries_done):
        return state, passages
    hop = {"entity": reading["text"], "query": question, "parent": (reading["sids"] or [""])[0]}
    work, hits = hop_search(state, deps, run, hop)
    front = hits[:HOP_PASSAGES]
    return work, front + [sid for sid in passages if sid not in front]


def searched_update(state: ResearchState, work: ResearchState) -> dict[str, Any]:
    """The state update of the searches that made `work` from `state` (none: {})."""
    if work is state:
        return {}
    known = {source.sid for source in state.sources}
    update = {k: getattr(work, k) for k in ("sources", "retrievals", "queries_done", "hops")}
    return {**update, "new_sources": [*state.new_sources, *(s.sid for s in work.sources if s.sid not in known)]}


def _part(question: str, reading: dict[str, Any]) -> dict[str, Any]:
    """One part as the state and report keep it."""
    return {
        "question": question,
        "answer": reading["text"],
        "sids": reading["sids"],
        "confidence": reading.get("confidence"),
    }


def read_part(state: ResearchState, run: RunContext, passages: list[str], question: str) -> dict[str, Any] | None:
    """The kept reading of one part's question over the run's passages, their sentences chosen for that question."""
    part_state = dataclasses.replace(state, topic=question)
    reading, _ = read(part_state, run, reader_evidence(part_state, passages, state.options.reader_tokens))
    return reading


def _with_parts(state: ResearchState, final: dict[str, Any], done: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The final reading citing its own passages first, then each part's, with the parts it was read in and the
    chain's confidence; None when that is under `research.reader_min_confidence`. (Over the five tuning reads this
    took the chain's net added wrong headlines from 6 to 1, and its net right ones from 9 to 10: docs/BENCHMARKS.md,
    session 26.)"""
    sure = [part["confidence"] for part in done if part["confidence"] is not None]
    chain = round(math.prod(sure), 4) if sure else None
    if chain is not None and chain < state.options.reader_min_confidence:
        return None
    sids = list(dict.fromkeys([*final["sids"], *(sid for part in done for sid in part["sids"])]))
    return {**final, "sids": sids, "parts": done, "confidence": chain}


# When the hop read runs with `research.second_read` on (measured on MuSiQue 0–9, docs/BENCHMARKS.md session 12):
# "unanswered" = only when the first read kept no answer; "spans" = for every span question.
HOP_WHEN = "spans"
HOP_PASSAGES = 3  # the hop search's best passages the second read adds
HOP_TOKENS = 200  # their evidence, in tokens, appended after the first read's
HOP_MAX_TOKENS = 40  # {"entity": a name, "question": a short question}


def wants_hop(state: ResearchState, run: RunContext, reading: dict[str, Any] | None) -> bool:
    """Whether to read again after one more search: a span question (not yes/no, either-or or
    how/why), the model available, the option on, and (by HOP_WHEN) no kept first reading."""
    if not state.options.second_read or run.model_for("answer") is None:
        return False
    if answers.question_type(state.topic) in ("yesno", "choice", "explain"):
        return False
    return HOP_WHEN == "spans" or reading is None


def is_entity(text: str, entity: str) -> bool:
    """Whether a span names the hop entity (the same words, or one inside the other)."""
    return states(text, entity) or states(entity, text)


def with_hop(
    state: ResearchState,
    deps: Deps,
    run: RunContext,
    evidence: list[tuple[str, str, str, str]],
    reading: dict[str, Any] | None,
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the reading after a hop read, the state update of its search); the first reading and no
    update when no hop was taken."""
    hopped = hop_read(state, deps, run, evidence)
    if hopped is None:
        return reading, {}
    second, work, named = hopped
    update = searched_update(state, work)
    hop: dict[str, Any] = {
        **named,
        "first_read": (reading or {}).get("text"),
        "second_read": (second or {}).get("text"),
    }
    # A second read that answers with the entity it was still looking up has not answered: the
    # first read stands. (Dropping a first read that named the entity too lost right answers: the
    # model often names its own answer as the entity to look up.)
    kept = second if second is not None and not is_entity(second["text"], named["entity"]) else reading
    return ({**kept, "hop": hop} if kept else None), update


def check_hop(data: Any, state: ResearchState, evidence: list[tuple[str, str, str, str]]) -> dict[str, str] | None:
    """{entity, query, parent sid} when the model named an entity the evidence states (not only the
    question's words) and a search for it is new; the query is its missing-fact question when
    that names the entity, else the entity with that question's key words (or the question's)."""
    if not isinstance(data, dict) or not isinstance(data.get("entity"), str):
        return None
    entity = data["entity"].strip().strip(".,;:\"'").strip()
    if not entity or len(entity) > 60 or not new_to(entity, stems(state.topic)):
        return None
    parent = next((sid for _, sid, title, text in evidence if states(entity, f"{title}. {text}")), None)
    if parent is None:
        return None
    sub = data.get("question") if isinstance(data.get("question"), str) else ""
    sub = " ".join(str(sub).split())[:160]
    words = [w for w in topic_words(sub) if not states(w, entity)] or topic_words(state.topic)[:4]
    query = sub if states(entity, sub) else f"{entity} {' '.join(words)}"
    if searched_before(query, state.queries_done):
        return None
    return {"entity": entity, "query": query, "parent": parent}


def hop_search(
    state: ResearchState, deps: Deps, run: RunContext, hop: dict[str, str]
) -> tuple[ResearchState, list[str]]:
    """A copy of the state after searching the hop's query through the loop's search step (its
    new passages indexed against the question), and the sids that search returned, in rank order."""
    work = dataclasses.replace(state, pending=[hop["query"]], loop=max(state.loop, 1), new_sources=[])
    work = dataclasses.replace(work, **steps.search(work, deps, run))
    hops = {**state.hops, hop["query"]: {"parent": hop["parent"], "entity": hop["entity"]}}
    sources = index_sources(deps.embedder, state.topic, work.sources)
    work = dataclasses.replace(work, sources=sources, hops=hops, loop=state.loop)
    hits = sorted((rank, sid) for sid, query, rank in work.retrievals if query == hop["query"])
    return work, list(dict.fromkeys(sid for _, sid in hits))


def hop_read(
    state: ResearchState, deps: Deps, run: RunContext, evidence: list[tuple[str, str, str, str]]
) -> tuple[dict[str, Any] | None, ResearchState, dict[str, str]] | None:
    """The bridge read: the model names the entity whose fact is missing (same evidence, so the
    prompt prefix is reused), one more search for it, then a read of the evidence with the hop's
    best passages appended. (second reading or None, the state with the hop's passages, the hop);
    None when no hop was named or the search found no passage the first read did not see."""
    if not evidence:
        return None
    lines = [(pid, title, text) for pid, _, title, text in evidence]
    hop = ask(
        run,
        state,
        "answer",
        prompts.hop_messages(state.topic, lines),
        prompts.hop_schema(),
        lambda data: check_hop(data, state, evidence),
        HOP_MAX_TOKENS,
    )
    if hop is None or run.budget.spent():
        return None
    work, hits = hop_search(state, deps, run, hop)
    seen = {sid for _, sid, _, _ in evidence}
    extra = [sid for sid in hits if sid not in seen][:HOP_PASSAGES]
    if not extra:
        return None
    more = reader_evidence(work, extra, HOP_TOKENS)
    evidence = evidence + [(f"S{len(evidence) + k}", sid, t, x) for k, (_, sid, t, x) in enumerate(more, 1)]
    second, _ = read(work, run, evidence)
    if second is not None and set(second["sids"]) & set(extra) and hop["parent"] not in second["sids"]:
        second = {**second, "sids": [*second["sids"], hop["parent"]]}  # cite the passage that led there
    return second, work, hop


def supporting_passages(state: ResearchState, found: dict[str, Any], passages: list[str]) -> list[str]:
    """The passages the report cites: the answer's and the hops that led to them, those the
    question names, the one whose sentence states most of the question when none of these
    states a part of it (PART_OF_QUESTION), and the retrieved passages linked by name to one of
    these (the middle of a chain: a song's passage names its band, whose passage names the city
    the question asks about)."""
    by_sid = state.source_by_sid()
    keep = [sid for sid in found.get("sids", []) if sid in by_sid]
    for sid in list(keep):
        parent = state.hops.get(by_sid[sid].query, {}).get("parent")
        while parent and parent not in keep and parent in by_sid:
            keep.append(parent)
            parent = state.hops.get(by_sid[parent].query, {}).get("parent")
    if not found.get("text"):  # abstained: the passages of the closest sentences the Answer shows
        keep += [found["closest"][1]] if found.get("closest") else []
        keep += [sid for _, sid in best_sentences(state, passages, 2)]
    keep += [sid for sid in passages if named_by_question(state, by_sid[sid].title)]
    keep = list(dict.fromkeys(keep))
    shares = question_shares(state, list(dict.fromkeys(keep + passages)))  # key weights once, each sentence once
    if max((shares[sid] for sid in keep), default=0.0) < PART_OF_QUESTION:
        keep += [sid for sid in most_of_question(state, passages, shares) if sid not in keep]
    return keep + linked_passages(state, keep)


# Chosen on HotpotQA/MuSiQue questions 0–39 and 40–55 with the Qwen reader (docs/BENCHMARKS.md,
# session 13): every passage stating 0.3 of the question cited 3–4 passages for 2–3 supporting
# ones; the best one alone, with the chain links, cites as many supporting passages and fewer others.
# Session 14 (chosen on 0–39): the best one only when no cited passage states 0.3 of the question.
# Added beside the answer's passages it was a supporting passage 1 time in 13 (MuSiQue 0–39); with
# the condition, MuSiQue 0–39 citation precision 0.570 → 0.615 at support recall 0.746 → 0.733.
PART_OF_QUESTION = 0.3
CHAIN_LINKS = 3  # linked passages cited at most (a title every passage names must not cite them all)


def linked_passages(state: ResearchState, cited: list[str]) -> list[str]:
    """Retrieved passages not in `cited` that one of the cited passages names by title, or that
    name a cited passage's title, best-ranked first, at most CHAIN_LINKS."""
    by_sid = state.source_by_sid()
    heads = {sid: normalize_answer(name_of(by_sid[sid].title)) for sid in by_sid}
    texts = {sid: f" {normalize_answer(f'{by_sid[sid].title}. {by_sid[sid].text}')} " for sid in by_sid}

    def names(sid: str, other: str) -> bool:
        return len(heads[other]) > 2 and f" {heads[other]} " in texts[sid]

    ranked = [sid for sid, _ in ranked_pool(state) if sid not in cited]
    linked = [sid for sid in ranked if any(names(c, sid) or names(sid, c) for c in cited)]
    return linked[:CHAIN_LINKS]


def named_by_question(state: ResearchState, title: str) -> bool:
    """A passage whose title (its name part) the question names."""
    head = name_of(title)
    return len(head) > 2 and states(head, state.topic)


def question_shares(state: ResearchState, passages: list[str]) -> dict[str, float]:
    """Each passage's largest share of the question's key words (weighted by rarity) that one
    of its sentences states."""
    weights = key_weights(state)
    by_sid = state.source_by_sid()
    return {sid: max((question_share(x.text, weights) for x in by_sid[sid].sentences), default=0.0) for sid in passages}


def most_of_question(state: ResearchState, passages: list[str], shares: dict[str, float] | None = None) -> list[str]:
    """The passage with the sentence that states the largest share of the question's key words
    (all of them on a tie), when that share is at least PART_OF_QUESTION (`shares`: computed already)."""
    shares = question_shares(state, passages) if shares is None else shares
    best = max((shares[sid] for sid in passages), default=0.0)
    return [sid for sid in passages if shares[sid] >= max(best, PART_OF_QUESTION) - 1e-9]
