"""Turn files into documents: text, Markdown, HTML (boilerplate dropped), PDF, and tabular
corpora (Parquet/CSV/JSONL) streamed through DuckDB in batches. A text file larger than
`STREAM_BYTES` is read in pieces (`stream_text_file`); HTML and PDF files are read whole, up to
`search.corpus.max_file_mb`.

Every problem a user can cause (binary file, empty file, PDF without text, missing column)
raises `InputError` with a message that names the fix.
"""

from __future__ import annotations

import codecs
import itertools
import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

from deepresearch.errors import InputError, NotIndexed
from deepresearch.search import markup

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
PDF_SUFFIXES = (".pdf",)
TABLE_SUFFIXES = (".parquet", ".csv", ".tsv", ".jsonl", ".ndjson")
SUPPORTED = TEXT_SUFFIXES + HTML_SUFFIXES + PDF_SUFFIXES + TABLE_SUFFIXES
# Text files larger than this are decoded, chunked and written in pieces of PIECE_BYTES (one
# piece's word list, not the file's, is what chunking holds).
STREAM_BYTES = 4 << 20
PIECE_BYTES = 1 << 18
ENCODINGS = ("utf-8-sig", "cp1252", "latin-1")  # tried in order; latin-1 decodes any bytes


@dataclass
class RawDocument:
    """One document before chunking: `key` identifies it within its source file."""

    key: str
    title: str
    text: str
    url: str


@dataclass
class TableSpec:
    """Which columns of a tabular file hold the text, title, URL and row id (None = guess)."""

    text_col: str | None = None
    title_col: str | None = None
    url_col: str | None = None
    id_col: str | None = None


def is_table(path: Path) -> bool:
    """True for files read as tabular corpora (one document per row)."""
    return path.suffix.lower() in TABLE_SUFFIXES


def is_text(path: Path) -> bool:
    """True for plain text and Markdown files (the ones that can be streamed)."""
    return path.suffix.lower() in TEXT_SUFFIXES


def _read_bytes(path: Path, max_bytes: int | None = None) -> bytes:
    try:
        if max_bytes is not None and path.stat().st_size > max_bytes:
            raise InputError(
                f"{path}: {path.stat().st_size / (1 << 20):.0f} MB is more than search.corpus.max_file_mb"
                f" ({max_bytes / (1 << 20):g} MB) for a file read whole — convert it to .txt (text files of"
                " any size are streamed) or raise search.corpus.max_file_mb"
            )
        return path.read_bytes()
    except PermissionError:
        raise InputError(f"{path}: permission denied — make the file readable (chmod u+r) or skip it") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory — pass the folder itself to ingest its files") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc}) — check the path") from None


_SAMPLE_CHARS = 65536


def _looks_binary(text: str, utf8: bool) -> bool:
    """True for decoded bytes that are not prose: many control characters, or (when the bytes
    were not valid UTF-8) mostly non-ASCII — what random or compressed bytes decode to."""
    sample = text[:_SAMPLE_CHARS]
    if not sample:
        return False
    controls = sum(1 for c in sample if (c < " " and c not in "\t\n\r\f\v") or "\x7f" <= c <= "\x9f")
    if controls > 0.05 * len(sample):
        return True
    ascii_text = sum(1 for c in sample if " " <= c <= "~" or c in "\t\n\r")
    return not utf8 and ascii_text < 0.7 * len(sample)


def _binary(path: Path) -> InputError:
    return InputError(
        f"{path}: looks like binary data or text in an unknown encoding, not text — convert it to UTF-8"
        " text (.txt/.md) first"
    )


