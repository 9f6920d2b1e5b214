"""`kb sync milvus`: push knowledge-base facts to a Milvus collection and pull them back.

Push is incremental. Every KB change appends a `fact_history` row, so the last pushed
history `seq` per (uri, collection) is kept in `meta`; a push sends only facts with newer
history rows: active ones are upserted (primary key = the fact's ULID), superseded, expired
or purged ones are deleted, and facts that passed their `expires_at` without a sweep are
deleted remotely by filter. A push that fails writes no watermark, so the next one resends the
same changes; upserts by id make that idempotent. Pull reads the remote facts that are new here
or verified more recently. Those new here go through the write path of `kb add`
(`KnowledgeBase.receive_facts`: merge planning on, ids, times and sources kept), so a newer
value of a fact here supersedes it under the pulled id and a disagreeing one is flagged as a
conflict, as if added here; those known here by id are reconfirmed (`import_facts`, the path
`kb import` uses). A pull stores the remote
vectors when the collection was built with the local embedding model (its id is a collection
property and a field of every row), else it re-embeds the pulled facts with the local model.

The Milvus client, schema and collection checks are in kb/milvus.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypedDict

from deepresearch.config import KBConfig, MilvusConfig
from deepresearch.db import get_meta, set_meta
from deepresearch.errors import DeepResearchError, InputError
from deepresearch.facts import Fact
from deepresearch.kb import records
from deepresearch.kb import repository as repo
from deepresearch.kb.milvus import (
    Remote,
    RemoteVectors,
    check_compatible,
    create,
    default_client,
    describe,
    fact_row,
    quiet_pymilvus,
    resolve_uri,
    source_urls,
    validate_collection,
)
from deepresearch.kb.repository import DIMENSION_KEY, MODEL_KEY
from deepresearch.kb.store import KnowledgeBase
from deepresearch.text import redact_secrets

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger(__name__)

DIRECTIONS = ("push", "pull", "both")
WATERMARK_PREFIX = "sync.milvus:"

Progress = Callable[[str, int, int], None]


@dataclass
class SyncReport:
    """Counts of one sync; `deleted` counts ids sent for deletion plus remote rows past expiry."""

    uri: str
    collection: str
    direction: str
    dry_run: bool = False
    pushed: int = 0
    deleted: int = 0
    pulled: int = 0
    reconfirmed: int = 0
    updated: int = 0  # pulled facts that replaced (superseded) a fact here: a newer value, or a fusion
    flagged: int = 0  # pulled facts that contradict a fact here: both kept, an open conflict
    skipped: int = 0
    reused_vectors: int = 0
    embedded: int = 0
    created: bool = False
    remote_dimension: int | None = None
    remote_model: str | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for the terminal and logs."""
        would = "would " if self.dry_run else ""
        parts = []
        if self.direction in ("push", "both"):
            parts.append(f"{would}push {self.pushed}, {would}delete {self.deleted}")
        if self.direction in ("pull", "both"):
            parts.append(
                f"{would}pull {self.pulled} (reconfirmed {self.reconfirmed}, updated {self.updated},"
                f" conflicts {self.flagged})"
            )
        return (
            f"milvus {self.collection}: {'; '.join(parts)}; skipped {self.skipped};"
            f" dimension {self.remote_dimension}; {self.seconds:.2f}s"
        )

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-able data, the server URL without its credentials."""
        return {**asdict(self), "uri": redact_secrets(self.uri)}


# --- push -------------------------------------------------------------------------------


def _watermark_key(uri: str, collection: str) -> str:
    return f"{WATERMARK_PREFIX}{uri}#{collection}"


def _read_watermark(conn: Any, key: str) -> int:
    raw = get_meta(conn, key)
    return int(json.loads(raw)["seq"]) if raw else 0


def _write_watermark(conn: Any, key: str, seq: int, now: float) -> None:
    set_meta(conn, key, json.dumps({"seq": seq, "at": now}))


class _VectorReader:
    """Fact vectors by rid: one chunk-wise read of all vectors for a big push, else point lookups."""

    def __init__(self, conn: Any, bulk: bool):
        self.conn, self.all = conn, None
        if bulk:
            from deepresearch.kb.engines import read_all_vectors

            rids, matrix = read_all_vectors(conn)
            self.all = dict(zip(rids.tolist(), matrix, strict=True))

    def get(self, rid: int) -> Any:
        """The vector of a fact row, None if it has none (stored while sqlite-vec was unavailable)."""
        if self.all is not None:
            return self.all.get(rid)
        from deepresearch.kb.repository import FACT_VEC

        return FACT_VEC.vectors(self.conn, [rid]).get(rid)


@dataclass
class _Session:
    """One sync's shared values: the remote, its collection, the report being filled, the
    watermark key, the sync's time, the batch size and the progress callback."""

    remote: Remote
    collection: str
    report: SyncReport
    key: str
    now: float
    batch: int
    progress: Progress | None


