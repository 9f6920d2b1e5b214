"""Chunking: text split into overlapping windows of words, from a string or from text that
arrives in pieces (a large file read block by block), with the same chunks either way.

The streaming form holds one window of words plus the current piece, never the whole text or
a list of all its words, so its memory does not grow with the length of the text.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

# A word: one or two CJK characters (so 芯片销量 gives 芯片 / 销量), or a run of non-space characters.
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]{1,2}|\S+")
_SPACE = re.compile(r"\s")
# Text without any whitespace is cut after this many characters even though a word may
# straddle the cut (a 4 MiB "word" is not prose; its chunks may differ from one-shot chunking).
MAX_CARRY = 1 << 22
# chunk_text feeds a long string in slices of this many characters (bounds the word list).
SLICE = 1 << 18


def _safe_end(buf: str, pos: int) -> int:
    """Where the words of buf[pos:] are known complete: the last whitespace (a later piece may
    still extend the word before it otherwise), or pos when there is none yet."""
    last = -1
    for match in _SPACE.finditer(buf, max(pos, len(buf) - 4096)):
        last = match.start()
    if last < 0 and len(buf) - pos > 4096:  # rare: no space in the last 4 KiB, look further back
        found = [m.start() for m in _SPACE.finditer(buf, pos)]
        last = found[-1] if found else -1
    if last < 0:
        return len(buf) if len(buf) - pos > MAX_CARRY else pos
    return max(last, pos)


def iter_chunks(pieces: Iterable[str], size: int, overlap: int) -> Iterator[str]:
    """Windows of about `size` words sharing `overlap` words, over text given in `pieces`;
    the same chunks as `chunk_text` of the joined text, in bounded memory."""
    step = max(1, size - min(overlap, size - 1))
    buf = ""
    spans: list[tuple[int, int]] = []  # words of buf already found, from the current window's first
    pos = 0  # buf[:pos] is tokenized
    for piece in pieces:
        buf += piece
        end = _safe_end(buf, pos)
        spans.extend(m.span() for m in _WORD.finditer(buf, pos, end))
        pos = end
        head = 0
        while len(spans) - head > size:  # a later word exists, so this window is not the last
            yield buf[spans[head][0] : spans[head + size - 1][1]].strip()
            head += step
        cut = spans[head][0] if head < len(spans) else pos
        spans = [(a - cut, b - cut) for a, b in spans[head:]]
        buf, pos = buf[cut:], pos - cut
    spans.extend(m.span() for m in _WORD.finditer(buf, pos))
    head = 0
    while head < len(spans):
        end = min(len(spans), head + size)
        yield buf[spans[head][0] : spans[end - 1][1]].strip()
        if end >= len(spans):
            break
        head += step


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """Split text into windows of about `size` words sharing `overlap` words (CJK: 2 chars = 1 word)."""
    return list(iter_chunks((text[i : i + SLICE] for i in range(0, len(text), SLICE)), size, overlap))