def _decode(path: Path, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise InputError(f"{path}: looks like a binary file, not text — convert it to .txt/.md/.pdf first")
    binary = _binary(path)
    for encoding in ENCODINGS:
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if _looks_binary(text, utf8=encoding == "utf-8-sig"):
            raise binary
        return text
    raise binary  # unreachable: latin-1 decodes any bytes


def _require_text(path: Path, text: str, what: str = "file") -> str:
    if not text.strip():
        raise InputError(f"{path}: empty {what} (no text to index) — remove it or add content")
    return text


def _markup(path: Path) -> str | None:
    """ "md" or "rst" for a file written in that markup (its text is cleaned: search/markup.py), else None."""
    suffix = path.suffix.lower()
    return "md" if suffix in markup.MARKDOWN_SUFFIXES else "rst" if suffix in markup.RST_SUFFIXES else None


def _text_title(path: Path, raw: str, plain: str) -> str:
    """An .rst page's first section title (read from `raw`: its adornments), else the first Markdown
    heading or non-empty line of `plain`, else the file name."""
    title = markup.rst_title(raw.splitlines()) if _markup(path) == "rst" else None
    if title:
        return title[:200]
    for line in plain.splitlines():
        line = line.strip()
        if line:
            return (line.lstrip("#").strip() or path.stem)[:200]
    return path.stem[:200]


def read_text_file(path: Path) -> tuple[str, str]:
    """(title, text) of a .txt/.md/.rst file, Markdown and rST markup replaced by its text; the title
    is the first rST section title, Markdown heading or line."""
    raw = _require_text(path, _decode(path, _read_bytes(path)))
    kind = _markup(path)
    text = raw if kind is None else markup.plain_text(raw, kind)
    if not text.strip():
        raise InputError(f"{path}: only markup (directives, targets, comments), no text to index — nothing to add")
    return _text_title(path, raw, text), text


def _blocks(path: Path) -> Iterator[bytes]:
    try:
        with path.open("rb") as handle:
            yield from iter(lambda: handle.read(PIECE_BYTES), b"")
    except PermissionError:
        raise InputError(f"{path}: permission denied — make the file readable (chmod u+r) or skip it") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc}) — check the path") from None


def text_encoding(path: Path) -> str:
    """The encoding `read_text_file` would decode the file with, found block by block (binary data
    is an InputError): the first of ENCODINGS that decodes every byte."""
    decoders = {name: codecs.getincrementaldecoder(name)() for name in ENCODINGS[:-1]}
    head = b""
    for block in itertools.chain(_blocks(path), [b""]):
        head = head or block
        for name in list(decoders):
            try:
                decoders[name].decode(block, final=not block)
            except UnicodeDecodeError:
                del decoders[name]
    if b"\x00" in head[:8192]:
        raise InputError(f"{path}: looks like a binary file, not text — convert it to .txt/.md/.pdf first")
    encoding = next(iter(decoders), ENCODINGS[-1])
    if _looks_binary(head.decode(encoding, errors="ignore"), utf8=encoding == "utf-8-sig"):
        raise _binary(path)
    return encoding


def stream_text_file(path: Path) -> tuple[str, Iterator[str]]:
    """(title, text in pieces) of a large .txt/.md/.rst file: what `read_text_file` returns, without ever
    holding the whole text (the title comes from the first piece)."""
    decoder = codecs.getincrementaldecoder(text_encoding(path))()
    pieces: Iterator[str] = (decoder.decode(block, final=not block) for block in itertools.chain(_blocks(path), [b""]))
    kind = _markup(path)
    raw = first = next(pieces, "")
    if kind is not None:
        pieces = _plain_pieces(itertools.chain([raw], pieces), kind)
        first = next(pieces, "")
    return _text_title(path, raw, first), itertools.chain([first], pieces)


def _plain_pieces(pieces: Iterator[str], kind: str) -> Iterator[str]:
    """Pieces of a streamed Markdown/rST file as plain text, cut at line ends (markup.plain_lines reads lines)."""

    def lines() -> Iterator[str]:
        rest = ""
        for piece in pieces:
            rest += piece
            *whole, rest = rest.split("\n")
            yield from whole
        yield rest

    batch: list[str] = []
    size = 0
    for line in markup.plain_lines(lines(), kind):
        batch.append(line)
        size += len(line) + 1
        if size >= PIECE_BYTES:
            yield "\n".join(batch) + "\n"
            batch, size = [], 0
    yield "\n".join(batch)


# --- HTML: main text without navigation, headers, footers, scripts -------------------------

