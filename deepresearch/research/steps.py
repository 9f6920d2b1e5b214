"""The steps of the research loop. Each takes the state, the dependencies and the run's context
(budget, progress, model gate, tally) and returns its update (field → value); it never writes
the state it reads. `loop.py` applies the update, checkpoints, and routes to the next step.

Evidence first, model second: every step works without the model (the question as the
first query, bridge follow-ups, an evidence pool ranked against the question, scored answer
candidates); a step listed in `research.model_steps` asks the model too, and its output is
used only when it validates against the evidence.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from deepresearch.errors import SearchError
from deepresearch.models.standalone import ModelCheck, ModelChecked
from deepresearch.research import answer as answers
from deepresearch.research import prompts
from deepresearch.research.answer import proximity
from deepresearch.research.cache_links import evict_if_superseded, link_facts
from deepresearch.research.deps import Deps, RunContext
from deepresearch.research.evidence import (
    chain_text,
    cited_passages,
    index_sources,
    ranked_pool,
    sentence_relevance,
)
from deepresearch.research.model_io import ask, record
from deepresearch.research.queries import (
    Bridge,
    clean_queries,
    is_fresh,
    missing_words,
    names_in,
    new_to,
    query_key,
    stems,
    topic_words,
)
from deepresearch.research.router import decide_stop
from deepresearch.research.state import Known, ResearchState, Source
from deepresearch.text import truncate

FACT_RELEVANCE = 0.3  # a fact is stored only this similar to the question (or naming the answer)
BRIDGE_ORIGINS = 3


def _fresh(deps: Deps, state: ResearchState, known: Known) -> bool:
    return is_fresh(known, state.options.lifecycle, state.options.fresh, deps.freshness_days)


def recall(state: ResearchState, deps: Deps, run: RunContext) -> dict[str, Any]:
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
    run.progress("recall", known=len(known), note=note)
    return {"known": known, "recall_note": note}


def plan(state: ResearchState, deps: Deps, run: RunContext) -> dict[str, Any]:
    """The question first (or the words fresh KB facts miss), stale facts to re-check, then the model's."""
    n = state.options.queries
    known_text, mode_note = prompts.render_known(state.known, state.options.lifecycle, deps.age_tag)
    messages = prompts.plan_messages(state.topic, known_text, mode_note, n)
    fresh_text = " ".join(k.fact for k in state.known if _fresh(deps, state, k))
    stale = [k.fact for k in state.known if not _fresh(deps, state, k) and k.relevance >= deps.cover_similarity]
    anchor = state.topic + " " + " ".join(k.fact for k in state.known)
    # The question itself goes first, unless fresh KB facts already speak to all its key words (KB first).
    covered = bool(fresh_text) and not missing_words(state.topic, fresh_text)
    grounded = [] if covered else [state.topic]
    grounded += clean_queries([truncate(fact, 100) for fact in stale], grounded, n - len(grounded), anchor)
    proposed = ask(
        run,
        state,
        "plan",
        messages,
        prompts.PLAN_SCHEMA,
        lambda d: clean_queries(d.get("queries") if isinstance(d, dict) else None, grounded, n, anchor),
        24 * n + 32,
    )
    queries = (grounded + (proposed or []))[:n]
    method = "llm+fallback" if proposed and set(queries) & set(proposed) else "fallback"
    run.progress("plan", queries=queries, method=method)
    return {"pending": queries}


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


