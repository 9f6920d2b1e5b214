"""Progress of a research run in words: one line per step event, for every front end.

The loop reports events (`recall`, `plan`, `search`, …) with their facts as keyword
arguments; the CLI prints these lines on stderr and the MCP server sends them as progress
notifications, so both say the same thing.
"""

from __future__ import annotations

from typing import Any


def describe(event: str, **info: Any) -> str | None:
    """The progress line of one step event (None for events that have no line, e.g. `model`)."""
    loop = f"[loop {info.get('loop', 0) + (0 if event == 'reflect' else 1)}]"
    if event == "recall":
        note = f" — {info['note']}" if info.get("note") else ""
        return f"{loop} recall: {info['known']} known facts{note}"
    if event == "plan":
        return f"{loop} plan ({info['method']}): " + (" | ".join(info["queries"]) or "nothing to search")
    if event == "search":
        if info.get("skipped"):
            return f'{loop} search "{info["query"]}": skipped ({info["skipped"]})'
        return f'{loop} search "{info["query"]}": {info["hits"]} hits, {info["new"]} new, cache {info["cache"]}'
    if event == "rank":
        best = f"; best answer so far: {info['candidate']}" if info.get("candidate") else ""
        return f"{loop} rank: {info['passages']} passages, {info['cited']} cited{best}"
    if event == "extract":
        off = f", {info['skipped']} off-topic not stored" if info.get("skipped") else ""
        return f"{loop} extract {info['source']}: {info['facts']} facts on the question{off} ({info['method']})"
    if event == "reflect":
        nxt = f"stop: {info['stop']}" if info["stop"] else "follow-ups: " + " | ".join(info["follow_ups"])
        return f"{loop} reflect: {info['new_sources']} new sources, {info['new_facts']} new facts; {nxt}"
    if event == "answer":
        if info.get("text"):
            said = f"**{info['text']}**"
        elif info["method"] == "sentences":  # how/why: the sentences are the answer
            said = "the best sentences of the evidence"
        else:
            said = "not stated directly by the evidence"
        return f"answer ({info['method']}): {said}"
    if event == "report":
        counts = f"{info['citations']} citations, {info['sources']} sources"
        return (
            f"report: {counts}, {info['invalid']} invalid citations dropped; answer: {info['method']};"
            f" model used for: {info.get('model_steps', 'none')}"
        )
    return None
