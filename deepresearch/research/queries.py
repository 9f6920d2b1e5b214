"""Query helpers: question words, the knowledge gap, grounded query cleaning, and multi-hop
bridge queries ("entity + the question words its passage leaves unanswered")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deepresearch.kb import lifecycle as kb_lifecycle
from deepresearch.text import content_words, normalize_space, stem

if TYPE_CHECKING:
    from deepresearch.research.state import Known

QUESTION_WORDS = frozenset(
    "work works working explain describe difference between compare use used using mean means way ways"
    " happen happens kind kinds type types make makes thing things know tell let lets get gets same"
    " together role roles affect affects around near within during after before since"
    " who whom whose what which where when why how many much".split()
)
# A capitalised name, allowing the small words names contain ("Society for the Exploration of …").
NAME = re.compile(r"[A-Z][\w'’.&-]*(?:\s+(?:(?:of|the|de|du|la|le|von|van|der|del|da|for)\s+)*[A-Z0-9][\w'’.&-]*)*")
# Capitalised words that start sentences or refer back, never a name on their own.
NOT_NAMES = frozenset(
    "the a an in on at of for and but or he she it its his her they their them this that these those there"
    " after before during while when where which who what how however later also as by from with to is was"
    " are were born since until following then many some".split()
)


def query_key(text: str) -> str:
    """A query's identity for "searched before?": its content words in order."""
    return " ".join(content_words(text))


def stems(text: str) -> set[str]:
    """Stems of the content words of `text`."""
    return {stem(w) for w in content_words(text)}


def topic_words(text: str) -> list[str]:
    """The content words of a question, without question scaffolding ("how does X work")."""
    return [w for w in dict.fromkeys(content_words(text)) if w not in QUESTION_WORDS]


def missing_words(question: str, covered_text: str) -> list[str]:
    """Key words of `question` that `covered_text` never mentions (the knowledge gap)."""
    covered = stems(covered_text)
    return [w for w in topic_words(question) if stem(w) not in covered]


def searched_before(query: str, done: list[str]) -> bool:
    """Whether `query` is one of the queries `done` (compared by their key words)."""
    return query_key(query) in {query_key(q) for q in done}


def clean_queries(raw: Any, done: list[str], n: int, anchor: str) -> list[str]:
    """Usable queries: strings, short, new (not searched before), mostly words of `anchor`."""
    if not isinstance(raw, list):
        return []
    seen = {query_key(q) for q in done}
    anchor_stems = stems(anchor)
    out: list[str] = []
    for item in raw:
        if not isinstance(item, str):
            continue
        query = normalize_space(item).strip("\"' ")
        key = query_key(query)
        words = [stem(w) for w in key.split()]
        # Grounded: most words of a query come from the question or the evidence.
        if not key or len(query) > 160 or key in seen or sum(w in anchor_stems for w in words) * 2 < len(words):
            continue
        seen.add(key)
        out.append(query)
    return out[:n]


def is_fresh(known: Known, lifecycle: str, fresh: str, freshness_days: dict[str, float]) -> bool:
    """A known fact that needs no re-check: mode off, or younger than the freshness level
    (fast-changing categories: younger than a day)."""
    return kb_lifecycle.is_fresh(known.category, known.age_days, lifecycle, fresh, freshness_days)


@dataclass
class Bridge:
    """A name found in a passage that the question does not mention: the next hop's subject."""

    entity: str
    score: float
    sid: str  # the passage that names it
    remaining: list[str]  # question words that passage (and the chain that led to it) leaves open

    def query(self) -> str:
        """The next hop's search: the entity plus the still-unanswered question words."""
        return f"{self.entity} {' '.join(self.remaining[:4])}".strip()


def names_in(text: str) -> list[str]:
    """Capitalised names in `text` (sentence-initial function words and pronouns dropped)."""
    out: list[str] = []
    for match in NAME.finditer(text):
        name = match.group(0).rstrip(".,'’")
        tokens = name.split()
        while tokens and tokens[0].lower() in NOT_NAMES:
            tokens = tokens[1:]
        while tokens and tokens[-1].lower() in NOT_NAMES:
            tokens = tokens[:-1]
        name = " ".join(tokens)
        sentence_start = not text[: match.start()].strip() or text[: match.start()].rstrip().endswith((".", "!", "?"))
        if sentence_start and len(tokens) == 1 and name == match.group(0).rstrip(".,'’"):
            continue  # "Parts of the film …": a capitalised first word is usually not a name
        if name and len(name) > 1 and name not in out:
            out.append(name)
    return out


def new_to(name: str, known_stems: set[str]) -> bool:
    """True if `name` has a content word the question (`known_stems`) does not."""
    words = content_words(name)
    return bool(words) and not all(stem(w) in known_stems for w in words)
