"""Plain-text helpers shared by extraction, summaries, chunking and search (no model needed)."""

from __future__ import annotations

import re
import unicodedata

# Sentence ends: Latin punctuation followed by space/end, or CJK full-width punctuation. The next sentence
# may open with a quote, a bracket or a Markdown code span ("`research --json` carries …").
_SENTENCE_END = re.compile(
    r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9\u00C0-\u024F\u3400-\u4dbf\u4e00-\u9fff]|`)|(?<=[。！？；])"
)
_ABBREVIATIONS = (
    "e.g.",
    "i.e.",
    "etc.",
    "vs.",
    "mr.",
    "mrs.",
    "dr.",
    "prof.",
    "inc.",
    "ltd.",
    "co.",
    "u.s.",
    "fig.",
    "no.",
    "st.",
    "jr.",
    "sr.",
)
# An abbreviation only counts as a whole word: "first." or "pianist." end a sentence, "St." does not.
_ENDS_WITH_ABBREVIATION = re.compile(
    r"(?:^|[\s(\[\"'])(?:" + "|".join(re.escape(a) for a in _ABBREVIATIONS) + r")$", re.IGNORECASE
)
# A year of the common era in digits, 1000–2099 ("in 1998", "the 2010 census"); the group is the year.
YEAR = re.compile(r"\b(1[0-9]\d{2}|20\d{2})\b")
# Words a sentence commonly opens with (claims.py uses them too).
SENTENCE_OPENER = re.compile(
    r"^(?:The|A|An|In|If|When|This|These|That|Those|It|For|Each|Every|All|Some|Most|Many|No|There|As|On|At|By|"
    r"To|With|Without|After|Before|Since|Because|Although|While|Once|Unless|Until|Only|One|Two|However|But|And|"
    r"Also|Note|Any|Such|Other|Its|Their|We|You|Our|Your|Both|Either|Neither|From|Of|Under|During|Within|"
    r"Instead|Thus|Hence|So|Then|Even|Where|Whether|What|Which|Who|How|Why|Here|Suppose|Consider|Use|See|"
    r"He|She|They|His|Her|I)\b"
)
# An initial inside a name is not a sentence end: after a capitalized word or another initial
# ("John F. Kennedy", "Albert E. Smith"), or before another initial ("by J. K. Rowling"), unless the next
# piece opens like a sentence. "written in C. Davina McCall …" and "World War I." ("I" is left out) end
# sentences; a name's first initial after a lower-case word ("of G. Stanley Hall") stays cut. (About
# 2-3 % of the sentences of the multi-hop evaluation files' paragraphs ended on an initial.)
_ENDS_WITH_INITIAL = re.compile(r"(?:^|[\s(\[\"'])[A-HJ-Z]\.$")
_AFTER_NAME_WORD = re.compile(r"(?:^|\s)(?:[A-Z][\w'’\-]*|[A-Z]\.)\s+[A-HJ-Z]\.$")
_INITIAL_PIECE = re.compile(r"^[A-Z]\.$")


def _name_goes_on(buffer: str, following: str | None) -> bool:
    """Whether `buffer` ends on an initial of a name that `following` (the next piece) goes on with."""
    if following is None or not _ENDS_WITH_INITIAL.search(buffer) or SENTENCE_OPENER.match(following):
        return False
    return bool(_AFTER_NAME_WORD.search(buffer) or _INITIAL_PIECE.match(following))


_WORD = re.compile(r"[\w][\w\-.']*[\w]|[\w]", re.UNICODE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*%?")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_CJK_RUN = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+|[^\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+"
)

# Credentials inside URLs: the user-info part (`scheme://user:password@host`) and key-like query values.
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s?#@]*(?:@[^/\s?#@]*)*@")
_URL_SECRET_PARAM = re.compile(
    r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|auth|password|passwd|secret|signature|sig)=)[^&#\s'\"]+"
)

STOPWORDS = frozenset(
    """a an the and or but if then else of in on at to for from by with without about into over under
    is are was were be been being am do does did has have had having it its this that these those there
    here as not no yes can could should would will shall may might must than so such very also just
    what which who whom whose when where why how i you he she we they them his her our their your my me us
    more most less least other some any all each both few many much one own same only""".split()
)


