"""The steps of the research loop. Each takes the state and the dependencies and returns its
update (field → value); `loop.py` applies it, checkpoints, and routes to the next step.

Evidence first, model second: every model call has a grounded deterministic fallback
(keyword queries, extractive summaries, "no new facts → stop", extractive answer), and a
model output is used only when it validates against the evidence.
"""

from __future__ import annotations

import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from deepresearch.errors import ModelError, SearchError
from deepresearch.research import prompts
from deepresearch.research.cache_links import evict_if_superseded, link_facts
from deepresearch.research.state import Known, ResearchState, Source, Summary
from deepresearch.text import content_words, normalize_space, split_sentences, truncate

log = logging.getLogger(__name__)

FAST_CHANGING = ("market_data", "product_info")
FAST_CHANGING_MAX_AGE_DAYS = 1.0
MIN_EVIDENCE_SIMILARITY = 0.2
SUMMARY_SENTENCES = 3
QUESTION_WORDS = frozenset(
    "work works working explain describe difference between compare use used using mean means way ways"
    " happen happens kind kinds type types make makes thing things know tell let lets get gets same"
    " together role roles affect affects around near within during after before since".split()
)
_SENTENCE_END = re.compile(r"[.!?。！？][\"')\]]*$")
# Labels a small model copies from the prompt: "Answer:", "S1:", "[K2]:" …
_LABEL = re.compile(r"^(?:(?:evidence|summary|answer|question)\b|\[?[SK]\d{1,3}\]?)\s*:\s*", re.I)
_NAME = re.compile(r"[A-Z][\w'’.-]*(?:\s+(?:of |the |de |and )?[A-Z][\w'’.-]*)*")
_BRACKET = re.compile(r"\[([^\[\]]{1,24})\]")


@dataclass
class Deps:
    """What the steps use: KB, model, embedder, search backend + cache, DB connection."""

    kb: Any
    model: Any
    embedder: Any
    backend: Any
    cache: Any
    conn: Any
    extract: Callable[..., Any]
    age_tag: Callable[[float], str]
    freshness_days: dict[str, float] = field(default_factory=dict)
    cover_similarity: float = 0.75
    progress: Callable[..., None] = lambda event, **info: None
    over_budget: Callable[[], bool] = lambda: False


# --- helpers ---------------------------------------------------------------------------


def ask(
    deps: Deps,
    state: ResearchState,
    messages: list[dict[str, str]],
    schema: dict | None,
    what: str,
    max_tokens: int = 256,
) -> Any:
    """One serialized model call; None when there is no model, the budget is spent, or it fails."""
    if deps.model is None or deps.over_budget():
        return None
    deps.progress("model", what=what)
    try:
        out = deps.model.complete(messages, schema=schema, max_tokens=min(max_tokens, state.options.max_tokens))
    except ModelError as exc:
        log.warning("model call for %s failed: %s; using the fallback", what, exc)
        state.bump("llm_failures")
        return None
    state.bump("llm_calls")
    if schema is None:
        return out.text
    if out.data is not None:
        return out.data
    try:
        return json.loads(out.text, strict=False)
    except ValueError:
        return None


def _key(text: str) -> str:
    return " ".join(content_words(text))


def clean_queries(raw: Any, done: list[str], n: int, anchor: str) -> list[str]:
    """Usable queries: strings, short, new (not searched before), sharing a word with `anchor`."""
    if not isinstance(raw, list):
        return []
    seen = {_key(q) for q in done}
    anchor_words = {stem(w) for w in content_words(anchor)}
    out: list[str] = []
    for item in raw:
        if not isinstance(item, str):
            continue
        query = normalize_space(item).strip("\"' ")
        key = _key(query)
        words = [stem(w) for w in key.split()]
        # Grounded: most words of a query come from the question or the known facts.
        if not key or len(query) > 160 or key in seen or sum(w in anchor_words for w in words) * 2 < len(words):
            continue
        seen.add(key)
        out.append(query)
    return out[:n]


def _fresh(deps: Deps, state: ResearchState, k: Known) -> bool:
    """A known fact that needs no re-check: mode off, or younger than the freshness level
    (fast-changing categories: younger than a day)."""
    if state.options.lifecycle == "off":
        return True
    max_age = (
        FAST_CHANGING_MAX_AGE_DAYS
        if k.category in FAST_CHANGING
        else deps.freshness_days.get(state.options.fresh, 30.0)
    )
    return k.age_days <= max_age


