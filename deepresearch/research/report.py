"""The report step: a Markdown answer with numbered citations and a source list.

Every citation number resolves to a source retrieved in this run or to the stored source
of a KB fact the report uses. Short ids ([S3], [K1]) from model output are mapped back to
real URLs; ids that resolve to nothing are removed and counted.
"""

from __future__ import annotations

import re
from typing import Any

from deepresearch.research import prompts
from deepresearch.research.state import ResearchState
from deepresearch.research.steps import Deps, ask, parse_cited, rank_by_similarity, supported
from deepresearch.text import content_words

ANSWER_SENTENCES = 3
KB_FACTS_IN_REPORT = 5
_NUMBER_CITE = re.compile(r"\[(\d+)\](?!\()")


class _Citations:
    """Numbers sources in order of first citation: url → n, with a label per entry."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.entries: list[dict[str, Any]] = []

    def cite(self, url: str, title: str, origin: str) -> str:
        if url not in self.numbers:
            self.numbers[url] = len(self.entries) + 1
            self.entries.append({"n": self.numbers[url], "url": url, "title": title, "origin": origin})
        return f"[{self.numbers[url]}]"


def _answer(state: ResearchState, deps: Deps, evidence: dict[str, str]) -> tuple[list[tuple[str, list[str]]], str, int]:
    """The model's grounded sentences (unknown ids and unsupported sentences dropped), topped up
    with the evidence sentences closest to the question."""
    text = ask(
        deps,
        state,
        prompts.answer_messages(state.topic, prompts.evidence_lines(list(evidence.items())), ANSWER_SENTENCES),
        None,
        "answer",
        40 * ANSWER_SENTENCES,
    )
    invalid = 0
    sentences: list[tuple[str, list[str]]] = []
    if isinstance(text, str) and text.strip():
        sentences, invalid = parse_cited(text, set(evidence))
    from_model = len(sentences)
    keys = list(evidence)
    ranked = rank_by_similarity(deps.embedder, state.topic, list(evidence.values()))
    sentences += [(evidence[keys[i]], [keys[i]]) for _, i in ranked]
    kept: list[tuple[str, list[str]]] = []
    used_model = False
    for n, (s, ids) in enumerate(sentences):
        words = set(content_words(s))
        # Markup and near-repeats are how a small model pads an answer: drop them.
        if "#" in s or any(words <= set(content_words(k)) for k, _ in kept) or not supported(s, ids, evidence):
            continue
        kept.append((s, ids))
        used_model = used_model or n < from_model
        if len(kept) == ANSWER_SENTENCES:
            break
    return kept, "llm+extractive" if used_model else "extractive", invalid


def report(state: ResearchState, deps: Deps) -> dict[str, Any]:
    """Write the cited Markdown report (every citation resolves to a retrieved or KB source)."""
    by_sid = state.source_by_sid()
    known = [k for k in state.known if k.sources][:KB_FACTS_IN_REPORT]
    # One evidence line per finding sentence under a local short id (S1…, K1…); the ids
    # are mapped back to the real sources right after the model answers.
    lines = [(s, ids) for summary in state.summaries for s, ids in summary.sentences if ids]
    evidence: dict[str, str] = {f"S{i}": s for i, (s, _) in enumerate(lines, 1)}
    local: dict[str, list[str]] = {f"S{i}": ids for i, (_, ids) in enumerate(lines, 1)}
    for i, k in enumerate(known, 1):
        evidence[f"K{i}"] = k.fact
        local[f"K{i}"] = [f"K{i}"]
    cites = _Citations()

    def mark(ids: list[str]) -> str:
        out = []
        for key in ids:
            if key.startswith("K"):
                k = known[int(key[1:]) - 1]
                origin = f"knowledge base, {k.category}, verified {deps.age_tag(k.age_days)}"
                out.append(cites.cite(k.sources[0], "", origin))
            elif key in by_sid:
                out.append(cites.cite(by_sid[key].url, by_sid[key].title, "retrieved"))
        return "".join(dict.fromkeys(out))

    answer_lines, method, invalid = _answer(state, deps, evidence) if evidence else ([], "none", 0)
    answer = (
        " ".join(f"{s} {mark([r for i in ids for r in local[i]])}".strip() for s, ids in answer_lines)
        or "No evidence was found for this question."
    )
    parts = [f"# {state.topic}", "", "## Answer", "", answer, ""]
    if state.summaries:
        parts += ["## Findings", ""]
        for summary in state.summaries:
            parts.append(f"### {summary.query}")
            parts += [f"- {s} {mark(ids)}" for s, ids in summary.sentences]
            parts.append("")
    if known:
        parts += ["## From the knowledge base", ""]
        parts += [f"- {k.fact} {mark([f'K{i}'])}" for i, k in enumerate(known, 1)]
        parts.append("")
    body = "\n".join(parts)
    # Final guard: a number that resolves to no listed source is removed and counted.
    valid = set(range(1, len(cites.entries) + 1))
    numbers = [int(n) for n in _NUMBER_CITE.findall(body)]
    invalid += sum(1 for n in numbers if n not in valid)
    body = _NUMBER_CITE.sub(lambda m: m.group(0) if int(m.group(1)) in valid else "", body)
    sources = ["## Sources", ""] + [
        f"{e['n']}. {e['title'] + ' — ' if e['title'] else ''}{e['url']}"
        + ("" if e["origin"] == "retrieved" else f" ({e['origin']})")
        for e in cites.entries
    ]
    count = {k: int(state.counters.get(k, 0)) for k in ("backend_searches", "cache_hits", "facts_added")}
    footer = (
        f"\n---\nRun {state.run_id} · {len(state.reflections)} loop(s) · stop: {state.stop_reason} · "
        f"{count['backend_searches']} searches, {count['cache_hits']} cache hits · "
        f"{count['facts_added']} facts added"
    )
    stats = {
        "citations": sum(1 for n in numbers if n in valid),
        "invalid_citations_removed": invalid,
        "sources": cites.entries,
        "answer_method": method,
        "kb_facts_used": len(known),
    }
    deps.progress("report", citations=stats["citations"], sources=len(cites.entries), invalid=invalid, method=method)
    return {
        "report": body + "\n" + "\n".join(sources) + "\n" + footer + "\n",
        "answer": answer,
        "report_stats": stats,
    }