def normalize_space(text: str) -> str:
    """Collapse runs of whitespace to single spaces and strip the ends."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences (Latin and CJK punctuation), keeping common abbreviations intact."""
    out: list[str] = []
    for paragraph in re.split(r"\n\s*\n|\r\n\s*\r\n", text):
        paragraph = normalize_space(paragraph)
        if not paragraph:
            continue
        pieces = [p.strip() for p in _SENTENCE_END.split(paragraph) if p.strip()]
        buffer = ""
        for i, piece in enumerate(pieces):
            buffer = f"{buffer} {piece}".strip() if buffer else piece
            following = pieces[i + 1] if i + 1 < len(pieces) else None
            if not (_ENDS_WITH_ABBREVIATION.search(buffer) or _name_goes_on(buffer, following)):
                out.append(buffer)
                buffer = ""
        if buffer:
            out.append(buffer)
    return out


def has_cjk(text: str) -> bool:
    """True if the text contains Chinese, Japanese or Korean characters."""
    return bool(_CJK.search(text))


def words(text: str) -> list[str]:
    """Lower-cased word tokens; CJK text contributes character bigrams (no spaces to split on)."""
    lowered = unicodedata.normalize("NFKC", text).lower()
    tokens = [w.strip(".'-") for w in _WORD.findall(lowered)]
    out: list[str] = []
    for token in tokens:
        if not token:
            continue
        for run in _CJK_RUN.findall(token):
            if has_cjk(run):
                out.extend(a + b for a, b in zip(run, run[1:], strict=False))
                if len(run) == 1:
                    out.append(run)
            elif run.strip(".'-"):
                out.append(run.strip(".'-"))
    return out


def content_words(text: str) -> list[str]:
    """Word tokens without stopwords (the words that carry a claim)."""
    return [w for w in words(text) if w not in STOPWORDS]


def stem(word: str) -> str:
    """A crude stem so 'years'/'year' and 'founded'/'founding' match (grounding and merging share it)."""
    return word[:6] if len(word) > 6 else word.rstrip("s") if len(word) > 3 else word


def numbers(text: str) -> set[str]:
    """Numbers as written (commas dropped), e.g. {'2023', '40%', '1.5'}."""
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def truncate(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` characters at a word boundary, with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:") + "…"


# Bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069): they reorder what a terminal
# shows ("Trojan Source"), so stored text prints them escaped like the control characters.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    """`text` safe to print on a terminal: control characters (escape sequences that set the window
    title or clear the screen, carriage returns, C1 codes), line separators and bidi overrides as
    backslash escapes, the way Python writes them in a string literal. `keep_newlines` keeps
    newlines and tabs (a report, a multi-line message).

    The one sanitizer of every CLI line that prints stored or external text (`cli.common.echo`)."""
    kept = "\n\t" if keep_newlines else ""
    if text.isprintable() and not _BIDI.intersection(text):
        return text
    return "".join(
        repr(c)[1:-1] if c not in kept and (unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in _BIDI) else c
        for c in text
    )


def redact_secrets(text: str) -> str:
    """`text` with credentials in URLs replaced by `***` (user:password@ and key/token query values).

    The one redaction every printer of configuration, URLs and errors uses (CLI lines, doctor,
    `models list/info`, logs, MCP errors, saved run errors)."""
    if "://" not in text and "=" not in text:
        return text
    return _URL_SECRET_PARAM.sub(r"\1***", _URL_USERINFO.sub(r"\1***@", text))


def join_url(base: str, path: str, params: dict[str, str] | None = None) -> str:
    """`base` with `path` appended to its path and `params` added to its query string.

    `http://h/v1?api_key=K` + `/models` is `http://h/v1/models?api_key=K`, not
    `http://h/v1?api_key=K/models`; the base's own query parameters are kept first."""
    from urllib.parse import urlencode, urlsplit, urlunsplit

    parts = urlsplit(base)
    query = "&".join(q for q in (parts.query, urlencode(params or {})) if q)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, query, ""))