def _searched(state: ResearchState, deps: Deps, run: RunContext) -> tuple[list[str], list[tuple[str, Any]]]:
    """The pending queries the KB does not already cover, and (query, `_search_one` outcome) for
    each of them searched before the budget ran out."""
    # KB first for the planned queries; a hop's query names what the evidence just found.
    queries = [q for q in state.pending if state.loop > 0 or not _covered_by_kb(state, deps, q)]
    for q in state.pending:
        if q not in queries:
            run.bump("kb_covered")
            run.progress("search", query=q, skipped="covered by the knowledge base")
    cache = deps.cache if state.options.use_cache else None
    if cache is not None and deps.kb is not None:  # the KB wins: drop cached results behind superseded facts
        for q in queries:
            evict_if_superseded(
                deps.conn, deps.kb, cache, cache.key(deps.backend.name, q, state.options.results_per_query)
            )
    if getattr(deps.backend, "io_bound", False) and len(queries) > 1:
        with ThreadPoolExecutor(max_workers=min(4, len(queries))) as pool:
            found = pool.map(lambda q: _search_one(state, deps, q), queries)
            return queries, list(zip(queries, found, strict=True))
    outcomes = []
    for q in queries:
        if run.budget.spent():
            run.progress("search", query=q, skipped="budget spent")
            continue
        outcomes.append((q, _search_one(state, deps, q)))
    return queries, outcomes


def search(state: ResearchState, deps: Deps, run: RunContext) -> dict[str, Any]:
    """Search each pending query (cache → backend); every hit joins the evidence pool with its rank."""
    queries, outcomes = _searched(state, deps, run)
    sources = list(state.sources)
    retrievals = list(state.retrievals)
    # Same URL with another passage (another chunk of one document) is new evidence.
    seen = {(s.url, s.text): s.sid for s in sources}
    new: list[str] = []
    update: dict[str, Any] = {}
    for query, (results, hit, key, error) in outcomes:
        if error:
            run.bump("search_errors")
            update["last_search_error"] = error
            run.progress("search", query=query, skipped=f"search failed: {error}")
            continue
        run.bump("cache_hits" if hit else "backend_searches")
        fresh = 0
        for rank, r in enumerate(results, 1):
            text = r.text or r.snippet
            if not text:
                continue
            sid = seen.get((r.url, text))
            if sid is None:
                sid = f"S{len(sources) + 1}"
                sources.append(
                    Source(sid, r.url, r.title or "", text, query, state.loop, key, r.backend, rank, r.score)
                )
                seen[(r.url, text)] = sid
                new.append(sid)
                fresh += 1
            retrievals.append([sid, query, rank])
        run.progress("search", query=query, hits=len(results), new=fresh, cache="hit" if hit else "miss")
    return {
        **update,
        "sources": sources,
        "retrievals": retrievals,
        "new_sources": new,
        "queries_done": state.queries_done + [q for q in queries if q not in state.queries_done],
        "pending": [],
    }


def rank(state: ResearchState, deps: Deps, run: RunContext) -> dict[str, Any]:
    """Index the new passages against the question, re-rank the pool, and take the best answer so far."""
    sources = index_sources(deps.embedder, state.topic, state.sources)
    ranked = dataclasses.replace(state, sources=sources)  # the pool as it stands after this step
    passages = cited_passages(ranked)
    candidate = answers.best_answer(ranked, passages)
    run.progress("rank", passages=len(sources), cited=len(passages), candidate=candidate and candidate.text)
    return {"sources": sources, "candidate": candidate}


def _relevance(state: ResearchState, source: Source) -> Callable[[str], bool]:
    """Is a fact of `source` related to the question: from a sentence similar enough to it (the similarity
    the rank step already computed), sharing two of its key words, or naming the answer candidate?"""
    key = stems(" ".join(topic_words(state.topic)))
    answer = state.candidate.text.lower() if state.candidate else ""
    indexed = [(stems(x.text), x.to_question) for x in source.sentences]

    def related(fact: str) -> bool:
        words = stems(fact)
        similarity = max((sim for sent, sim in indexed if words and len(words & sent) >= 0.8 * len(words)), default=0.0)
        return similarity >= FACT_RELEVANCE or len(words & key) >= 2 or bool(answer and answer in fact.lower())

    return related


def _model_check(run: RunContext, sid: str) -> ModelCheck | None:
    """The chat model's stands-alone check for one passage's facts, when the `check` step may use the model."""
    model = run.model_for("check")
    if model is None:
        return None
    run.progress("model", what=f"check {sid}")
    return ModelCheck(model, run.clock, run.budget.spent)


