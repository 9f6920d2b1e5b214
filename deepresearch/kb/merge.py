"""The text side of merging with differential preservation: relation, fusion checks, mechanical merge.

The database passes that use it are kb/write.py (on write) and kb/compress.py (`kb compress`).

Two facts whose vectors are at least `kb.duplicate_similarity` apart are compared (README,
"Commands": `kb add` and `kb compress`); so are facts only related (cosine >=
`kb.related_similarity`, where MiniLM puts a claim with a changed number or name), but those
must align word by word and differ only in one value slot — a number, a date or a name — plus
details set off as their own phrase (`value_change`) to be anything but distinct. `relation()` classifies the pair:

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
from deepresearch.kb.align import Token, join, opcodes, regions, tokens, unspaced
from deepresearch.kb.updates import Judge, compare, second_opinion, separable, undecided
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
    slot = compare(older, newer)
    if slot.change is not None:  # the changed value, however the words split (Chinese: no spaces)
        out |= _stems(slot.old_value)
    return out - new_stems


def value_change(older: str, newer: str, *, min_shared: int = 4, min_aligned: float = 0.7) -> str | None:
    """'old → new' when the texts are one claim with one slot's value changed (kb/updates.py:
    a number, date, name or title, changed wherever it appears, plus details only one side has);
    None when they differ in anything else."""
    return compare(older, newer, min_shared=min_shared, min_aligned=min_aligned).change


def _names(text: str) -> set[str]:
    """Capitalized words after the first (a sentence's first word is capitalized anyway)."""
    return {t.strip(".,;:!?\"'()").lower() for t in text.split()[1:] if t[:1].isupper()}


def relation(older: Fact, newer: Fact, *, near: bool = True, judge: Judge | None = None) -> tuple[str, str]:
    """('distinct' | 'duplicate' | 'update' | 'contradiction', reason) for two similar facts.

    One claim with one slot's value changed (`claims.compare`) is an update or a contradiction
    at any cosine; two values changed, or another day, keeps them apart at any cosine. Beyond
    that, `near` pairs (cosine >= kb.duplicate_similarity) may be the same claim in other words —
    except in Chinese/Japanese, which the embedding model does not read (there only an aligned
    text with nothing replaced is the same claim). Where the rule has no verdict (kb/updates.py
    `undecided`), `judge` — when given — is asked for a second opinion (`judged`)."""
    found = compare(older.fact, newer.fact)
    if found.change is not None:
        return direction(older, newer, f"changes {found.change}")
    if found.apart:
        return "distinct", found.apart
    if unspaced(older.fact) or unspaced(newer.fact):
        if found.same:
            return "duplicate", "same claim (aligned, details only one side has)"
        return judged(older, newer, judge) or (
            "distinct",
            "not the same claim with another value (the cosine cannot tell in this script)",
        )
    apart = _apart(older.fact, newer.fact)
    if apart:
        return "distinct", apart
    if not near:
        return judged(older, newer, judge) or ("distinct", "related, but not the same claim with another value")
    changes = changed_values(older.fact, newer.fact)
    if not changes:
        return "duplicate", "same claim"
    return direction(older, newer, "; ".join(changes))


def judged(older: Fact, newer: Fact, judge: Judge | None) -> tuple[str, str] | None:
    """The second opinion on a pair the rule cannot decide, as a relation; None: none usable (no
    judge, a pair not worth asking about, or an answer `second_opinion` refuses)."""
    if judge is None or not undecided(older.fact, newer.fact):
        return None
    verdict = second_opinion(older.fact, newer.fact, judge)
    if verdict is None:
        return None
    if verdict == "distinct":
        return "distinct", "second opinion: distinct claims"
    if verdict == "same":
        return "duplicate", "second opinion: the same claim"
    return direction(older, newer, f"second opinion: {verdict}")


def kept_apart(older: str, newer: str) -> str | None:
    """Why two texts are claims about different times or subjects, never to be linked (None: they may be)."""
    found = compare(older, newer)
    if found.change is not None:
        return None
    return found.apart or _apart(older, newer)


def _apart(older: str, newer: str) -> str | None:
    """For texts that are not one claim with one value changed: signs of different times or subjects."""
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
    """The newer text with the older one's extra words kept in place: every aligned, inserted or
    replaced stretch is the newer fact's words, every stretch only the older fact has is its
    words as written (unless merely moved). Nothing else is ever put together, so each part is
    what one source said in the place it said it. None when the texts are reordered rather than
    aligned, or an old and a new number would stand side by side. A replaced stretch keeps the
    old words beside the new ones only when both are phrases of their own (set off by a function
    word or punctuation): a replaced value ("Pump 4:" → "Pump 12:") is never kept beside its successor."""
    old, new = tokens(older.rstrip(_END)), tokens(newer.rstrip(_END))
    ops = opcodes(old, new)
    same = sum(not t.glue for tag, i1, i2, _, _ in ops if tag == "equal" for t in old[i1:i2])
    solid = min(sum(not t.glue for t in old), sum(not t.glue for t in new))
    spans = regions(old, new, ops)
    if same < 0.5 * solid or len(spans) > MAX_EDITS:
        return None
    new_keys, old_keys = {t.key for t in new if not t.glue}, {t.key for t in old if not t.glue}
    out: list[Token] = []
    at = 0  # position in `new` up to which tokens are placed
    for i1, i2, j1, j2 in spans:
        out += new[at:j1]
        at = j2
        if j2 > j1 and i2 > i1 and {t.key for t in new[j1:j2] if not t.glue} <= old_keys:
            return None  # the same words in another order: not alignable
        kept = [t for t in old[i1:i2] if t.glue or t.key not in new_keys]  # unless merely moved
        if j2 == j1 and any(not t.glue for t in kept):  # a detail only the old fact has: keep it ...
            if any(s[1] == i1 and s[3] > s[2] for s in spans):
                return None  # ... unless it describes the replaced value ("Ruiz, a poet"): not the new one's
            if out and i1 and out[-1].key == old[i1 - 1].key:
                out[-1] = Token(out[-1].sep, old[i1 - 1].text, out[-1].key)  # with its comma
            out += kept
        elif i2 > i1 and any(not t.glue for t in kept) and separable(old, i1, i2) and separable(new, j1, j2):
            out += new[j1:j2] + old[i1:i2]  # a new phrase where an old one was ("by Jobs" / "in Cupertino"): both
        else:
            out += new[j1:j2]  # inserted words, or a replaced value: the newer fact's
    out += new[at:]
    text = join(out)
    kept_numbers = numbers(text)
    if (numbers(older) - numbers(newer)) & kept_numbers and numbers(newer) - numbers(older):
        return None  # an old and a new number side by side: the alignment missed the update
    end = newer.rstrip()[-1:] if newer.rstrip()[-1:] in _END.strip() else older.rstrip()[-1:]
    return text + (end if end in _END.strip() else "")


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


def decide(
    stored: Fact, incoming: Fact, model: ChatModel | None = None, *, near: bool = True, judge: Judge | None = None
) -> Decision:
    """Classify the pair (see `relation`; `judge`: its second opinion) and, for duplicates and
    updates, fuse the texts (older → newer)."""
    older, newer = ordered(stored, incoming)
    kind, reason = relation(older, newer, near=near, judge=judge)
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