def topic_words(text: str) -> list[str]:
    """The content words of a question, without question scaffolding ("how does X work")."""
    return [w for w in dict.fromkeys(content_words(text)) if w not in QUESTION_WORDS]


def stem(word: str) -> str:
    """A crude stem so "copies"/"copy" and "checkpoints"/"checkpoint" match."""
    if len(word) > 5 and word.endswith("ies"):
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)][:8]
    return word[:8]


def missing_words(question: str, covered_text: str) -> list[str]:
    """Key words of `question` that `covered_text` never mentions (the knowledge gap)."""
    covered = {stem(w) for w in content_words(covered_text)}
    return [w for w in topic_words(question) if stem(w) not in covered]


def gap_queries(state: ResearchState, deps: Deps, covered_text: str, n: int) -> list[str]:
    """Fallback queries: the topic, its words no fresh fact covers, and stale facts to re-check."""
    words = topic_words(state.topic)
    gap = missing_words(state.topic, covered_text)
    candidates = []
    if not covered_text.strip() or len(gap) == len(words):
        candidates.append(state.topic)
    elif gap:
        # Only what is missing, plus a little context from the covered words, as keywords.
        candidates.append(" ".join((gap + [w for w in words if w not in gap])[: max(len(gap) + 2, 3)]))
    stale = [k for k in state.known if not _fresh(deps, state, k) and k.relevance >= deps.cover_similarity]
    candidates += [truncate(k.fact, 100) for k in stale]
    anchor = " ".join([state.topic, covered_text, *(k.fact for k in state.known)])
    return clean_queries(candidates, state.queries_done, n, anchor)


_MARKUP_LINE = re.compile(r"^\s*(#{1,6}\s|[-*_=]{3,}\s*$|\|)", re.M)


def prose_sentences(text: str) -> list[str]:
    """Sentences fit to quote: headings, rules and table rows dropped; not too short or long."""
    kept = "\n".join(line for line in text.splitlines() if not _MARKUP_LINE.match(line))
    return [s for s in split_sentences(kept) if 20 <= len(s) <= 400 and len(content_words(s)) >= 3]


def rank_by_similarity(embedder: Any, query: str, items: list[str]) -> list[tuple[float, int]]:
    """(cosine, index) pairs, best first."""
    if not items:
        return []
    vectors = embedder.embed_batch([query, *items])
    scores = vectors[1:] @ vectors[0]
    return sorted(((float(s), i) for i, s in enumerate(scores)), reverse=True)


def parse_cited(text: str, allowed: set[str]) -> tuple[list[tuple[str, list[str]]], int]:
    """Split model text into (sentence, cited ids); bracketed ids not in `allowed` are dropped, counted."""
    out, invalid = [], 0
    # "claim. [S1] Next" → "claim [S1]. Next": a citation after the period belongs to the claim before it.
    text = re.sub(r"([.!?。！？])\s*((?:\[[^\[\]]{1,24}\]\s*)+)", lambda m: f" {m.group(2).strip()}{m.group(1)} ", text)
    for sentence in split_sentences(text):
        ids: list[str] = []
        for group in _BRACKET.findall(sentence):
            for item in group.split(","):
                item = item.strip()
                if item in allowed:
                    ids.append(item)
                else:
                    invalid += 1
        clean = _LABEL.sub("", normalize_space(_BRACKET.sub("", sentence)).replace(" .", "."))
        if clean:
            out.append((clean, list(dict.fromkeys(ids))))
    return out, invalid


def supported(sentence: str, ids: list[str], evidence: dict[str, str]) -> bool:
    """True if the sentence cites evidence ids and passes the same grounding check as extracted facts."""
    from deepresearch.models.extract import is_grounded

    complete = bool(_SENTENCE_END.search(sentence))  # a sentence cut by max_tokens is not a claim
    known = [evidence[i] for i in ids if i in evidence]
    return complete and bool(known) and is_grounded(sentence, " ".join(known))


def grounded_rewrite(text: Any, evidence: dict[str, str]) -> list[tuple[str, list[str]]] | None:
    """Accept a model rewrite only if every sentence cites given ids and its words are in them."""
    if not isinstance(text, str) or not text.strip():
        return None
    sentences, invalid = parse_cited(text, set(evidence))
    if invalid or not sentences or not all(supported(s, ids, evidence) for s, ids in sentences):
        return None
    return sentences