def _push(conn: Any, s: _Session) -> None:
    model, dim = get_meta(conn, MODEL_KEY) or "", int(get_meta(conn, DIMENSION_KEY) or 0)
    remote, collection, report = s.remote, s.collection, s.report
    existing = describe(remote, collection)
    # a collection that is gone (dropped, or a new server) gets everything, not just the changes
    since = _read_watermark(conn, s.key) if existing is not None else 0
    upto = records.last_seq(conn)
    changed = records.changes_since(conn, since, upto)
    if changed and not model:
        raise DeepResearchError(
            "cannot push: the knowledge base has no embedding vectors yet — run `deepresearch kb reembed`"
        )
    if existing is not None:
        report.remote_dimension, report.remote_model = existing
        if model:
            check_compatible(collection, remote.uri, existing, model, dim)
        remote.call("load_collection", collection)  # a new process finds it released
    if changed and not getattr(conn, "vec_version", None):
        raise DeepResearchError(
            "cannot push: sqlite-vec is not available to read the fact vectors — pip install sqlite-vec sqlean-py"
        )
    if existing is None and changed:
        report.created, report.remote_dimension, report.remote_model = True, dim, model
        if not report.dry_run:
            create(remote, collection, dim, model)
    no_vector = _push_changes(conn, s, changed, model, created=existing is None)
    if existing is not None:
        report.deleted += _delete_expired(remote, collection, s.now, report.dry_run)
    if no_vector:
        report.skipped += len(no_vector)
        report.warnings.append(
            f"{len(no_vector)} fact(s) have no vector yet and were not pushed — run"
            " `deepresearch kb reembed`, then sync again"
        )
        upto = min(no_vector) - 1
    if not report.dry_run:
        if report.pushed or report.deleted:
            remote.call("flush", collection)  # searches before a flush are slow (≈0.5 s each)
        _write_watermark(conn, s.key, upto, s.now)


def _push_changes(conn: Any, s: _Session, changed: list[tuple[str, int]], model: str, created: bool) -> list[int]:
    """Upsert the changed facts that are live, delete the others remotely (none from a collection
    this push `created`); returns the first history seq of facts without a vector (resent next time)."""
    vectors = _VectorReader(conn, bulk=len(changed) > 2000)
    no_vector: list[int] = []
    report = s.report
    for start in range(0, len(changed), s.batch):
        chunk = changed[start : start + s.batch]
        found, stored = repo.select_facts(conn, "id", [c[0] for c in chunk])
        facts = {f.id: f for f in stored}
        live = {r[1]: r[0] for r in found if r[10] == "active" and (r[9] is None or r[9] >= s.now)}
        upserts, deletes = [], []
        for fact_id, first_seq in chunk:
            if fact_id not in live:  # superseded, expired, past expires_at, or purged
                deletes.append(fact_id)
                continue
            vector = vectors.get(live[fact_id])
            if vector is None:
                no_vector.append(first_seq)
                continue
            row, problem = fact_row(facts[fact_id], vector, model)
            if row is None:
                report.skipped += 1
                report.warnings.append(f"fact {fact_id} not pushed: {problem}")
            else:
                upserts.append(row)
        deletes = [] if created else deletes  # nothing to delete in a collection this push creates
        if not report.dry_run:
            if upserts:
                s.remote.call("upsert", s.collection, upserts)
            if deletes:
                s.remote.call("delete", s.collection, ids=deletes)
        report.pushed += len(upserts)
        report.deleted += len(deletes)
        if s.progress:
            s.progress("push", min(start + s.batch, len(changed)), len(changed))
    return no_vector


def _delete_expired(remote: Remote, collection: str, now: float, dry_run: bool) -> int:
    """Remote facts past expires_at that no local event removed (no sweep ran yet)."""
    expr = f"expires_at >= 0 and expires_at < {now!r}"
    if dry_run:
        return _count(remote, collection, expr)
    result = remote.call("delete", collection, filter=expr)
    count = result.get("delete_count") if isinstance(result, dict) else None
    return int(count) if count is not None else len(result or [])


# --- pull -------------------------------------------------------------------------------

