"""Citations of the report: numbered in order of first use, each resolving to a source the
run retrieved or to a KB fact's stored source; numbers that resolve to nothing are removed."""

from __future__ import annotations

import re
from typing import Any

NUMBER_CITE = re.compile(r"\[(\d+)\](?!\()")


class Citations:
    """Numbers sources in order of first citation: url → n, with a label per entry."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.entries: list[dict[str, Any]] = []

    def cite(self, url: str, title: str, origin: str) -> str:
        """The `[n]` marker of `url` (numbered on first use)."""
        if url not in self.numbers:
            self.numbers[url] = len(self.entries) + 1
            self.entries.append({"n": self.numbers[url], "url": url, "title": title, "origin": origin})
        return f"[{self.numbers[url]}]"

    def guard(self, body: str) -> tuple[str, int, int]:
        """`body` without numbers that resolve to no listed source: (body, valid count, removed count)."""
        valid = set(range(1, len(self.entries) + 1))
        numbers = [int(n) for n in NUMBER_CITE.findall(body)]
        removed = sum(1 for n in numbers if n not in valid)
        body = NUMBER_CITE.sub(lambda m: m.group(0) if int(m.group(1)) in valid else "", body)
        return body, len(numbers) - removed, removed

    def source_lines(self) -> list[str]:
        """The numbered source list."""
        return [
            f"{e['n']}. {e['title'] + ' — ' if e['title'] else ''}{e['url']}"
            + ("" if e["origin"] == "retrieved" else f" ({e['origin']})")
            for e in self.entries
        ]
