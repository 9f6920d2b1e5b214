"""Align two facts token by token, in any script: the tokens `kb.merge` compares claims on.

Spaced scripts split on whitespace (a token keeps its punctuation: "Florida," is one token,
compared as "florida"). Runs of Chinese or Japanese (no spaces between words) are cut into
words by jieba (loaded on the first such text, ~0.5 s once per process; its dictionary ships
inside the package, nothing is downloaded), with numbers, Latin words and each punctuation
mark as tokens of their own: "共有70个议席" → 共有 · 70 · 个 · 议席. Each token keeps the
whitespace before it, so joining tokens gives back the text exactly as written.

`regions` groups the differing stretches of an alignment into value-sized spans: two stretches
separated only by value glue (punctuation, a date unit, a day number, a name particle) are one
span, so "Nov 12, 2020" → "November 12, 2010" and "布莱恩·辛格" → "史蒂文·斯皮尔伯格" are one
changed value each, not two.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

# scripts written without spaces between words (Hangul is spaced: it splits on whitespace)
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
UNSPACED_RUN = re.compile(f"[{_UNSPACED}]+")
_PIECE = re.compile(rf"[{_UNSPACED}]+|\d+(?:[.,:]\d+)*[%‰]?|[^\W\d_]+(?:['’.][^\W\d_]+)*|\S", re.UNICODE)
PUNCT = ".,;:!?\"'()[]“”‘’«»《》「」『』【】、，。；：！？（）·•…—–-"
# date units and particles that sit between the parts of one value ("5月12日", "Li · Wei")
_DATE_UNITS = frozenset("年月日号時时分秒")
_CONNECTORS = frozenset("de del la le van von der den da di du bin al y ·".split())
_CLAUSE_END = (",", ";", ":", "，", "；", "：", "、")


@dataclass(frozen=True)
class Token:
    """One token: the whitespace before it, its text as written, and the key it is aligned on."""

    sep: str
    text: str
    key: str

    @property
    def glue(self) -> bool:
        """Punctuation only: it holds no claim."""
        return not any(ch.isalnum() for ch in self.text)


def unspaced(text: str) -> bool:
    """True when the text holds Chinese or Japanese (words not separated by spaces)."""
    return bool(UNSPACED_RUN.search(text))


@lru_cache(maxsize=1)
def _jieba():  # type: ignore[no-untyped-def]
    import jieba  # deferred: ~0.5 s to load its dictionary, needed only for unspaced text

    jieba.setLogLevel(logging.WARNING)  # it prints "Building prefix dict …" to stderr otherwise
    return jieba


@lru_cache(maxsize=4096)
def segment(run: str) -> tuple[str, ...]:
    """The words of a run of Chinese/Japanese characters (jieba, HMM on for unknown names)."""
    return tuple(w for w in _jieba().lcut(run, HMM=True) if w)


@lru_cache(maxsize=4096)
def known_word(word: str) -> bool:
    """Whether jieba's dictionary lists the word (an unlisted word is most often a name)."""
    return bool(_jieba().dt.FREQ.get(word))


@lru_cache(maxsize=4096)
def proper(word: str) -> bool:
    """A Chinese/Japanese word tagged as a person, place, organization or other proper name,
    or not in the dictionary at all (names rarely are)."""
    import jieba.posseg

    flags = {p.flag for p in jieba.posseg.lcut(word, HMM=True)}
    return bool(flags & {"nr", "ns", "nt", "nz", "nrt", "nrfg", "eng"}) or not known_word(word)


def word_key(token: str) -> str:
    """A token as a word to match exactly: lower case, no punctuation, no plural or possessive 's'."""
    w = unicodedata.normalize("NFKC", token).lower().strip(PUNCT)
    w = w[:-2] if w.endswith(("'s", "’s")) else w
    w = w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") and w.isascii() else w
    return w.replace(",", "") if w[:1].isdigit() else w