PULL_FIELDS = [
    "id", "fact", "source_url", "sources", "category", "confidence", "research_topic",
    "created_at", "verified_at", "expires_at", "embedding_model",
]  # fmt: skip


def _live(now: float) -> str:
    """The filter of the remote facts a pull reads: active and not past `expires_at`."""
    return f'status == "active" and (expires_at < 0 or expires_at >= {now!r})'


def _count(remote: Remote, collection: str, expr: str) -> int:
    """How many remote rows match `expr` (a dry run's count of rows past expiry)."""
    found = remote.call("query", collection, filter=expr, output_fields=["count(*)"], consistency_level="Strong")
    return int(found[0]["count(*)"]) if found else 0


def _rows_about(remote: Remote, collection: str) -> int:
    """The collection's row count from its statistics: a pull's progress total, cheap but rough
    (expired rows count); a filtered count(*) scans every row (milvus-lite: > 30 s at 100k)."""
    stats = remote.call("get_collection_stats", collection)
    return int(stats.get("row_count") or 0) if isinstance(stats, dict) else 0


def _remote_batches(remote: Remote, collection: str, now: float, batch: int) -> Iterator[list[dict]]:
    """The live remote rows without their vectors (a pull that finds nothing new reads no vectors)."""
    # Strong: a collection made before deepresearch asked for it at creation may be "Bounded"
    iterator = remote.call(
        "query_iterator", collection, batch_size=batch, filter=_live(now), output_fields=PULL_FIELDS,
        consistency_level="Strong",
    )  # fmt: skip
    try:
        while True:
            rows = remote.next_batch(iterator)
            if not rows:
                return
            yield list(rows)
    finally:
        with contextlib.suppress(Exception):
            iterator.close()


def _wanted(conn: Any, rows: list[dict]) -> tuple[list[Fact], int]:
    """Remote rows worth storing here (new, verified later, or with new sources) and the rest's count."""
    ids = [r["id"] for r in rows]
    marks = ",".join("?" * len(ids))
    local = repo.states(conn, ids)
    sources: dict[str, set[str]] = {}
    for fid, url in conn.execute(f"select fact_id, url from fact_sources where fact_id in ({marks})", ids):
        sources.setdefault(fid, set()).add(url)
    deleted = {
        r[0]
        for r in conn.execute(
            f"select distinct fact_id from fact_history where event = 'delete' and fact_id in ({marks})", ids
        )
    }
    wanted, skipped = [], 0
    for r in rows:
        remote_sources = source_urls(r)
        state = local.get(r["id"])
        if state is None and r["id"] in deleted:
            skipped += 1  # purged here: a pull must not bring it back
            continue
        if state is not None and (
            state[0] == "superseded"
            or (r["verified_at"] <= state[1] and set(remote_sources) <= sources.get(r["id"], set()))
        ):
            skipped += 1
            continue
        wanted.append(
            Fact(
                fact=r["fact"],
                source_url=r["source_url"],
                research_topic=r.get("research_topic") or "",
                category=r["category"],
                confidence=float(r["confidence"]),
                created_at=float(r["created_at"]),
                verified_at=float(r["verified_at"]),
                expires_at=None if r["expires_at"] < 0 else float(r["expires_at"]),
                status="active",
                id=r["id"],
                sources=remote_sources,
            )
        )
    return wanted, skipped


def _store_pulled(kb: KnowledgeBase, wanted: list[Fact], now: float, vectors: RemoteVectors,
                  report: SyncReport) -> list[str]:  # fmt: skip
    """Store pulled facts; returns the ids added. Facts new here go through the write path of
    `kb add` (merged with or flagged against the facts here, ids and times kept); facts known
    here by id are reconfirmed (later verification, new sources) as `kb import` does."""
    known = set(repo.stored_texts(kb.conn, [f.id for f in wanted]))
    added: list[str] = []
    for facts, store in (
        ([f for f in wanted if f.id in known], kb.import_facts),
        ([f for f in wanted if f.id not in known], kb.receive_facts),
    ):
        if not facts:
            continue
        result = store(facts, now, embedder=vectors)
        merged = {m.new_id for m in result.merged}
        report.pulled += len(set(result.added) - merged)  # a changed value is listed as added: it counts as updated
        report.updated += len(merged)
        report.reconfirmed += len(set(result.reconfirmed) - merged)
        report.flagged += len(result.flagged)
        report.skipped += len(result.rejected)
        added += result.added
        for fact, reason in result.rejected[:20]:
            report.warnings.append(f"remote fact {fact.id} rejected: {reason}")
    return added