def _categorizer(deps: Deps) -> Any:
    from deepresearch.models.categorize import default_categorizer

    return deps.categorizer if deps.categorizer is not None else default_categorizer()


def _extracted(state: ResearchState, deps: Deps, run: RunContext, source: Source) -> list[Any]:
    """The grounded facts of one passage that relate to the question, with its URL and the topic."""
    model = run.model_for("extract")
    if model is not None:
        run.progress("model", what=f"extract {source.sid}")
    check, related = _model_check(run, source.sid), _relevance(state, source)
    started = run.clock()
    result = deps.extract(
        source.text,
        source.url,
        topic=state.topic,
        model=model,
        max_facts=state.options.facts_per_source,
        title=source.title,  # "It …" resolves to the page's subject only when that is certain
        # The model judges only facts the relevance test below keeps: the others are not stored anyway.
        **({"categorizer": ModelChecked(_categorizer(deps), check, related)} if check is not None else {}),
    )
    if check is not None:  # its seconds are inside the extraction's: the extract step's are the rest
        record(run, "check", check.calls, check.kept, check.seconds)
        run.bump("facts_dropped_by_check", check.dropped)
        if check.failures:
            run.bump("llm_failures", check.failures)
    if model is not None:
        accepted = sum(m == "model" for m in result.methods)
        record(run, "extract", result.proposed, accepted, run.clock() - started - (check.seconds if check else 0.0))
    relevant = [f for f in result.facts if related(f.fact)]
    for f in relevant:
        f.source_url, f.research_topic = source.url, f.research_topic or state.topic
    run.bump("facts_rejected", result.rejected)
    skipped = len(result.facts) - len(relevant)
    run.progress("extract", source=source.sid, facts=len(relevant), skipped=skipped, method=result.method)
    return relevant


def _stored(state: ResearchState, deps: Deps, run: RunContext, batch: list[Any]) -> dict[str, Any]:
    """Store the loop's facts in the KB (one write), link them to the cache entries that produced
    them; the update: fact ids, the facts for the report, how many were new."""
    assert deps.kb is not None
    fact_ids, facts = list(state.fact_ids), list(state.facts)
    seen = {query_key(f["fact"]) for f in facts}
    outcome = deps.kb.add_facts(batch)
    run.bump("facts_rejected", len(outcome.rejected))
    stored = [deps.kb.get(i) for i in dict.fromkeys(list(outcome.added) + list(outcome.reconfirmed))]
    for fact in stored:
        for source in state.sources:  # the cache entries that produced it (a URL may come from several)
            if source.cache_key and source.url in (fact.sources or [fact.source_url]):
                link_facts(deps.conn, source.cache_key, [fact.id], state.run_id)
        if fact.id not in fact_ids:
            fact_ids.append(fact.id)
        if query_key(fact.fact) not in seen:
            seen.add(query_key(fact.fact))
            facts.append({"fact": fact.fact, "url": fact.source_url, "category": fact.category, "id": fact.id})
    return {"fact_ids": fact_ids, "facts": facts, "loop_facts": len(outcome.added)}


def extract(state: ResearchState, deps: Deps, run: RunContext) -> dict[str, Any]:
    """Extract grounded facts from the new passages the run cites; store those related to the question
    (one KB write per loop)."""
    by_sid = state.source_by_sid()
    cited = set(cited_passages(state))
    batch: list[Any] = []
    for sid in [s for s in state.new_sources if s in cited]:
        batch += _extracted(state, deps, run, by_sid[sid])
    if batch and deps.kb is not None and state.options.kb_write:
        update = _stored(state, deps, run, batch)
    else:
        facts = list(state.facts)
        seen = {query_key(f["fact"]) for f in facts}
        for f in batch:
            if query_key(f.fact) not in seen:
                seen.add(query_key(f.fact))
                facts.append({"fact": f.fact, "url": f.source_url, "category": f.category, "id": ""})
        update = {"fact_ids": list(state.fact_ids), "facts": facts, "loop_facts": len(facts) - len(state.facts)}
    run.bump("facts_added", update["loop_facts"])
    return update


