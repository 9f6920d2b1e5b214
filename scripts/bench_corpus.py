#!/usr/bin/env python3
"""Which FTS5 tokenizer for corpus chunks? BM25 quality on a BEIR folder plus a CJK probe.

    python scripts/bench_corpus.py ../shared/eval/beir/scifact [--json]

Chunks the corpus exactly like `corpus add` (same chunker, same query builder), indexes the
chunks in in-memory FTS5 tables with each candidate tokenizer, and prints nDCG@10, R@100,
index size and query latency p50 on the test split. The CJK probe counts Chinese queries
(2-character words included) whose target sentence is ranked first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_retrieval import load_qrels, ndcg_at, recall_at  # noqa: E402

from deepresearch.config import CorpusConfig  # noqa: E402
from deepresearch.db import connect  # noqa: E402
from deepresearch.search.corpus import fts_query  # noqa: E402
from deepresearch.search.ingest import chunk_text, fts_text  # noqa: E402

CANDIDATES = {
    # name: (tokenize option, transform text/query with CJK bigrams like the product does)
    "porter unicode61 + CJK bigrams (chosen)": ("porter unicode61 remove_diacritics 2", True),
    "unicode61": ("unicode61 remove_diacritics 2", False),
    "porter unicode61": ("porter unicode61 remove_diacritics 2", False),
    "trigram": ("trigram", False),
}

CJK_DOCS = [
    "2024年AI芯片销量大幅增长，GPU出货量创历史新高。",
    "今天的天气很好，我们去公园散步。",
    "电动汽车电池成本在过去十年下降了近九成。",
    "日本の半導体メーカーは新しい工場を建設している。",
    "央行宣布下调存款准备金率以支持经济增长。",
]
CJK_QUERIES = {"芯片": 0, "GPU出货量": 0, "天气": 1, "电池成本": 2, "半導体": 3, "准备金率": 4, "经济": 4}


def trigram_query(query: str) -> str | None:
    """Trigram tables match substrings: OR the raw query words (needs ≥3 characters each)."""
    parts = [w for w in query.replace('"', " ").split() if len(w) >= 3]
    return " OR ".join(f'"{w}"' for w in parts) or None


def build(conn, name: str, tokenize: str, rows: list[tuple[int, str, str]], cjk: bool) -> float:
    conn.execute(f"create virtual table {name} using fts5(title, body, content='', tokenize='{tokenize}')")
    started = time.perf_counter()
    conn.execute("begin")
    for rowid, title, body in rows:
        conn.execute(
            f"insert into {name} (rowid, title, body) values (?, ?, ?)",
            (rowid, fts_text(title) if cjk else title, fts_text(body) if cjk else body),
        )
    conn.execute("commit")
    return time.perf_counter() - started


def query(conn, name: str, tokenize: str, cjk: bool, text: str, depth: int) -> list[int]:
    expression = trigram_query(text) if tokenize == "trigram" else fts_query(text) if cjk else _plain_query(text)
    if expression is None:
        return []
    try:
        rows = conn.execute(
            f"select rowid from {name} where {name} match ? order by bm25({name}) limit ?",
            (expression, depth),
        ).fetchall()
    except Exception:  # e.g. trigram on a too-short token
        return []
    return [r[0] for r in rows]


def _plain_query(text: str) -> str | None:
    """The product's query words, without turning CJK runs into bigrams."""
    import re

    from deepresearch.text import STOPWORDS

    tokens = [t for t in re.findall(r"\w+", text.lower()) if t not in STOPWORDS]
    return " OR ".join(f'"{t}"' for t in dict.fromkeys(tokens)) or None


def main(argv: list[str] | None = None) -> int:
    """Compare tokenizers and print the table (or --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cfg = CorpusConfig()
    rows, doc_of = [], {}
    for line in (args.data_dir / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        for chunk in chunk_text(doc["text"], cfg.chunk_words, cfg.chunk_overlap):
            rows.append((len(rows) + 1, doc.get("title", ""), chunk))
            doc_of[len(rows)] = str(doc["_id"])
    queries = {}
    for line in (args.data_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        queries[str(q["_id"])] = q["text"]
    qrels = load_qrels(args.data_dir / "qrels" / f"{args.split}.tsv")

    out = {}
    for n, (label, (tokenize, cjk)) in enumerate(CANDIDATES.items()):
        conn = connect(":memory:", load_vec=False, migrate=False)
        name = f"t{n}"
        seconds = build(conn, name, tokenize, rows, cjk)
        pages = conn.execute("select sum(pgsize) from dbstat where name like ?", (f"{name}%",)).fetchone()[0]
        ndcg, recall, latency = [], [], []
        for qid, relevant in qrels.items():
            started = time.perf_counter()
            hits = query(conn, name, tokenize, cjk, queries[qid], 300)
            latency.append((time.perf_counter() - started) * 1000)
            ranked = list(dict.fromkeys(doc_of[h] for h in hits))
            ndcg.append(ndcg_at(ranked, relevant))
            recall.append(recall_at(ranked, relevant))
        cjk_conn = connect(":memory:", load_vec=False, migrate=False)
        build(cjk_conn, "c", tokenize, [(i + 1, "", t) for i, t in enumerate(CJK_DOCS)], cjk)
        probe = sum(query(cjk_conn, "c", tokenize, cjk, q, 1)[:1] == [target + 1] for q, target in CJK_QUERIES.items())
        out[label] = {
            "ndcg@10": round(statistics.fmean(ndcg), 4),
            "recall@100": round(statistics.fmean(recall), 4),
            "p50_ms": round(statistics.median(latency), 2),
            "index_mib": round((pages or 0) / 2**20, 1),
            "index_s": round(seconds, 2),
            "cjk_probe": f"{probe}/{len(CJK_QUERIES)}",
        }
        conn.close()
        cjk_conn.close()
    if args.json:
        print(json.dumps({"data_dir": str(args.data_dir), "chunks": len(rows), "tokenizers": out}, indent=2))
        return 0
    print(f"{args.data_dir.name}: {len(rows)} chunks, {len(qrels)} {args.split} queries (FTS5 BM25 only)")
    print(f"{'tokenizer':<42}{'nDCG@10':>9}{'R@100':>8}{'p50 ms':>8}{'MiB':>6}{'CJK':>6}")
    for label, row in out.items():
        print(
            f"{label:<42}{row['ndcg@10']:>9.4f}{row['recall@100']:>8.4f}{row['p50_ms']:>8.2f}"
            f"{row['index_mib']:>6.1f}{row['cjk_probe']:>6}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