def _pull(kb: KnowledgeBase, s: _Session) -> None:
    from deepresearch.errors import NotFound

    remote, collection, report, now = s.remote, s.collection, s.report, s.now
    existing = describe(remote, collection)
    if existing is None:
        raise NotFound(f"no collection {collection} at {remote.uri} — push to it first, or check --collection")
    report.remote_dimension, report.remote_model = existing
    remote.call("load_collection", collection)  # a new process finds it released
    conn = kb.conn
    before = records.last_seq(conn)
    pushed_upto = _read_watermark(conn, s.key)
    added: set[str] = set()
    seen, total = 0, _rows_about(remote, collection) if s.progress else 0
    vectors = None
    if not report.dry_run:
        local = kb.embedder()  # cheap: a model loads on its first embed, not here
        # rows say which model made their vector; fetch vectors unless the collection says "another"
        vectors = RemoteVectors(local, reuse=report.remote_model in (None, local.model_id))
    for batch_rows in _remote_batches(remote, collection, now, s.batch):
        seen += len(batch_rows)
        wanted, skipped = _wanted(conn, batch_rows)
        report.skipped += skipped
        if report.dry_run:
            report.pulled += len(wanted)
        elif wanted and vectors is not None:
            if vectors.reuse:  # the vectors of the rows to store only
                fields = ["id", "fact", "embedding_model", "vector"]
                vectors.add(remote.call("get", collection, ids=[f.id for f in wanted], output_fields=fields))
            added.update(_store_pulled(kb, wanted, now, vectors, report))
        if s.progress:
            s.progress("pull", seen, max(total, seen))
    if s.progress and seen != total:
        s.progress("pull", seen, seen)  # the rough total was off (expired rows): end at 100 %
    if vectors is not None:
        report.reused_vectors, report.embedded = vectors.served, vectors.embedded
    if report.dry_run or pushed_upto != before:
        return
    # The remote already holds what was just pulled: when the pull's own 'add' rows are the only
    # new history, move the push watermark past them so the next push does not send them back.
    after = records.last_seq(conn)
    others = conn.execute(
        "select fact_id, event from fact_history where seq > ? and seq <= ?", (before, after)
    ).fetchall()
    if all(event == "add" and fid in added for fid, event in others):
        _write_watermark(conn, s.key, after, now)


# --- entry point ------------------------------------------------------------------------


class SyncSettings(TypedDict, total=False):
    """`sync_milvus`'s keyword options: the sync's time, rows per batch, the client seam for tests
    (`client_factory(uri, timeout)`, default MilvusClient), the deadline and retries of every
    Milvus call (default: the KB's kb.milvus), and the wait between retries."""

    now: float | None
    batch: int
    client_factory: Callable[[str, float], Any] | None
    settings: MilvusConfig | None
    sleep: Callable[[float], None]


def sync_milvus(
    kb_or_conn: Any,
    uri: str,
    collection: str = "deepresearch_facts",
    direction: str = "push",
    dry_run: bool = False,
    progress: Progress | None = None,
    **options: Unpack[SyncSettings],
) -> SyncReport:
    """Push local facts to (and/or pull remote facts from) a Milvus collection; returns counts.

    `kb_or_conn` is a KnowledgeBase (needed to pull: pulled facts are embedded locally) or a
    connection (push only); `options` are `SyncSettings`.
    """
    started = time.perf_counter()
    validate_collection(collection)  # before any connection: the name reaches Milvus calls
    if direction not in DIRECTIONS:
        raise InputError(f"unknown sync direction {direction!r} — use push, pull or both")
    resolved = resolve_uri(uri)
    # a bare connection can push (vectors are read, not made); its pull fails for want of an embedder
    kb = kb_or_conn if isinstance(kb_or_conn, KnowledgeBase) else KnowledgeBase(kb_or_conn, None, KBConfig())
    now = options.get("now")
    now = time.time() if now is None else now
    report = SyncReport(uri=resolved, collection=collection, direction=direction, dry_run=dry_run)
    settings, factory = options.get("settings") or kb.config.milvus, options.get("client_factory") or default_client
    with quiet_pymilvus():
        remote = Remote.connect(resolved, settings, factory, options.get("sleep", time.sleep))
        session = _Session(
            remote, collection, report, _watermark_key(resolved, collection), now, options.get("batch", 500), progress
        )
        try:
            if direction in ("push", "both"):
                _push(kb.conn, session)
            if direction in ("pull", "both"):
                _pull(kb, session)
        finally:
            remote.close()
    report.seconds = time.perf_counter() - started
    return report
