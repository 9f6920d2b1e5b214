"""The text side of merging with differential preservation: relation, fusion checks, mechanical merge.

The database passes that use it are kb/plan.py (on write) and kb/compress.py (`kb compress`).

Two facts whose vectors are at least `kb.duplicate_similarity` apart are compared
(DESIGN.md §3); so are facts only related (cosine >= `kb.related_similarity`, where MiniLM
puts a claim with a changed number or name), but those must align word by word and differ
only in one value slot — a number, a date or a name — plus details set off as their own phrase
(`value_change`) to be anything but distinct. `relation()` classifies the pair:

- `distinct`: different years on both sides, so two claims about different times — never merged;
- `duplicate`: nothing of the older fact is replaced or negated — fused into one text;
- `update`: the newer fact (later `verified_at`, confidence at least the older's) replaces
  values of the older — fused, newer wins;
- `contradiction`: values differ with no basis to prefer one (same `verified_at`, or a less
  confident newer source) — both kept, flagged for re-verification (table `fact_conflicts`).

The fusion keeps every detail of the older fact that the newer one does not replace: the
model proposes it (MERGE_FACTS) and `fusion_problem` checks it word by word; if the model
is absent, fails, or loses a detail, `mechanical_merge` aligns the two texts and keeps both
("the cat is 2 years old and very clingy" + "the cat is 3 years old" → "the cat is 3 years
old and very clingy"), or, if they do not align, writes "new (earlier: old)". Nothing is dropped.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any

from deepresearch.errors import DeepResearchError, ModelError
from deepresearch.facts import Fact
from deepresearch.text import STOPWORDS, content_words, numbers, stem, words

if TYPE_CHECKING:
    from deepresearch.models.llm import ChatModel

log = logging.getLogger(__name__)

MAX_EDITS = 3  # more differing spans than this and an aligned merge reads as word salad
MAX_MERGED_CHARS = 1000  # a fused "fact" longer than this is no longer one claim: keep both
_YEAR = re.compile(r"^(1[5-9]\d\d|20\d\d)$")
# Words that pin a claim to a time: facts differing in them are about different times.
_TIME_WORDS = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday january february march april june
    july august september october november december yesterday today tomorrow""".split()
)
# month names and their abbreviations ("Aug", "Sept") by their first three letters
_MONTHS = frozenset(
    m[:3] for m in "january february march april may june july august september october november december".split()
)
_MAGNITUDES = frozenset({"hundred", "thousand", "million", "billion", "trillion", "percent"})
_NEGATIONS = frozenset({"not", "no", "never", "none", "nor", "cannot", "without", "n't"})
_END = " .。!！;"


def _stems(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)}


def _negated(text: str) -> bool:
    return any(w in _NEGATIONS or w.endswith("n't") for w in words(text))


def _tokens(text: str) -> list[str]:
    return text.strip().rstrip(_END).split()


def _key(token: str) -> str:
    return stem(token.lower().strip(".,;:!?\"'()[]"))