_SKIP_TAGS = {
    "script",
    "style",
    "noscript",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "svg",
    "template",
    "iframe",
    "button",
    "select",
    "menu",
    "dialog",
}
_SKIP_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar"}
_SKIP_CLASS = re.compile(
    r"(^|[\s_-])(nav|navbar|menu|footer|sidebar|breadcrumbs?|cookie|banner|share|social|advert|ads|"
    r"related|comments?|skip-link|toc)($|[\s_-])",
    re.I,
)
_BLOCK_TAGS = {
    "p",
    "div",
    "section",
    "article",
    "main",
    "li",
    "ul",
    "ol",
    "table",
    "tr",
    "td",
    "th",
    "br",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "pre",
    "dd",
    "dt",
    "figcaption",
    "body",
}
_HEADING_TAGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_VOID_TAGS = {
    "br",
    "img",
    "hr",
    "meta",
    "link",
    "input",
    "area",
    "base",
    "col",
    "embed",
    "source",
    "track",
    "wbr",
}


# Class names on <html>/<body> describe the page's state ("sidebar-visible", "nav-open"), and
# <main> (or role="main") is the content itself: the class/id/role guesses never drop them.
_NO_GUESS_TAGS = {"html", "body", "main"}


def _skip_kind(tag: str, attr: dict[str, str]) -> int:
    """0: keep the element; 1: drop it for what it is (script, nav, hidden…); 2: drop it on a
    guess from its role, class or id — a guess that the page's main region overrides."""
    if tag in _SKIP_TAGS or "hidden" in attr or attr.get("aria-hidden") == "true":
        return 1
    role = attr.get("role", "").lower()
    if tag in _NO_GUESS_TAGS or role == "main":
        return 0
    if role in _SKIP_ROLES or _SKIP_CLASS.search(attr.get("class", "") + " " + attr.get("id", "")):
        return 2
    return 0


