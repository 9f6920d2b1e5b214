"""Offline Wikipedia (Kiwix ZIM files) through libzim's full-text index (`deepresearch[zim]`).

Results carry `zim://<file name>/<entry path>` URLs and the article's main text.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from deepresearch.errors import SearchError
from deepresearch.search.base import SearchBackend, SearchResult
from deepresearch.search.readers import html_to_text
from deepresearch.text import truncate

log = logging.getLogger(__name__)

MAX_TEXT_CHARS = 20_000  # whole Wikipedia articles are long; the research loop reads a passage


def _libzim() -> Any:
    try:
        from libzim import reader, search
    except ImportError:
        raise SearchError("the zim backend needs libzim — pip install 'deepresearch[zim]'") from None
    return reader, search


class ZimBackend(SearchBackend):
    """Full-text search over one or more ZIM files; missing files are reported and skipped."""

    name = "zim"
    io_bound = False

    def __init__(self, files: Sequence[str | Path]):
        if not files:
            raise SearchError("no ZIM files configured — set search.zim.files to your Kiwix .zim files")
        reader, _ = _libzim()
        self.archives: list[tuple[str, Any]] = []
        self.problems: list[str] = []
        for raw in files:
            path = Path(raw).expanduser()
            if not path.is_file():
                self.problems.append(f"ZIM file not found: {path} — fix search.zim.files")
                continue
            try:
                archive = reader.Archive(str(path))
            except Exception as exc:  # libzim raises RuntimeError subclasses for bad files
                self.problems.append(f"{path}: not a readable ZIM file ({exc}) — re-download it")
                continue
            if not archive.has_fulltext_index:
                self.problems.append(f"{path}: has no full-text index — use a Kiwix file with _maxi/_nopic index")
                continue
            self.archives.append((path.name, archive))
        for problem in self.problems:
            log.warning("%s", problem)
        if not self.archives:
            raise SearchError("; ".join(self.problems))

    def search(self, query: str, count: int) -> list[SearchResult]:
        """Best `count` articles across the ZIM files, interleaved by rank."""
        _, search = _libzim()
        per_file: list[list[SearchResult]] = []
        for name, archive in self.archives:
            hits = search.Searcher(archive).search(search.Query().set_query(query))
            results = []
            for rank, path in enumerate(hits.getResults(0, count), start=1):
                entry = archive.get_entry_by_path(path)
                item = entry.get_item()
                raw = bytes(item.content).decode("utf-8", errors="replace")
                title, text = html_to_text(raw) if "html" in item.mimetype else (entry.title, raw)
                text = truncate(text, MAX_TEXT_CHARS)
                results.append(
                    SearchResult(
                        title=entry.title or title or path,
                        url=f"zim://{name}/{path}",
                        snippet=truncate(text, 300),
                        text=text,
                        score=1.0 / rank,
                        backend=self.name,
                    )
                )
            per_file.append(results)
        merged = [r for rank in range(count) for results in per_file if rank < len(results) for r in [results[rank]]]
        return merged[:count]
