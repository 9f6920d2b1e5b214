"""The JSON shapes the front ends print: the CLI's `--json` output and the MCP tools' results.

Both front ends import them from here, so a `kb query --json` line and a `kb_query` tool result
cannot drift apart, and the MCP server never reaches into the CLI.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deepresearch.facts import Hit
    from deepresearch.kb.records import AddResult, Recall


def json_default(obj: Any) -> Any:
    """`json.dumps` fallback for what the library returns: dataclasses, paths, numpy values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def to_jsonable(data: Any) -> Any:
    """`data` as plain JSON values (dicts, lists, strings, numbers): the `--json` shape."""
    return json.loads(json.dumps(data, ensure_ascii=False, default=json_default))


# A rejected fact is quoted up to this many characters: a 1 MB "fact" must not come back whole.
REJECTED_CHARS = 200


def quoted(text: str, limit: int = REJECTED_CHARS) -> str:
    """`text` cut to `limit` characters with a marker saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [truncated: {len(text)} characters]"


def add_result_json(result: AddResult) -> dict[str, Any]:
    """The `kb add --json` shape of an AddResult (also what the MCP `kb_add` tool returns); a
    rejected fact is quoted up to REJECTED_CHARS characters."""
    return {
        "added": result.added,
        "reconfirmed": result.reconfirmed,
        "rejected": [{"fact": quoted(f.fact or ""), "reason": reason} for f, reason in result.rejected],
        "merged": result.merged,
        "flagged": [{"id": a, "other_id": b, "reason": r} for a, b, r in result.flagged],
    }


def hit_json(hit: Hit) -> dict[str, Any]:
    """The `kb query --json` shape of a hit: every Hit field except the internal ones."""
    return {k: v for k, v in dataclasses.asdict(hit).items() if k != "verified_at"}


def recall_json(recall: Recall) -> dict[str, Any]:
    """The `kb query --json` shape of a Recall (also what the MCP `kb_query` tool returns)."""
    return {
        "degraded": recall.degraded,
        "reason": recall.reason,
        "mode": recall.mode,
        "include_expired": recall.include_expired,
        "hits": [hit_json(h) for h in recall.hits],
    }