def bridges(state: ResearchState, n: int) -> list[Bridge]:
    """Next-hop subjects: names in the best passages (titles and names in their best sentences)
    that the question does not mention, ranked by passage rank and sentence relevance."""
    question_stems = stems(state.topic)
    followed = {query_key(h.get("entity", "")) for h in state.hops.values()}
    ranked = [(sid, score) for sid, score in ranked_pool(state) if sid not in state.bridged]
    by_sid = state.source_by_sid()
    held = {query_key(s.title) for s in state.sources if s.title}
    top = ranked[0][1] if ranked else 1.0
    found: dict[str, Bridge] = {}
    for sid, score in ranked[:BRIDGE_ORIGINS]:
        source = by_sid[sid]
        remaining = missing_words(state.topic, chain_text(state, sid)) or topic_words(state.topic)[:3]
        is_hop = source.query != state.topic
        anchors = question_stems | stems(source.query)
        # Names weigh by their sentence and by how close they stand to the question's words there
        # ("directed by Mara Quell"); a name whose own document the run already holds is no bridge.
        named = []
        for x in source.sentences:
            for name in names_in(x.text):
                near = proximity(x.text, x.text.find(name), name, anchors)
                named.append((name, (0.3 + sentence_relevance(x, is_hop)) * near))
        for name, relevance in named:
            key = query_key(name)
            if not key or key in followed or key in held or not new_to(name, question_stems):
                continue
            value = (score / top) * relevance
            if key not in found or value > found[key].score:
                found[key] = Bridge(name, value, sid, remaining)
    return sorted(found.values(), key=lambda b: -b.score)[: n * 2]


def reflect(state: ResearchState, deps: Deps, run: RunContext) -> dict[str, Any]:
    """Sufficient (a supported answer)? If not, follow-ups that bridge through names the evidence found."""
    n = state.options.queries
    by_sid = state.source_by_sid()
    cited = cited_passages(state)
    findings = "\n".join(
        f"- {x.text}" for sid in cited[:6] for x in sorted(by_sid[sid].sentences, key=lambda x: -x.to_question)[:1]
    )
    anchor = state.topic + " " + " ".join(by_sid[sid].text for sid in cited)
    proposed = ask(
        run,
        state,
        "reflect",
        prompts.reflect_messages(state.topic, state.queries_done, findings, n),
        prompts.REFLECT_SCHEMA,
        lambda d: clean_queries(
            d.get("follow_up_queries") if isinstance(d, dict) else None, state.queries_done, n, anchor
        ),
        24 * n + 48,
    )
    hops = dict(state.hops)
    bridged = list(state.bridged)
    follow: list[str] = list(proposed or [])
    for bridge in bridges(state, n):
        if len(follow) >= n:
            break
        query = bridge.query()
        if clean_queries([query], state.queries_done + follow, 1, anchor):
            follow.append(query)
            hops[query] = {"parent": bridge.sid, "entity": bridge.entity}
            if bridge.sid not in bridged:
                bridged.append(bridge.sid)
    sufficient = answers.supported(state)
    loop_no = state.loop + 1
    stop = decide_stop(state, sufficient, follow, run.budget.spent())
    record_ = {
        "loop": loop_no,
        "sufficient": sufficient,
        "candidate": state.candidate.text if state.candidate else None,
        "gap": " ".join(missing_words(state.topic, anchor)),
        "follow_ups": follow if stop is None else [],
        "new_facts": state.loop_facts,
        "new_sources": len(state.new_sources),
        "method": "llm" if proposed else "bridge",
        "stop": stop,
    }
    run.progress("reflect", **record_)
    update: dict[str, Any] = {"reflections": state.reflections + [record_], "stop_reason": stop}
    if stop is None:
        update.update(pending=follow, loop=loop_no, new_sources=[], loop_facts=0, hops=hops, bridged=bridged)
    return update