def _opcodes(old: list[str], new: list[str]) -> list[tuple[str, int, int, int, int]]:
    matcher = SequenceMatcher(None, [_key(t) for t in old], [_key(t) for t in new], autojunk=False)
    return [(str(tag), i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes()]


def _is_swap(old_span: list[str], new_span: list[str], old_stems: set[str], new_stems: set[str]) -> bool:
    """A short aligned span whose content is gone from the new text and replaced by new content
    (a value, a name, a negation), as opposed to reordered words or an added clause."""
    if len(old_span) > 3 or len(new_span) > 3 or _kind(old_span) != _kind(new_span):
        return False
    if _function_words(old_span) != _function_words(new_span):
        return False  # "in Cupertino" vs "by Steve Jobs": another role, not another value
    return bool(_stems(" ".join(old_span)) - new_stems) and bool(_stems(" ".join(new_span)) - old_stems)


def _function_words(span: list[str]) -> set[str]:
    return {w for w in words(" ".join(span)) if w in STOPWORDS} - {"a", "an", "the", "may"}  # May: a month


def _kind(span: list[str]) -> tuple[bool, bool]:
    """(has a number, has a name): a swap replaces a value by a value of the same kind."""
    text = " ".join(span)
    return bool(numbers(text)), any(t[:1].isupper() for t in span)


def replaced_stems(older: str, newer: str) -> set[str]:
    """Content stems of `older` that `newer` replaces (short aligned swaps, e.g. '2' → '3')."""
    old, new = _tokens(older), _tokens(newer)
    old_stems, new_stems = _stems(older), _stems(newer)
    out: set[str] = set()
    for tag, i1, i2, j1, j2 in _opcodes(old, new):
        if tag == "replace" and _is_swap(old[i1:i2], new[j1:j2], old_stems, new_stems):
            out |= _stems(" ".join(old[i1:i2]))
    return out - new_stems


_PUNCT = ".,;:!?\"'()[]“”‘’«»"


def _is_month(token: str) -> bool:
    """A capitalized month name or its abbreviation ("May", "Jan", "Sept.")."""
    w = token.strip(_PUNCT)
    low = w.lower()
    return w[:1].isupper() and low[:3] in _MONTHS and (len(low) == 3 or low == "sept" or low in _TIME_WORDS | {"may"})


def _dated(token: str) -> bool:
    """A number, a date word or a magnitude ("12", "July", "Jan", "billion"): part of a value."""
    return bool(numbers(token)) or _word(token) in _TIME_WORDS | _MAGNITUDES or _is_month(token)


def _value(span: list[str], initial: bool, text: str) -> str | None:
    """'value' for a number, a date or a name (the kind of span an update or contradiction
    changes), 'maybe' for a lone capitalized first word, None for anything else — a span with
    any other content word ("12 homes" → "3 barns") changes more than a value.

    A sentence's first word is capitalized anyway, so alone there ("Dogs" → "Cats") it is only a
    name if the text capitalizes it again later ("Facebook purchased … Facebook's bid")."""
    content = [t.strip(_PUNCT) for t in span if _stems(t) or _dated(t)]
    if not content or not all(_dated(t) or t[:1].isupper() for t in content):
        return None
    if any(_dated(t) for t in content):
        return "value"
    first = content[0]
    if initial and len(content) == 1 and span[0].strip(_PUNCT) == first and not any(c.isupper() for c in first[1:]):
        tokens = text.split()
        # capitalized again, and not merely because another sentence starts there
        later = {
            _word(t)
            for p, t in zip(tokens, tokens[1:], strict=False)
            if t.strip(_PUNCT)[:1].isupper() and p[-1:] not in ".!?"
        }
        return "value" if _word(first) in later else "maybe"
    return "value"


def _bare(span: list[str]) -> str:
    """A value as reported: no surrounding punctuation, no possessive ("Spain's" is "Spain")."""
    text = " ".join(span).strip(_PUNCT)
    return text[:-2] if text.endswith(("'s", "’s")) else text


def _word(token: str) -> str:
    """A token as a word to match exactly: lower case, no punctuation, no plural or possessive 's'.

    Stricter than `_key` (a six-letter prefix, where 'police' matches 'policemen'): a value
    change needs every word outside the value to be the same word on both sides."""
    w = token.lower().strip(_PUNCT)
    w = w[:-2] if w.endswith(("'s", "’s")) else w
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


def _separable(tokens: list[str], i1: int, i2: int) -> bool:
    """Whether tokens[i1:i2], present on one side only, is a detail of its own (a clause or
    phrase set off by a function word or punctuation: "… old and very clingy", "Momo, a tabby,")
    rather than a word that changes the phrase it sits in ("10 Afghan civilians" → "5 Afghan")."""
    first, before = tokens[i1], tokens[i1 - 1] if i1 else ""
    if first[:1] in "(,;:—–-" or before[-1:] in ",;:(—–-":
        return True
    return _word(first) in STOPWORDS or (i1 == 0 and tokens[i2 - 1][-1:] in ",;:")


def value_change(older: str, newer: str, *, min_shared: int = 4, min_aligned: float = 0.7) -> str | None:
    """'old → new' when the texts align and differ in one value (a number, date or name, maybe
    repeated) plus separable details only one side has; None when they differ in anything else.

    Outside the value, aligned words must be the same words (up to a plural or possessive 's');
    a word only one side has must belong to a detail of its own (`_separable`): "kills 10 Afghan
    civilians" vs "kills 5 Afghan policemen" changes the victims too, not only their number.
    `min_shared` content stems must be common to both (the subject and attribute words) and at
    least `min_aligned` of the shorter text must align, so a lone shared word is not evidence.
    """
    old, new = _tokens(older), _tokens(newer)
    matcher = SequenceMatcher(None, [_word(t) for t in old], [_word(t) for t in new], autojunk=False)
    ops = [(str(tag), i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes()]
    if sum(tag != "equal" for tag, *_ in ops) > MAX_EDITS:
        return None
    equal = [t for tag, i1, i2, _, _ in ops if tag == "equal" for t in old[i1:i2]]
    if len(equal) < min_aligned * min(len(old), len(new)) or len(_stems(" ".join(equal))) < min_shared:
        return None
    swaps = set()
    for tag, i1, i2, j1, j2 in ops:
        if tag in ("insert", "delete"):
            span = old[i1:i2] + new[j1:j2]
            if _TIME_WORDS.intersection(words(" ".join(span))):
                return None  # one side is pinned to a day or month the other does not name
            wordy = [t for t in span if not numbers(t) and _stems(t)]  # numbers: part of a value slot
            if wordy and not (_separable(old, i1, i2) if i2 > i1 else _separable(new, j1, j2)):
                return None  # a content word inside the aligned frame: another claim, not another value
            continue
        if tag != "replace":
            continue
        o, n = old[i1:i2], new[j1:j2]
        if len(o) > 3 or len(n) > 3 or _kind(o) != _kind(n) or _function_words(o) != _function_words(n):
            return None  # "at least 19" vs "26", "in Paris" vs "by Hugo": another role, not another value
        kinds = {_value(o, i1 == 0, older), _value(n, j1 == 0, newer)}
        if None in kinds or kinds == {"maybe"}:
            return None  # not a value, or two capitalized first words with no sign of being names
        swaps.add((_bare(o), _bare(n)))
    if len(swaps) != 1:
        return None  # nothing replaced (a duplicate), or two values: another subject's value
    before, after = swaps.pop()
    if numbers(before) and numbers(before) == numbers(after):
        return None  # "$200" / "200 USD": the same value written another way, not a change
    if not numbers(before) and _spelling_variant(before, after):
        return None  # "Syria" / "Syrian", "Egypt" / "Egyptian": the same name written another way
    return f"{before} → {after}"


def _is_date(change: str) -> bool:
    """A value change between two dates (years, days, month names and nothing else)."""
    rest = [w for w in words(change) if not w.isdigit() and w not in _TIME_WORDS and w[:3] not in _MONTHS]
    return bool(_YEAR.match(max(numbers(change), key=len, default=""))) and not rest


def _spelling_variant(a: str, b: str) -> bool:
    """Two names that are one name spelled, inflected or abbreviated differently."""
    a, b = sorted((a.lower().replace(".", ""), b.lower().replace(".", "")), key=len)
    initials = "".join(w[:1] for w in b.split())
    return SequenceMatcher(None, a, b).ratio() >= 0.6 or a in (initials, b[: len(a)]) or a[:4] == b[:4]


def _names(text: str) -> set[str]:
    """Capitalized words after the first (a sentence's first word is capitalized anyway)."""
    return {t.strip(".,;:!?\"'()").lower() for t in text.split()[1:] if t[:1].isupper()}


def relation(older: Fact, newer: Fact, *, near: bool = True) -> tuple[str, str]:
    """('distinct' | 'duplicate' | 'update' | 'contradiction', reason) for two similar facts.

    `near` pairs (cosine >= kb.duplicate_similarity) may be the same claim in other words; a
    pair that is only related (cosine >= kb.related_similarity) must align word by word and
    differ in one value (see `value_change`) to be an update or a contradiction."""
    change = value_change(older.fact, newer.fact)
    if change is not None and _is_date(change):
        # only the date differs: another date for the same event, not a claim about another time
        return direction(older, newer, f"changes {change}")
    apart = _apart(older.fact, newer.fact, change)
    if apart:
        return "distinct", apart
    if not near:
        if change is None:
            return "distinct", "related, but not the same claim with another value"
        return direction(older, newer, f"changes {change}")
    changes = changed_values(older.fact, newer.fact)
    if not changes:
        return "duplicate", "same claim"
    return direction(older, newer, "; ".join(changes))


def kept_apart(older: str, newer: str) -> str | None:
    """Why two texts are claims about different times or subjects, never to be linked (None: they may be)."""
    return _apart(older, newer, value_change(older, newer))


def _apart(older: str, newer: str, change: str | None) -> str | None:
    if change is not None and _is_date(change):
        return None  # another date for the same event
    on, nn = numbers(older), numbers(newer)
    if any(_YEAR.match(n) for n in on - nn) and any(_YEAR.match(n) for n in nn - on):
        return "different years: claims about different times"
    ot, nt = _TIME_WORDS.intersection(words(older)), _TIME_WORDS.intersection(words(newer))
    if ot - nt and nt - ot:
        return "different days or months: claims about different times"
    old_names, new_names = _names(older), _names(newer)
    if old_names - new_names and new_names - old_names and on - nn and nn - on:
        return "another name with another number: a different subject's value"
    return None


def changed_values(older: str, newer: str) -> list[str]:
    """What `newer` changes in `older`: replaced words or values, a negation (empty: nothing)."""
    changes = []
    gone = replaced_stems(older, newer)
    if gone:
        changes.append(f"replaces {', '.join(sorted(gone)[:5])}")
    if _negated(older) != _negated(newer):
        changes.append("negation differs")
    return changes


def direction(older: Fact, newer: Fact, change: str) -> tuple[str, str]:
    """An update when the newer fact was verified later by a source at least as confident;
    otherwise a contradiction (nothing to prefer one value by)."""
    if newer.verified_at <= older.verified_at:
        return "contradiction", f"{change} (same verification time: no update direction)"
    if newer.confidence < older.confidence:
        return "contradiction", f"{change} (the newer source is less confident)"
    return "update", change


def fusion_problem(older: str, newer: str, merged: str) -> str | None:
    """Why `merged` is not a lossless fusion of older + newer (None when it is)."""
    got, new, old = _stems(merged), _stems(newer), _stems(older)
    missing_new = new - got
    if missing_new:
        return f"loses words of the new fact: {sorted(missing_new)[:5]}"
    missing_old = old - replaced_stems(older, newer) - got
    if missing_old:
        return f"loses details of the old fact: {sorted(missing_old)[:5]}"
    invented = got - old - new
    if invented:
        return f"adds words found in neither fact: {sorted(invented)[:5]}"
    if numbers(merged) - numbers(older) - numbers(newer):
        return "adds numbers found in neither fact"
    if len(merged) > MAX_MERGED_CHARS:
        return "too long"
    return None


def _aligned(older: str, newer: str) -> str | None:
    """Newer's words where the texts align or values were swapped, older's extra words kept in
    place; None when the texts are reordered rather than aligned."""
    old, new = _tokens(older), _tokens(newer)
    old_stems, new_stems = _stems(older), _stems(newer)
    ops = _opcodes(old, new)
    same = sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal")
    if same < 0.5 * min(len(old), len(new)) or sum(tag != "equal" for tag, *_ in ops) > MAX_EDITS:
        return None
    new_keys = {_key(t) for t in new}
    out: list[str] = []
    for tag, i1, i2, j1, j2 in ops:
        if tag == "delete":  # a detail only the old fact has: keep it (unless merely moved)
            out += [t for t in old[i1:i2] if not (_key(t) in new_keys and _stems(t))]
        elif tag != "replace" or _is_swap(old[i1:i2], new[j1:j2], old_stems, new_stems):
            out += new[j1:j2]
        elif _stems(" ".join(new[j1:j2])) - old_stems:
            out += new[j1:j2] + old[i1:i2]  # an added clause next to an old one: keep both
        else:
            return None  # the same words in another order: not alignable
    kept = numbers(" ".join(out))
    if (numbers(older) - numbers(newer)) & kept and numbers(newer) - numbers(older):
        return None  # an old and a new number side by side: the alignment missed the update
    end = newer[-1:] if newer[-1:] in _END.strip() else older[-1:]
    return " ".join(out) + (end if end in _END.strip() else "")


def mechanical_merge(older: str, newer: str) -> str:
    """Deterministic lossless fusion: newer wins where the texts align, older details are kept."""
    older, newer = " ".join(older.split()), " ".join(newer.split())
    if _stems(older) <= _stems(newer):
        return newer
    text = _aligned(older, newer)
    if text is not None and fusion_problem(older, newer, text) is None:
        return text
    if _stems(newer) <= _stems(older) and not replaced_stems(older, newer):
        return older
    return f"{newer.rstrip(_END)} (earlier: {older.rstrip(_END)})."


@dataclass
class Fusion:
    """A merged text, how it was made, and why the model's proposal was refused (if it was)."""

    text: str
    method: str  # model | mechanical
    contradiction: bool = False
    problem: str | None = None


def fuse(older: str, newer: str, model: ChatModel | None = None) -> Fusion:
    """The model's fusion when it passes `fusion_problem`, else the mechanical merge."""
    problem = "no chat model"
    if model is not None:
        from deepresearch.models.llm import complete_json
        from deepresearch.prompts import MERGE_FACTS, MERGE_SCHEMA

        def check(data: Any) -> bool:
            reason = fusion_problem(older, newer, " ".join(str(data.get("merged", "")).split()))
            if reason:
                raise ValueError(reason)
            return True

        try:
            data = complete_json(
                model,
                MERGE_FACTS.messages(old=older, new=newer),
                MERGE_SCHEMA,
                max_tokens=200,
                validate=check,
            )
        except (ModelError, DeepResearchError) as exc:  # merging must never fail a write
            data, problem = None, f"model failed: {exc}"
        else:
            problem = "model proposals lost or invented details"
        if isinstance(data, dict):
            text = " ".join(str(data["merged"]).split())
            return Fusion(text, "model", bool(data.get("contradiction")))
    return Fusion(mechanical_merge(older, newer), "mechanical", problem=problem)


@dataclass
class Decision:
    """What to do with a stored (`older`-or-`newer`) fact and an incoming similar one."""

    kind: str  # duplicate | update | contradiction | distinct
    reason: str
    text: str | None = None
    method: str = "none"


def decide(stored: Fact, incoming: Fact, model: ChatModel | None = None, *, near: bool = True) -> Decision:
    """Classify the pair (see `relation`) and, for duplicates and updates, fuse the texts (older → newer)."""
    older, newer = ordered(stored, incoming)
    kind, reason = relation(older, newer, near=near)
    if kind in ("distinct", "contradiction"):
        return Decision(kind, reason)
    fusion = fuse(older.fact, newer.fact, model)
    if fusion.contradiction and older.verified_at == newer.verified_at:
        return Decision("contradiction", "the model says they contradict (same verification time)")
    if len(fusion.text) > MAX_MERGED_CHARS:
        return Decision("distinct", "merged text would be too long for one fact")
    return Decision(kind, reason, fusion.text, fusion.method)


def ordered(stored: Fact, incoming: Fact) -> tuple[Fact, Fact]:
    """(older, newer) by verification time; an incoming fact verified at the same time is the newer."""
    return (stored, incoming) if incoming.verified_at >= stored.verified_at else (incoming, stored)


def merged_fact(members: list[Fact], text: str) -> Fact:
    """The fact that replaces `members`: their union of sources, the latest verification."""
    newest = max(members, key=lambda f: (f.verified_at, f.created_at))
    sources = list(dict.fromkeys(s for f in members for s in (f.sources or [f.source_url])))
    return replace(
        newest,
        fact=text,
        id="",
        created_at=0.0,
        verified_at=newest.verified_at,
        confidence=max(f.confidence for f in members),
        research_topic=newest.research_topic or next((f.research_topic for f in members if f.research_topic), ""),
        sources=sources,
        status="active",
        superseded_by=None,
    )