# --- steps -----------------------------------------------------------------------------


def recall(state: ResearchState, deps: Deps) -> dict[str, Any]:
    """Query the KB for the topic with the run's lifecycle mode and freshness level."""
    if deps.kb is None:
        return {"known": [], "recall_note": "knowledge base not used"}
    result = deps.kb.query(state.topic, mode=state.options.lifecycle, freshness=state.options.fresh)
    known = [
        Known(
            h.id,
            h.fact,
            list(h.sources or [h.source_url]),
            h.category,
            float(h.confidence),
            float(h.age_days),
            float(h.relevance),
        )
        for h in result.hits
    ]
    note = f"keyword recall ({result.reason})" if result.degraded else None
    deps.progress("recall", known=len(known), note=note)
    return {"known": known, "recall_note": note}


def plan(state: ResearchState, deps: Deps) -> dict[str, Any]:
    """Plan queries from the topic and known facts; fallback: topic + gap keyword queries."""
    n = state.options.queries
    known_text, mode_note = prompts.render_known(state.known, state.options.lifecycle, deps.age_tag)
    messages = prompts.plan_messages(state.topic, known_text, mode_note, n)
    fresh_text = " ".join(k.fact for k in state.known if _fresh(deps, state, k))
    data = ask(deps, state, messages, prompts.PLAN_SCHEMA, "planning", 24 * n + 32)
    anchor = state.topic + " " + " ".join(k.fact for k in state.known)
    proposed = clean_queries(data.get("queries") if isinstance(data, dict) else None, [], n, anchor)
    # The grounded query (topic or gap) always goes first; the model's add variety after it.
    queries = clean_queries(gap_queries(state, deps, fresh_text, 1) + proposed, [], n, anchor)
    method = "llm+fallback" if set(queries) & set(proposed) else "fallback"
    deps.progress("plan", queries=queries, method=method)
    return {"pending": queries, "planning_prompt": messages[-1]["content"]}


def _covered_by_kb(state: ResearchState, deps: Deps, query: str) -> bool:
    """True when fresh KB facts already answer the query (KB first: skip the search)."""
    if deps.kb is None:
        return False
    hits = deps.kb.query(query, mode=state.options.lifecycle, freshness=state.options.fresh, top_k=5).hits
    close = [
        h.fact
        for h in hits
        if h.relevance >= deps.cover_similarity
        and _fresh(deps, state, Known(h.id, h.fact, [], h.category, h.confidence, h.age_days))
    ]
    # Covered = related fresh facts that, together, mention every key word of the query.
    return bool(close) and not missing_words(query, " ".join(close))


def _search_one(state: ResearchState, deps: Deps, query: str) -> tuple[list[Any], bool, str | None, str | None]:
    """Cache → backend for one query: (results, cache hit, cache key, error). No DB access here:
    it may run in a worker thread."""
    from deepresearch.search.cache import cached_search

    cache = deps.cache if state.options.use_cache else None
    try:
        results, hit, key = cached_search(deps.backend, query, state.options.results_per_query, cache)
    except SearchError as exc:
        # One failed query (network down, server gone) must not end the run: the other
        # queries and the knowledge base still feed the report.
        return [], False, None, str(exc)
    return results, hit, key if cache is not None else None, None  # links only for cached results


