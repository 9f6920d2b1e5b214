"""Plain text from Markdown (with MyST roles) and reStructuredText sources.

A documentation set written in Markdown or reStructuredText reaches the corpus and the knowledge base
as its prose, not its markup: a stored fact reads "The install page explains how to install pip",
not "The {doc}`install <installation>` page explains …", and an .rst page's title is its title, not
the `.. _label:` line above it. What is removed:
- links keep their text: `[text](url)`, `[text][ref]`, `![alt](src)`, rST `` `text <url>`_ ``;
- roles keep their text: rST `` :ref:`text <target>` ``, `` :pep:`440` `` ("PEP 440"), MyST
  `` {doc}`text <target>` ``; a target alone stays as written;
- emphasis marks (`**bold**`, `*em*`; not `__init__`), rST ``` ``literal`` ``` becomes `` `literal` `` like Markdown's;
- lines that only carry structure: rST section adornments, `.. _label:` targets, comments,
  directive lines and their `:option:` lines (the directive's indented body stays: a note's prose, a
  code block's code), a page's `:orphan:`-style flags; Markdown reference definitions, code fences,
  thematic breaks, MyST `(label)=` targets.
Code inside fences and directive bodies is kept: it is searchable, and the extractor does not store
code as facts. Lines are read one by one and inline markup is cleaned per paragraph (a role or link may
run over a line end; at most PARAGRAPH_LINES lines together), so a file streamed in pieces is cleaned the
same as one read whole, in bounded memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

MARKDOWN_SUFFIXES = (".md", ".markdown")
RST_SUFFIXES = (".rst",)
PARAGRAPH_LINES = 200  # lines cleaned together at most (inline markup may run over a line end)

_ADORNMENT = re.compile(r"^\s*([=\-`:'\"~^_*+#<>])\1{2,}\s*$")
_RST_TARGET = re.compile(r"^\s*\.\.\s+_[^:]*:")  # .. _label:   .. _`pip install`:
_RST_DIRECTIVE = re.compile(r"^\s*\.\.\s+[\w:.-]+::")  # .. note::   .. code-block:: python
_RST_COMMENT = re.compile(r"^\s*\.\.(?:\s|$)")
_OPTION_LINE = re.compile(r"^\s*:[^:\s`][^:`]*:(?:\s.*)?$")  # a directive's :maxdepth: 2   :http-equiv=refresh: 3
_FLAG_LINE = re.compile(r"^:[\w-]+:\s*$")  # a page's :orphan:
_MD_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+\S")
_MD_FENCE = re.compile(r"^\s*(?:```|~~~)")
_MYST_TARGET = re.compile(r"^\s*\([\w.-]+\)=\s*$")

_ROLE = re.compile(r"(?::[\w-]+(?::[\w-]+)?:|\{[\w:-]+\})`([^`]+)`")
_PEP_RFC = re.compile(r"(?::(pep|rfc):|\{(pep|rfc)\})`(\d+)`", re.IGNORECASE)
_FOOTNOTE_REF = re.compile(r"\[\^[^\]\s]+\]|\[(?:#[\w-]*|\d+|\*)\]_")  # Markdown [^note], rST [1]_ [#]_
_ENUMERATOR = re.compile(r"^(\s*)#\.\s+")  # rST's auto-numbered "#. item"
_INTERSPHINX = re.compile(r"^[\w.-]+:(?=\S)")  # pypug:Requirement Specifier
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^`>]+>`__?")
_RST_REF = re.compile(r"`([^`<]+)`__?(?!\w)")
_RST_LITERAL = re.compile(r"``(.+?)``")
_MD_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_MD_LINK = re.compile(r"\[([^\]]+)\](?:\([^)]*\)|\[[^\]]*\])")
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")  # not __x__: Python's __init__ is no emphasis
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*]+?)(?<=\S)\*(?![\w*])")


def _role_text(match: re.Match[str]) -> str:
    body = match.group(1)
    labeled = re.fullmatch(r"(.+?)\s*<[^<>]+>", body, re.DOTALL)
    return labeled.group(1) if labeled else _INTERSPHINX.sub("", body.lstrip("~!"))


def plain_inline(line: str) -> str:
    """A line's (or a paragraph's) inline markup replaced by its text."""
    line = _PEP_RFC.sub(lambda m: f"{(m.group(1) or m.group(2)).upper()} {m.group(3)}", line)
    line = _ROLE.sub(_role_text, line)
    line = _FOOTNOTE_REF.sub("", line)
    line = _RST_LITERAL.sub(r"`\1`", line)
    line = _RST_LINK.sub(r"\1", line)
    line = _RST_REF.sub(r"\1", line)
    line = _MD_IMAGE.sub(r"\1", line)
    line = _MD_LINK.sub(r"\1", line)
    line = _STRONG.sub(r"\1", line)
    return _EMPHASIS.sub(r"\1", line)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def plain_lines(lines: Iterable[str], kind: str) -> Iterator[str]:
    """The lines (without line ends) of a `kind` ("md" or "rst") source as plain text; a removed line
    leaves an empty one, so paragraphs stay apart."""
    # After an rST directive line its option lines go too; after a comment, every line indented deeper
    # (blank lines among them): (the opening line's indent, whether any deeper line goes or options only).
    head: tuple[int, bool] | None = None
    fenced = False  # inside a Markdown code fence: code, kept as written
    paragraph: list[str] = []  # lines of prose so far, cleaned together
    for line in lines:
        if kind == "md" and _MD_FENCE.match(line):
            yield from _flush(paragraph)
            fenced = not fenced
            yield ""
            continue
        if fenced:
            yield line
            continue
        if head is not None:
            indent, everything = head
            if not line.strip() or (_indent(line) > indent and (everything or _OPTION_LINE.match(line))):
                yield ""
                continue
            head = None
        if line.strip() and not _ADORNMENT.match(line) and not _structure_line(line, kind):
            paragraph.append(_ENUMERATOR.sub(r"\1", line) if kind == "rst" else line)
            if len(paragraph) >= PARAGRAPH_LINES:  # a file without blank lines is still read in bounded memory
                yield from _flush(paragraph)
            continue
        yield from _flush(paragraph)
        if kind == "rst" and _RST_COMMENT.match(line):  # ".. " opens directives and targets too
            head = (_indent(line), not _RST_DIRECTIVE.match(line) and not _RST_TARGET.match(line))
        yield ""
    yield from _flush(paragraph)


def _flush(paragraph: list[str]) -> Iterator[str]:
    """A paragraph's lines with its inline markup replaced (a link or role may run over a line end)."""
    if paragraph:
        yield from plain_inline("\n".join(paragraph)).split("\n")
        paragraph.clear()


def _structure_line(line: str, kind: str) -> bool:
    """A line that carries only structure: a Markdown reference definition or MyST target; an rST
    directive, target, comment or flag."""
    if kind == "md":
        return bool(_MD_REFERENCE.match(line) or _MYST_TARGET.match(line))
    return bool(_RST_COMMENT.match(line) or _FLAG_LINE.match(line))  # ".. " opens directives and targets too


def plain_text(text: str, kind: str) -> str:
    """`text` of a `kind` ("md" or "rst") source as plain text."""
    return "\n".join(plain_lines(text.split("\n"), kind))


def rst_title(lines: list[str]) -> str | None:
    """The first section title of an rST page: a text line with an adornment line under it."""
    for i, line in enumerate(lines[:-1]):
        text = line.strip()
        if (
            text
            and not _ADORNMENT.match(line)
            and _ADORNMENT.match(lines[i + 1])
            and len(lines[i + 1].strip()) >= len(text)
        ):
            return plain_inline(text)
    return None