class _MainTextParser(HTMLParser):
    """Collects text blocks outside boilerplate elements, remembering how much of each is link text.

    Elements dropped on a class/id/role guess stop at the page's main region: a wrapper whose
    class happens to read like a menu ("menu-container", "content-with-sidebar") would otherwise
    take the whole page with it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        # (tag, skip kind, guess depth to restore when a main region closes else None, is a link)
        self.stack: list[tuple[str, int, int | None, bool]] = []
        self.heading_depth = 0
        self.skip_depth = 0  # open elements dropped for what they are
        self.guess_depth = 0  # open elements dropped on a guess, since the last main region opened
        self.title = ""
        self.in_title = False
        self.h1 = ""
        self.in_h1 = False
        self.link_depth = 0
        self.blocks: list[list] = []  # [text, link_chars, inside main/article]
        self.main_depth = 0
        self.saw_main = False  # a visible <main>: the page says where its content is, even if empty
        self.noindex = False  # <meta name="robots" content="noindex">: the page asks indexers to skip it
        self._new_block()

    def _new_block(self) -> None:
        if not self.blocks or self.blocks[-1][0].strip():
            self.blocks.append(["", 0, self.main_depth > 0])
        else:  # an empty block is reused: it belongs where its text will be, inside main or not
            self.blocks[-1] = ["", 0, self.main_depth > 0]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {k: (v or "") for k, v in attrs}
        if tag == "title":
            self.in_title = True
        if tag == "meta" and attr.get("name", "").lower() == "robots":
            self.noindex |= "noindex" in attr.get("content", "").lower()
        if tag in _VOID_TAGS:
            if tag == "br":
                self._new_block()
            return
        kind = _skip_kind(tag, attr)
        restore = None
        if tag == "main" or attr.get("role", "").lower() == "main":
            restore, self.guess_depth = self.guess_depth, 0
        # A heading's link to a place on the same page (mdBook, Sphinx permalinks) is its text, not a link.
        link = tag == "a" and not (self.heading_depth and attr.get("href", "").startswith("#"))
        self.stack.append((tag, kind, restore, link))
        self.skip_depth += kind == 1
        self.guess_depth += kind == 2
        if tag in ("main", "article"):
            self.main_depth += 1
            self.saw_main |= tag == "main" and not self.skip_depth
        self.link_depth += link
        self.heading_depth += tag in _HEADING_TAGS
        if tag == "h1":
            self.in_h1 = True
        if tag in _BLOCK_TAGS:
            self._new_block()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in _VOID_TAGS or not any(entry[0] == tag for entry in self.stack):
            return
        while self.stack:  # pop until the matching tag: browsers forgive unclosed elements too
            open_tag, kind, restore, link = self.stack.pop()
            self.skip_depth -= kind == 1
            self.guess_depth -= kind == 2
            if restore is not None:
                self.guess_depth = restore
            if open_tag in ("main", "article"):
                self.main_depth -= 1
            self.link_depth -= link
            self.heading_depth -= open_tag in _HEADING_TAGS
            if open_tag == "h1":
                self.in_h1 = False
            if open_tag == tag:
                break
        if tag in _BLOCK_TAGS:
            self._new_block()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data
            return
        if self.skip_depth or self.guess_depth:
            return
        if self.in_h1:
            self.h1 += data
        block = self.blocks[-1]
        block[0] += data
        if self.link_depth:
            block[1] += len(data.strip())


def html_to_text(html: str) -> tuple[str, str]:
    """(title, main text) of an HTML page: nav/header/footer/aside/scripts and link lists dropped."""
    title, text, _ = parse_html(html)
    return title, text


def parse_html(html: str) -> tuple[str, str, bool]:
    """(title, main text, whether the page asks not to be indexed) of an HTML page."""
    parser = _MainTextParser()
    parser.feed(html)
    parser.close()
    blocks = [(re.sub(r"\s+", " ", text).strip(), links, in_main) for text, links, in_main in parser.blocks]
    blocks = [b for b in blocks if b[0]]
    if parser.saw_main or any(in_main for _, _, in_main in blocks):  # a page marks its main content: trust it
        blocks = [b for b in blocks if b[2]]
    # Blocks that are mostly link text are menus and "related" lists that escaped the tag rules.
    kept = [text for text, links, _ in blocks if links <= 0.5 * len(text)]
    title = re.sub(r"\s+", " ", parser.title or parser.h1).strip()
    return title, "\n\n".join(kept), parser.noindex


def read_html_file(path: Path, max_bytes: int | None = None, include_noindex: bool = True) -> tuple[str, str]:
    """(title, main text) of an HTML file (at most `max_bytes` long); `include_noindex=False` raises NotIndexed for a
    page marked `<meta name="robots" content="noindex">` (mdBook's print-all page, redirect stubs)."""
    title, text, marked = parse_html(_decode(path, _read_bytes(path, max_bytes)))
    if marked and not include_noindex:
        raise NotIndexed(f"{path}: the page asks not to be indexed (robots noindex) — --include-noindex indexes it")
    _require_text(path, text, "page")
    return (title or path.stem)[:200], text


def read_pdf_file(path: Path, max_bytes: int | None = None) -> tuple[str, str]:
    """(title, text) of a PDF via pypdf (at most `max_bytes` long); a PDF without a text layer is an InputError."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    # pypdf logs its own warnings about broken files; our InputError below is the one message.
    logging.getLogger("pypdf").setLevel(logging.ERROR)

    data = _read_bytes(path, max_bytes)
    _require_text(path, "x" if data else "")
    import io

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InputError(f"{path}: PDF is password-protected — save a decrypted copy and add that")
        pages = [page.extract_text() or "" for page in reader.pages]
        meta_title = (reader.metadata.title if reader.metadata else None) or ""
    except InputError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{path}: not a readable PDF ({exc}) — re-export it or convert it to text") from None
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text.strip():
        raise InputError(
            f"{path}: PDF has no extractable text (scanned images?) — run OCR first"
            " (e.g. `ocrmypdf in.pdf out.pdf`) and add the result"
        )
    return (str(meta_title).strip() or path.stem)[:200], text


def read_file(path: Path, max_bytes: int | None = None, include_noindex: bool = True) -> RawDocument:
    """The single document of a text, Markdown, HTML or PDF file (URL = file:// absolute path);
    HTML and PDF files are read whole, so one larger than `max_bytes` is an InputError
    (`include_noindex=False`: an HTML page marked noindex is NotIndexed)."""
    suffix = path.suffix.lower()
    if suffix in HTML_SUFFIXES:
        title, text = read_html_file(path, max_bytes, include_noindex)
    elif suffix in PDF_SUFFIXES:
        title, text = read_pdf_file(path, max_bytes)
    elif suffix in TEXT_SUFFIXES:
        title, text = read_text_file(path)
    elif suffix in TABLE_SUFFIXES:
        raise InputError(
            f"{path}: a {suffix} file is a table of documents, not one document — add it with"
            f" `deepresearch corpus add {path.name}` (one document per row); this command reads"
            f" {', '.join(TEXT_SUFFIXES + HTML_SUFFIXES + PDF_SUFFIXES)}"
        )
    else:
        raise InputError(
            f"{path}: unsupported file type {suffix or '(none)'} — supported:"
            f" {', '.join(TEXT_SUFFIXES + HTML_SUFFIXES + PDF_SUFFIXES)}"
        )
    return RawDocument(key="", title=title, text=text, url=path.absolute().as_uri())


# --- tabular corpora through DuckDB --------------------------------------------------------

_GUESS = {
    "text_col": ("text", "content", "body", "abstract", "passage"),
    "title_col": ("title", "name", "headline"),
    "url_col": ("url", "link", "href", "uri"),
    "id_col": ("_id", "id", "doc_id", "docid"),
}


def _table_source(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return "read_parquet(?)"
    if suffix in (".csv", ".tsv"):
        return "read_csv(?, header = true)"
    return "read_json(?, format = 'newline_delimited')"


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def resolve_columns(path: Path, columns: list[str], spec: TableSpec) -> dict[str, str | None]:
    """Map text/title/url/id to real column names; a named column that is missing is an InputError."""
    kind = path.suffix.lower().lstrip(".").upper()
    chosen: dict[str, str | None] = {}
    lower = {c.lower(): c for c in columns}
    for field, guesses in _GUESS.items():
        wanted = getattr(spec, field)
        flag = "--" + field.replace("_", "-")
        if wanted is not None:
            if wanted not in columns:
                raise InputError(
                    f"{path}: {kind} file has no column {wanted!r} (columns: {', '.join(columns)})"
                    f" — pass {flag} with one of them"
                )
            chosen[field] = wanted
        else:
            chosen[field] = next((lower[g] for g in guesses if g in lower), None)
    if chosen["text_col"] is None:
        raise InputError(f"{path}: no text column found (columns: {', '.join(columns)}) — pass --text-col NAME")
    return chosen


def iter_table(path: Path, spec: TableSpec, batch_size: int = 512) -> Iterator[list[RawDocument]]:
    """Stream rows of a Parquet/CSV/JSONL file as batches of documents (DuckDB, never all at once)."""
    import duckdb

    _read_bytes_check(path)
    source = _table_source(path)
    con = duckdb.connect()
    try:
        try:
            columns = [row[0] for row in con.execute(f"describe select * from {source}", [str(path)]).fetchall()]
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0]
            raise InputError(f"{path}: DuckDB cannot read it ({first}) — check the file format") from None
        cols = resolve_columns(path, columns, spec)
        select = ", ".join(
            f"cast({_quote_ident(c)} as varchar)" if c else "null"
            for c in (cols["id_col"], cols["title_col"], cols["text_col"], cols["url_col"])
        )
        base_uri = path.absolute().as_uri()
        try:
            cursor = con.execute(f"select {select} from {source}", [str(path)])
            row_number = produced = 0
            while True:
                rows = cursor.fetchmany(batch_size)
                if not rows:
                    break
                batch = []
                for doc_id, title, text, url in rows:
                    row_number += 1
                    if not text or not text.strip():
                        continue
                    key = doc_id if doc_id not in (None, "") else str(row_number)
                    batch.append(
                        RawDocument(
                            key=key,
                            title=(title or "").strip()[:300],
                            text=text,
                            url=url or f"{base_uri}#{quote(key, safe='')}",
                        )
                    )
                produced += len(batch)
                if batch:
                    yield batch
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0]
            raise InputError(f"{path}: DuckDB failed while reading rows ({first}) — check the file") from None
        if not produced:
            raise InputError(f"{path}: no rows with text in column {cols['text_col']!r} — check the file or --text-col")
    finally:
        con.close()


def _read_bytes_check(path: Path) -> None:
    """Fail early with a clear message on unreadable or empty files (DuckDB's errors are cryptic)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(1)
    except PermissionError:
        raise InputError(f"{path}: permission denied — make the file readable (chmod u+r) or skip it") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc}) — check the path") from None
    if not head:
        raise InputError(f"{path}: empty file (no rows to index) — remove it or add content")