def search(state: ResearchState, deps: Deps) -> dict[str, Any]:
    """Search each pending query (cache → backend); dedupe results across queries by URL."""
    queries = [q for q in state.pending if not _covered_by_kb(state, deps, q)]
    for q in state.pending:
        if q not in queries:
            state.bump("kb_covered")
            deps.progress("search", query=q, skipped="covered by the knowledge base")
    cache = deps.cache if state.options.use_cache else None
    if cache is not None and deps.kb is not None:  # the KB wins: drop cached results behind superseded facts
        for q in queries:
            evict_if_superseded(
                deps.conn, deps.kb, cache, cache.key(deps.backend.name, q, state.options.results_per_query)
            )
    if getattr(deps.backend, "io_bound", False) and len(queries) > 1:
        with ThreadPoolExecutor(max_workers=min(4, len(queries))) as pool:
            found = pool.map(lambda q: _search_one(state, deps, q), queries)
            outcomes = list(zip(queries, found, strict=True))
    else:
        outcomes = []
        for q in queries:
            if deps.over_budget():
                deps.progress("search", query=q, skipped="budget spent")
                continue
            outcomes.append((q, _search_one(state, deps, q)))
    sources = list(state.sources)
    # Same URL with another passage (another chunk of one document) is new evidence.
    seen = {(s.url, s.text) for s in sources}
    new: list[str] = []
    for query, (results, hit, key, error) in outcomes:
        if error:
            state.bump("search_errors")
            state.last_search_error = error
            deps.progress("search", query=query, skipped=f"search failed: {error}")
            continue
        state.bump("cache_hits" if hit else "backend_searches")
        fresh = 0
        for r in results:
            text = r.text or r.snippet
            if (r.url, text) in seen or not text:
                continue
            source = Source(f"S{len(sources) + 1}", r.url, r.title or "", text, query, state.loop, key, r.backend)
            sources.append(source)
            seen.add((r.url, text))
            new.append(source.sid)
            fresh += 1
        deps.progress("search", query=query, hits=len(results), new=fresh, cache="hit" if hit else "miss")
    return {
        "sources": sources,
        "new_sources": new,
        "queries_done": state.queries_done + [q for q in state.pending if q not in state.queries_done],
        "pending": [],
    }


def summarize(state: ResearchState, deps: Deps) -> dict[str, Any]:
    """Per query: the sentences most similar to it, with their short ids; a model rewrite if it validates."""
    by_sid = state.source_by_sid()
    summaries = list(state.summaries)
    for query in dict.fromkeys(by_sid[sid].query for sid in state.new_sources):
        items = [
            (sid, s)
            for sid in state.new_sources
            if by_sid[sid].query == query
            for s in prose_sentences(by_sid[sid].text)
        ]
        # Follow-up queries are keywords: rank against them in the light of the question.
        focus = query if query == state.topic else f"{state.topic} {query}"
        ranked = rank_by_similarity(deps.embedder, focus, [s for _, s in items])
        chosen: list[tuple[str, list[str]]] = []
        for score, i in ranked:
            sid, sentence = items[i]
            if score < MIN_EVIDENCE_SIMILARITY:
                break  # off-topic sentences are not findings
            if all(_key(sentence) != _key(c) for c, _ in chosen):
                chosen.append((sentence, [sid]))
            if len(chosen) == SUMMARY_SENTENCES:
                break
        if not chosen:
            continue
        evidence = {f"S{j}": s for j, (s, _) in enumerate(chosen, 1)}  # local ids: short prompt
        local_to_sid = {f"S{j}": ids[0] for j, (_, ids) in enumerate(chosen, 1)}
        text = ask(
            deps,
            state,
            prompts.summary_messages(query, prompts.evidence_lines(list(evidence.items())), SUMMARY_SENTENCES),
            None,
            "summary",
            40 * SUMMARY_SENTENCES,
        )
        rewrite = grounded_rewrite(text, evidence)
        if rewrite:
            sentences = [(s, [local_to_sid[i] for i in ids]) for s, ids in rewrite]
            summaries.append(Summary(query, state.loop, sentences, "llm"))
        else:
            summaries.append(Summary(query, state.loop, chosen, "extractive"))
        deps.progress("summarize", query=query, sentences=len(summaries[-1].sentences), method=summaries[-1].method)
    return {"summaries": summaries}


def extract(state: ResearchState, deps: Deps) -> dict[str, Any]:
    """Extract grounded facts from each new source (real URLs) and store them in the KB."""
    by_sid = state.source_by_sid()
    fact_ids, facts, added_total = list(state.fact_ids), list(state.facts), 0
    seen = {_key(f["fact"]) for f in facts}
    model = None if deps.over_budget() else deps.model
    for sid in state.new_sources:
        source = by_sid[sid]
        if model is not None:
            deps.progress("model", what=f"extracting facts from {sid}")
        result = deps.extract(
            source.text, source.url, topic=state.topic, model=model, max_facts=state.options.facts_per_source
        )
        batch = []
        for f in result.facts:
            f.source_url, f.research_topic = source.url, f.research_topic or state.topic
            batch.append(f)
        added: list[str] = []
        ids: list[str] = []
        if batch and deps.kb is not None and state.options.kb_write:
            outcome = deps.kb.add_facts(batch)
            added, ids = list(outcome.added), list(outcome.added) + list(outcome.reconfirmed)
            state.bump("facts_rejected", len(outcome.rejected))
            if source.cache_key and ids:
                link_facts(deps.conn, source.cache_key, ids, state.run_id)
            new_here = len(added)
        else:
            new_here = sum(1 for f in batch if _key(f.fact) not in seen)
        for f in batch:
            if _key(f.fact) not in seen:
                seen.add(_key(f.fact))
                facts.append({"fact": f.fact, "url": source.url, "category": f.category})
        fact_ids += [i for i in ids if i not in fact_ids]
        added_total += new_here
        state.bump("facts_rejected", result.rejected)
        deps.progress("extract", source=sid, facts=len(batch), added=new_here, method=result.method)
    state.bump("facts_added", added_total)
    return {"fact_ids": fact_ids, "facts": facts, "loop_facts": added_total}