def tokens(text: str) -> list[Token]:
    """The text's tokens (see the module docstring); "".join(sep + text) gives it back."""
    out: list[Token] = []
    for match in re.finditer(r"(\s*)(\S+)", text):
        sep, chunk = match.groups()
        if not UNSPACED_RUN.search(chunk):
            out.append(Token(sep, chunk, word_key(chunk) or chunk))
            continue
        for piece in _PIECE.findall(chunk):
            for word in segment(piece) if UNSPACED_RUN.fullmatch(piece) else (piece,):
                key = word_key(word) or unicodedata.normalize("NFKC", word)
                out.append(Token(sep, word, key))
                sep = ""
    return out


def join(toks: list[Token]) -> str:
    """Tokens back to text, as written."""
    return "".join(t.sep + t.text for t in toks).strip()


def opcodes(old: list[Token], new: list[Token]) -> list[tuple[str, int, int, int, int]]:
    """difflib opcodes over the tokens' keys."""
    matcher = SequenceMatcher(None, [t.key for t in old], [t.key for t in new], autojunk=False)
    return [(str(tag), i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes()]


def _glue(token: Token, month: bool) -> bool:
    """Between two parts of one value: punctuation, a date unit, a day number, a name particle."""
    key = token.key
    return (
        token.glue
        or key in _DATE_UNITS
        or key in _CONNECTORS
        or (key.isdigit() and len(key) <= 2)
        or (month and key[:3] in _MONTH_KEYS)
    )


_MONTH_KEYS = frozenset(m[:3] for m in "jan feb mar apr may jun jul aug sep oct nov dec".split())


def regions(
    old: list[Token], new: list[Token], ops: list[tuple[str, int, int, int, int]] | None = None
) -> list[tuple[int, int, int, int]]:
    """The differing stretches (i1, i2, j1, j2), stretches joined by at most two glue tokens.
    `ops`: the caller's `opcodes(old, new)`, when it has them already."""
    out: list[tuple[int, int, int, int]] = []
    pending: list[tuple[str, int, int, int, int]] = list(opcodes(old, new) if ops is None else ops)
    for n, (tag, i1, i2, j1, j2) in enumerate(pending):
        if tag == "equal":
            continue
        if out and n >= 2 and pending[n - 1][0] == "equal":
            _, e1, e2, _, _ = pending[n - 1]
            last = out[-1]
            between = old[e1:e2]
            if last[1] == e1 and 0 < len(between) <= 2 and all(_glue(t, True) for t in between):
                if (i2 > i1 or last[1] > last[0]) and (j2 > j1 or last[3] > last[2]):
                    out[-1] = (last[0], i2, last[2], j2)
                    continue
        out.append((i1, i2, j1, j2))
    out = [part for span in out for part in _split_detail(old, new, span)]
    return [_with_units(old, new, span) for span in out]


def _split_detail(
    old: list[Token], new: list[Token], span: tuple[int, int, int, int]
) -> list[tuple[int, int, int, int]]:
    """A replaced stretch whose longer side goes on past a clause break ("Ruiz, a poet from Quito"
    → "Wei"): the value, then a detail only that side has."""
    i1, i2, j1, j2 = span
    if i2 == i1 or j2 == j1:
        return [span]
    for side, a, b, other in ((old, i1, i2, new[j1:j2]), (new, j1, j2, old[i1:i2])):
        if any(t.text.endswith(_CLAUSE_END) or t.glue for t in other[:-1]):
            continue
        cut = next((k + 1 for k in range(a, b - 1) if side[k].text.endswith(_CLAUSE_END) or side[k + 1].glue), None)
        if cut is not None and b - cut >= 2:
            return [(i1, cut, j1, j2), (cut, i2, j2, j2)] if side is old else [(i1, i2, j1, cut), (i2, i2, cut, j2)]
    return [span]


def _with_units(old: list[Token], new: list[Token], span: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """A changed number followed by the same date unit takes the unit in ("3月3" → "3月3日")."""
    i1, i2, j1, j2 = span
    if i2 > i1 and j2 > j1 and i2 < len(old) and j2 < len(new) and old[i2].key in _DATE_UNITS:
        if old[i2].key == new[j2].key and old[i2 - 1].key[-1:].isdigit() and new[j2 - 1].key[-1:].isdigit():
            return i1, i2 + 1, j1, j2 + 1
    return span
