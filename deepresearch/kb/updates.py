"""Is the newer fact the older claim with one value changed? The update rule of kb/merge.py.

An update (or a contradiction) is **the same claim with one slot's value changed**: the two
texts align token by token (kb/align.py: words, or jieba's words in Chinese/Japanese), and
every difference is either

- the changed slot: an entity-like span — a number with its unit, a date in any common form
  ("March 3", "3 March 2021", "2021-03-03", "3月3日", "2021年"), a name of one or more words,
  a title (capitalized, or in quotes or 《》) — replaced by a value of the same kind, with the
  same function words around it, and replaced *consistently*: wherever the old value appears
  in the older fact, the newer fact has the new one (a value left unchanged somewhere is not
  the slot), and every replaced span carries that one value (two different values changed —
  "Pump 4 … 300 litres" vs "Pump 12 … 310 litres" — is another subject's claim: apart);
- or a detail only one side has, set off as its own phrase ("… 2 years old *and very
  clingy*", "Momo*, a tabby,*", "，很粘人"), never a word inside the aligned frame.

The rest of the claim must match: ≥ 70 % of the shorter text's tokens align, and they hold ≥ 4
shared content words — or, for a short fact, every content word of both texts but the slot
and a detail, at least 2, with a stative verb in the frame ("Momo *is* 3 years old", "was
built in 1901": an attribute of a subject, not an event headline such as "Stocks close 0.39%
higher", where two values are two events). A weekday or a relative day ("Wednesday",
"yesterday") says when a claim held, not a value of it: facts differing there are about
different times.

Casing tells a name in spaced scripts; in Chinese/Japanese, jieba's part-of-speech tags
(person, place, organization, other proper noun) or a word missing from its dictionary do.
A common word swapped ("喜欢猫" → "喜欢狗", "a guitar" → "a flute") is another claim, not a value.

Where the rule has no verdict — the texts neither align as one slot changed, nor show signs of
different times or subjects, nor are the same claim — a second opinion may be asked (`Judge`,
injected by the caller: kb/merge.py `relation`, wired from kb/classify.py; the model's is
models/judge.py). It is asked only about pairs sharing most of their words (`undecided`), and its
verdict is used only when it is consistent with the texts (`second_opinion`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import lru_cache
from itertools import takewhile
from typing import Callable

from deepresearch.errors import DeepResearchError
from deepresearch.kb.align import PUNCT, Token, join, opcodes, proper, regions, tokens, unspaced
from deepresearch.prompts import JUDGE_VERDICTS
from deepresearch.text import STOPWORDS, content_words, numbers, stem

MAX_VALUE_TOKENS = 6  # a name, title or date longer than this is a clause, not a value
MAX_REGIONS = 6  # more differing spans than this and the texts are not one claim
MIN_ALIGNED_ANY = 0.5  # under this share of tokens aligned the texts are not compared further
# weekdays and relative days: *when* a claim held, not a value of it
WHEN_WORDS = frozenset("monday tuesday wednesday thursday friday saturday sunday yesterday today tomorrow".split())
MONTHS = frozenset(
    m[:3] for m in "january february march april may june july august september october november december".split()
)
_MONTH_NAMES = frozenset(
    "january february march april may june july august september october november december sept".split()
)
_MAGNITUDES = frozenset({"hundred", "thousand", "million", "billion", "trillion", "percent"})
_CJK_NUMERALS = frozenset("〇零一二三四五六七八九十百千万亿两年月日号时分秒")
_NEGATIONS = frozenset("not no never none nor cannot without 不 没 没有 未 非 无 别 勿".split())
_STATIVE = frozenset("is are was were has have had be been remains stands 是 为 為 有 共有 达 約 约".split())
_NAME_PARTICLES = frozenset("de del la le van von der den da di du bin al y".split())


@dataclass
class Comparison:
    """How two texts differ: the one changed value ('old → new'), or why they are not one claim."""

    change: str | None = None
    old_value: str = ""  # the changed slot's values as written (when `change` is set)
    new_value: str = ""
    apart: str | None = None  # why they are claims about different subjects or times
    same: bool = False  # aligned, nothing replaced: only details one side has
    details: list[str] = field(default_factory=list)


def _content(tok: Token) -> bool:
    return not tok.glue and tok.key not in STOPWORDS and tok.key not in _NAME_PARTICLES


def _is_month(tok: Token) -> bool:
    w = tok.text.strip(PUNCT)
    return w[:1].isupper() and w.lower() in _MONTH_NAMES | {m for m in MONTHS if m != "may"}


def dated(tok: Token) -> bool:
    """A number, a date word, a date unit or a magnitude: part of a value."""
    key = tok.key
    if numbers(tok.text) or key in _MAGNITUDES or _is_month(tok):
        return True
    return unspaced(tok.text) and all(ch in _CJK_NUMERALS for ch in tok.text)


def _named(tok: Token) -> bool:
    """A capitalized word, or a Chinese/Japanese proper name."""
    text = tok.text.strip(PUNCT)
    if unspaced(text):
        return proper(text)
    return text[:1].isupper()


def _quoted(span: list[Token]) -> bool:
    text = join(span)
    return len(text) > 2 and text[0] in "\"'“‘«《「『" and text.rstrip(".,;:")[-1:] in "\"'”’»》」』"


def value_kind(span: list[Token], initial: bool, text: list[Token]) -> str | None:
    """'value' for a number, date, name or title span; 'maybe' for a lone capitalized first word
    (a sentence's first word is capitalized anyway: a name only if the text capitalizes it
    again, not at another sentence's start); None for anything else."""
    content = [t for t in span if _content(t) or dated(t)]
    if not content or any(t.key in _NEGATIONS for t in span):
        return None
    if any(unspaced(t.text) for t in content):  # jieba may cut an unknown name into characters:
        whole = "".join(t.text for t in content)  # judge the span as one word ("黄" "渤" → 黄渤)
        return "value" if any(dated(t) for t in content) or proper(whole) or _quoted(span) else None
    if not _quoted(span) and not all(dated(t) or _named(t) for t in content):
        return None
    if any(dated(t) for t in content) or _quoted(span) or len(content) > 1:
        return "value"
    first = content[0]
    if initial and span[0] is first and not unspaced(first.text) and not any(c.isupper() for c in first.text[1:]):
        later = {b.key for a, b in zip(text, text[1:], strict=False) if _named(b) and a.text[-1:] not in ".!?"}
        return "value" if first.key in later or _singular_subject(span[0], text) else "maybe"
    return "value"


_PLURAL_VERBS = frozenset("are were have do".split())


def _singular_subject(first: Token, text: list[Token]) -> bool:
    """A bare singular word opening the sentence: in English a singular count noun takes a
    determiner ("The dog …"), so without one it is a name ("France won …"); a plural ("Dogs
    are …", "Men are …", "Stocks close …") names a class of things, not one thing."""
    word = first.text.strip(PUNCT)
    after = text[1].key if len(text) > 1 else ""
    return word.isalpha() and not word.lower().endswith("s") and after not in _PLURAL_VERBS


def _kind(span: list[Token]) -> tuple[bool, bool]:
    """(has a number, has a name): a slot takes a value of the same kind."""
    if any(unspaced(t.text) for t in span):  # no casing: jieba's tags are too unsteady to compare
        return any(numbers(t.text) for t in span), True
    return any(numbers(t.text) for t in span), any(_named(t) for t in span if _content(t) and not dated(t))


def _edge_words(span: list[Token]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Function words leading and trailing the span ("in Paris" vs "by Hugo": another role)."""
    keys = [t.key for t in span if not t.glue and not dated(t)]  # "May" is a month, not a modal
    lead = tuple(takewhile(lambda k: k in STOPWORDS, keys))
    trail = tuple(takewhile(lambda k: k in STOPWORDS, reversed(keys[len(lead) :])))
    stop = {"a", "an", "the"}
    return tuple(k for k in lead if k not in stop), tuple(k for k in trail if k not in stop)


def separable(toks: list[Token], i1: int, i2: int) -> bool:
    """Whether toks[i1:i2], present on one side only, is a detail of its own: a clause or phrase
    set off by punctuation or a function word ("… old and very clingy", "，很粘人"), rather
    than a word that changes the phrase it sits in ("10 Afghan civilians" → "5 Afghan")."""
    first, before = toks[i1], toks[i1 - 1] if i1 else None
    opens, closes = "(,;:—–-，、；：（", ",;:(—–-，、；："
    if first.glue or first.text[:1] in opens or (before is not None and before.text[-1:] in closes):
        return True
    if unspaced(first.text):
        return i2 == len(toks) and before is not None and before.glue
    return first.key in STOPWORDS or (i1 == 0 and toks[i2 - 1].text[-1:] in ",;:")


def bare(span: list[Token]) -> str:
    """A value as reported: no surrounding punctuation, no possessive ("Spain's" is "Spain")."""
    text = join(span).strip(PUNCT + " ")
    return text[:-2] if text.endswith(("'s", "’s")) else text


def _within(part: str, whole: str) -> bool:
    return part.lower() in whole.lower()


def spelling_variant(a: str, b: str) -> bool:
    """Two names that are one name spelled, inflected or abbreviated differently."""
    if unspaced(a) or unspaced(b):
        return False
    a, b = sorted((a.lower().replace(".", ""), b.lower().replace(".", "")), key=len)
    initials = "".join(w[:1] for w in b.split())
    return SequenceMatcher(None, a, b).ratio() >= 0.6 or a in (initials, b[: len(a)]) or a[:4] == b[:4]


def _stems(toks: list[Token]) -> set[str]:
    out: set[str] = set()
    for t in toks:
        if unspaced(t.text):
            out |= {t.key} if _content(t) else set()
        else:
            out |= {stem(w) for w in content_words(t.text)}
    return out


@lru_cache(maxsize=2048)
def compare(older: str, newer: str, *, min_shared: int = 4, min_aligned: float = 0.7) -> Comparison:
    """Compare two texts as claims (see the module docstring). Cached: `relation`, `replaced_stems`
    and `kept_apart` ask about the same pair; the result must not be changed by callers."""
    old, new = tokens(older), tokens(newer)
    ops = opcodes(old, new)
    spans = regions(old, new, ops)
    solid = [sum(not t.glue for t in side) for side in (old, new)]
    equal = [t for tag, i1, i2, _, _ in ops if tag == "equal" for t in old[i1:i2] if not t.glue]
    if len(spans) > MAX_REGIONS or len(equal) < MIN_ALIGNED_ANY * min(solid):
        return Comparison()
    swaps: list[tuple[str, str, list[Token], list[Token]]] = []
    out = Comparison()
    for i1, i2, j1, j2 in spans:
        o, n = old[i1:i2], new[j1:j2]
        if not o or not n:
            side, a, b = (old, i1, i2) if o else (new, j1, j2)
            if any(t.key in WHEN_WORDS or _is_month(t) for t in side[a:b]):
                return Comparison()  # one side is pinned to a day or month the other does not name
            wordy = [t for t in side[a:b] if _content(t) and not numbers(t.text)]
            if wordy and not separable(side, a, b):
                return Comparison()  # a content word inside the aligned frame: another claim
            out.details.append(("old: " if o else "new: ") + join(side[a:b]))
            continue
        ro, rn = _repeated(o), _repeated(n)
        vo, vn = (ro, rn) if ro and rn else (o, n)
        problem = _not_a_slot(vo, vn, i1 == 0 and j1 == 0, old, new) or _dated_day(old, i1, i2)
        if problem:
            return Comparison(apart=problem if problem.startswith("when") else None)
        swaps.append((bare(vo), bare(vn), o, n))
    # the rest of the claim must match: a changed span of one kind of value counts as one token,
    # however long it is or however often it appears ("2021年3月3日" is six tokens, a name may
    # appear twice); a span mixing names and numbers ("Wigan 3-2 Wolves") counts in full
    sides = ([swap[2] for swap in swaps], [swap[3] for swap in swaps])
    frame = [
        total - sum(sum(not t.glue for t in span) - 1 for span in side if not _mixed(span))
        for total, side in zip(solid, sides, strict=True)
    ]
    if len(equal) < min_aligned * min(frame):
        return Comparison()
    return _one_slot(out, swaps, old, new, min_shared)


def _mixed(span: list[Token]) -> bool:
    """Names and numbers in one span: several values (a score between two teams), not one."""
    content = [t for t in span if not t.glue]
    return any(numbers(t.text) for t in content) and any(_named(t) and not dated(t) for t in content)


def _repeated(span: list[Token]) -> list[Token] | None:
    """The value of a span that is one value twice around punctuation ("李伟，李伟": one slot
    changed where it appears twice, joined into one span by kb/align.py `regions`)."""
    for k, tok in enumerate(span):
        if tok.glue and k and [t.key for t in span[:k]] == [t.key for t in span[k + 1 :]]:
            return span[:k]
    return None


def _not_a_slot(o: list[Token], n: list[Token], initial: bool, old: list[Token], new: list[Token]) -> str | None:
    """Why a replaced span pair is not one slot's value changed (None: it is)."""
    if len(o) > MAX_VALUE_TOKENS or len(n) > MAX_VALUE_TOKENS or _kind(o) != _kind(n):
        return "not a value of the same kind"
    if _edge_words(o) != _edge_words(n):
        return "another role"  # "at least 19" vs "26", "in Paris" vs "by Hugo"
    if any(t.key in WHEN_WORDS for t in o + n):
        return "when: a weekday or relative day changed (claims about different times)"
    kinds = {value_kind(o, initial, old), value_kind(n, initial, new)}
    if None in kinds or kinds == {"maybe"}:
        return "not a value, or two capitalized first words with no sign of being names"
    return None


def _dated_day(toks: list[Token], i1: int, i2: int) -> str | None:
    """A date beside a weekday ("for Friday, December 6") is the day a report is for: when, not what."""
    near = toks[max(0, i1 - 2) : i2 + 2]
    if any(dated(t) for t in toks[i1:i2]) and any(t.key in WHEN_WORDS for t in near):
        return "when: a dated day (a weekday beside the date) changed: claims about different days"
    return None


def _one_slot(
    out: Comparison,
    swaps: list[tuple[str, str, list[Token], list[Token]]],
    old: list[Token],
    new: list[Token],
    min_shared: int,
) -> Comparison:
    """The comparison once every span is a value swap or a detail: one consistent slot, or not."""
    if not swaps:
        out.same = True
        return out
    main = max(swaps, key=lambda s: len(s[0]) + len(s[1]))
    if any(not (_within(a, main[0]) and _within(b, main[1])) for a, b, _, _ in swaps):
        return Comparison(apart="two values changed: another subject's claim")
    before, after = main[0], main[1]
    if numbers(before) and numbers(before) == numbers(after):
        return Comparison()  # "$200" / "200 USD": the same value written another way
    if not numbers(before) and spelling_variant(before, after):
        return Comparison()  # "Syria" / "Syrian": the same name written another way
    if _left_unchanged(swaps, old, new):
        return Comparison(apart="the old value is left unchanged elsewhere: not one slot changed throughout")
    shared = _stems(old) & _stems(new)
    if len(shared) < min_shared and not _short_claim(out, shared, old, new):
        return Comparison()
    out.change, out.old_value, out.new_value = f"{before} → {after}", before, after
    return out


def _left_unchanged(swaps: list[tuple[str, str, list[Token], list[Token]]], old: list[Token], new: list[Token]) -> bool:
    """The old value also appears where the texts align (changed in one place, kept in another)."""
    keys = {tuple(t.key for t in o if not t.glue) for _, _, o, _ in swaps}
    new_keys = [t.key for t in new if not t.glue]
    for value in keys:
        size = len(value)
        if size and any(tuple(new_keys[k : k + size]) == value for k in range(len(new_keys) - size + 1)):
            return True
    return False


def _short_claim(out: Comparison, shared: set[str], old: list[Token], new: list[Token]) -> bool:
    """A short fact: nothing but the slot and an old detail differ, ≥ 2 shared content words,
    and a stative verb states an attribute of the subject ("Momo is 3 years old")."""
    if len(shared) < 2 or any(d.startswith("new: ") for d in out.details):
        return False
    if any(unspaced(t.text) for t in old + new):
        return True  # Chinese states an age or a count without a verb ("小明今年3岁")
    frame = {t.key for t in old + new} | {w for t in old + new if unspaced(t.text) for w in t.text}
    return bool(frame & _STATIVE)


# --- the second opinion on pairs the rule cannot decide ------------------------------------------

VERDICTS = JUDGE_VERDICTS
# (older text, newer text) → one of VERDICTS, or None (no opinion: no model, a failed call, an
# answer outside the enum). Injected by the caller; models/judge.py holds the model's.
Judge = Callable[[str, str], "str | None"]
MIN_SHARED_SHARE = 0.5  # below this share of the shorter text's content words in common: not one claim


def shared_share(older: str, newer: str) -> float:
    """The share of the shorter text's content words (stems; jieba's words in Chinese) the other holds."""
    a, b = _stems(tokens(older)), _stems(tokens(newer))
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def undecided(older: str, newer: str, *, min_share: float = MIN_SHARED_SHARE) -> bool:
    """The rule has no verdict on the pair (not one slot changed, no sign of different times or
    subjects, not the same claim), yet the texts share ≥ `min_share` of their content words: a
    pair a second opinion may settle. Pairs sharing less are another claim, and nobody is asked."""
    found = compare(older, newer)
    if found.change is not None or found.apart or found.same:
        return False
    return shared_share(older, newer) >= min_share


def second_opinion(older: str, newer: str, judge: Judge) -> str | None:
    """The judge's verdict on an undecided pair when it is usable, else None (the rule's stands):
    one of VERDICTS; 'same' only when no number is replaced and both or neither text is negated;
    'update' and 'contradiction' only when a number or content word is replaced (something changed)."""
    try:
        verdict = judge(older, newer)
    except DeepResearchError:  # a second opinion must never fail a write
        return None
    if verdict not in VERDICTS:
        return None
    old, new = tokens(older), tokens(newer)
    if verdict == "same" and (_swapped(numbers(older), numbers(newer)) or _negated(old) != _negated(new)):
        return None
    if verdict in ("update", "contradiction") and not _swapped(
        _stems(old) | numbers(older), _stems(new) | numbers(newer)
    ):
        return None
    return verdict


def _swapped(a: set[str], b: set[str]) -> bool:
    """Something of `a` gone and something else come in `b`."""
    return bool(a - b) and bool(b - a)


def _negated(toks: list[Token]) -> bool:
    return any(t.key in _NEGATIONS or t.key.endswith("n't") for t in toks)