def bridge_queries(state: ResearchState, n: int) -> list[str]:
    """Multi-hop follow-ups: names the findings mention but the question does not (the bridge to
    the next hop), each with the question's words the findings still miss."""
    findings = [s for summary in state.summaries for s, _ in summary.sentences]
    topic_stems = {stem(w) for w in content_words(state.topic)}
    gap = missing_words(state.topic, " ".join(findings)) or topic_words(state.topic)[:2]
    names: list[str] = []
    for sentence in findings:
        for match in _NAME.finditer(sentence):
            name = match.group(0).rstrip(".")
            words = content_words(name)
            if match.start() == 0 and len(words) < 2:
                continue  # a capitalized first word is usually not a name
            if words and not all(stem(w) in topic_stems for w in words) and name not in names:
                names.append(name)
    candidates = [f"{name} {' '.join(gap[:3])}" for name in names]
    return clean_queries(candidates, state.queries_done, n, state.topic + " " + " ".join(findings))


def reflect(state: ResearchState, deps: Deps) -> dict[str, Any]:
    """Decide: stop (no progress, sufficient, loops, budget, nothing left) or follow-up queries."""
    findings = "\n".join(f"- {s}" for summary in state.summaries for s, _ in summary.sentences)
    by_sid = state.source_by_sid()
    seen_text = findings + " " + " ".join(f["fact"] for f in state.facts) + " " + " ".join(k.fact for k in state.known)
    n = state.options.queries
    data = ask(
        deps,
        state,
        prompts.reflect_messages(state.topic, state.queries_done, truncate(findings, 2000), n),
        prompts.REFLECT_SCHEMA,
        "reflection",
        24 * n + 48,
    )
    data = data if isinstance(data, dict) else {}
    follow = clean_queries(data.get("follow_up_queries"), state.queries_done, n, state.topic + " " + findings)
    method = "llm" if follow else "fallback"
    if not follow and (state.known or state.summaries):
        follow = (gap_queries(state, deps, seen_text, n) + bridge_queries(state, n))[:n]
    gap_words = missing_words(state.topic, seen_text)
    cited = {by_sid[i].url for summary in state.summaries for _, ids in summary.sentences for i in ids if i in by_sid}
    # The model's "sufficient" is trusted only when the evidence agrees: findings from two sources or
    # more cover every word of the question. Without a model answer, the evidence alone decides.
    sufficient = bool(data.get("sufficient", True)) and len(cited) >= 2 and not gap_words
    loop_no = state.loop + 1
    if not state.queries_done and state.known:
        stop: str | None = "kb-covered"  # the plan found nothing the fresh KB facts miss
    elif state.loop_facts == 0:
        stop = "no-progress"
    elif sufficient:
        stop = "sufficient"
    elif loop_no >= state.options.loops:
        stop = "max-loops"
    elif deps.over_budget():
        stop = "budget"
    elif not follow:
        stop = "no-follow-ups"
    else:
        stop = None
    record = {
        "loop": loop_no,
        "sufficient": sufficient,
        "gap": str(data.get("knowledge_gap") or " ".join(gap_words)),
        "follow_ups": follow if stop is None else [],
        "new_facts": state.loop_facts,
        "new_sources": len(state.new_sources),
        "method": method,
        "stop": stop,
    }
    deps.progress("reflect", **record)
    update: dict[str, Any] = {"reflections": state.reflections + [record], "stop_reason": stop}
    if stop is None:
        update.update(pending=follow, loop=loop_no, new_sources=[], loop_facts=0)
    return update
