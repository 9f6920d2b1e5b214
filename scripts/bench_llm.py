"""Benchmark the llama-cpp backend: prompt and generation speed, free vs JSON-schema constrained.

    python3 scripts/bench_llm.py --hotpotqa ../shared/eval/multihop/hotpotqa_train.json \
        --models smollm2-135m-instruct gemma3-270m --tokens 96 --repeats 3

One run, same extraction prompt for every mode (the real EXTRACT_FACTS prompt over a
HotpotQA paragraph, topic = its question). Modes, interleaved per repeat, medians reported:
- prompt: prompt tokens/s (KV cache reset before each timing);
- free: generation without a schema;
- stock grammar: llama-cpp-python's own path (grammar checked over the whole vocabulary
  for every token) — the baseline;
- lazy grammar: this project's sampler (sample, check only the chosen token, resample
  among the top tokens only when the grammar rejects it).
Generation cost is per generated token with the prompt already in the KV cache, so the
ratio to free generation is the price of the constraint. Target: lazy ≤ 1.5× free.

Threads, reused prompt prefix, grammar with a tiny schema (issue 27): `--study` runs a reader-like
prompt (≈400 tokens of HotpotQA evidence, the question last) per thread setting
(`--thread-settings 1/1 2/2 1/2` = n_threads/n_threads_batch, switched in place, no reload), rounds
interleaved, medians: cold prompt eval (KV cache reset), the same prompt with a different question
right after another one (llama-cpp-python keeps the previous call's KV cache and evaluates only the
tokens after the longest common prefix), free generation, and generation constrained by a tiny
answer schema with the lazy and the stock grammar sampler.

    nice -n 10 python3 scripts/bench_llm.py --study --models qwen2.5-coder-1.5b-instruct \
        --hotpotqa ../shared/eval/multihop/hotpotqa_train.json --repeats 3

Portable vs native llama.cpp (issue 15): `--builds native=python3 portable=/tmp/venv/bin/python`
runs the prompt and free-generation timings once per round in each interpreter (each with its own
llama-cpp-python build), rounds interleaved, and prints medians and each build's ratio to the first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deepresearch.config import LLMConfig  # noqa: E402
from deepresearch.prompts import EXTRACT_FACTS, extract_schema  # noqa: E402

FALLBACK_TEXT = (
    "Marie Curie was a Polish and naturalised-French physicist and chemist who conducted pioneering research "
    "on radioactivity. She was the first woman to win a Nobel Prize, the first person to win a Nobel Prize "
    "twice, and the only person to win a Nobel Prize in two scientific fields. In 1903 she shared the Nobel "
    "Prize in Physics with Pierre Curie and Henri Becquerel. In 1911 she won the Nobel Prize in Chemistry."
)


def _messages(hotpotqa: Path | None) -> list[dict[str, str]]:
    topic, text = "Marie Curie's Nobel Prizes", FALLBACK_TEXT
    if hotpotqa is not None:
        item = json.loads(hotpotqa.read_text(encoding="utf-8"))[0]
        title = item["supporting_facts"][0][0]
        text = "".join(next(s for t, s in item["context"] if t == title))
        topic = item["question"]
    return EXTRACT_FACTS.messages(topic=topic, text=text, max_facts=5)


def bench_model(
    name: str, messages: list[dict[str, str]], tokens: int, repeats: int, threads: int | None, grammar: bool = True
) -> dict:
    """Median figures for one model."""
    from deepresearch.models.llama_backend import LlamaCppModel

    model = LlamaCppModel(LLMConfig(model_path=name, n_threads=threads))
    llama = model._load()
    schema = extract_schema(5)
    samples: dict[str, list[float]] = {"prompt": [], "free": [], "stock": [], "lazy": []}
    grammar_counts: dict[str, Any] = {}
    prompt_tokens = 0
    model.complete(messages, max_tokens=4, temperature=0.0)  # warm-up: load, caches
    for _ in range(repeats):
        llama.reset()  # cold KV cache: the next call evaluates the whole prompt
        out = model.complete(messages, max_tokens=1, temperature=0.0)
        prompt_tokens = out.prompt_tokens
        samples["prompt"].append(out.prompt_tokens / out.seconds)
        # Prompt now cached: the calls below time generation (plus one prompt token).
        for mode in ("free", "stock", "lazy") if grammar else ("free",):
            llama.lazy_grammar = mode != "stock"
            out = model.complete(
                messages, schema=None if mode == "free" else schema, max_tokens=tokens, temperature=0.0
            )
            samples[mode].append(out.seconds / max(out.completion_tokens, 1))
            if mode == "lazy":
                grammar_counts = out.extra.get("grammar_tokens", {})
    llama.lazy_grammar = True
    med = {k: statistics.median(v) if v else float("nan") for k, v in samples.items()}
    return {
        "model": name,
        "n_vocab": llama.n_vocab(),
        "threads": llama.n_threads,
        "prompt_tokens": prompt_tokens,
        "prompt_tok_s": med["prompt"],
        "free_ms_per_tok": med["free"] * 1000,
        "free_tok_s": 1 / med["free"],
        "stock_ms_per_tok": med["stock"] * 1000,
        "lazy_ms_per_tok": med["lazy"] * 1000,
        "stock_vs_free": med["stock"] / med["free"],
        "lazy_vs_free": med["lazy"] / med["free"],
        "lazy_grammar_tokens": grammar_counts,
        "llama_build": llama_build(),
    }


READER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "sources": {"type": "array", "items": {"type": "integer"}}},
    "required": ["answer", "sources"],
}


def _reader_messages(hotpotqa: Path | None, question_index: int) -> list[dict[str, str]]:
    """≈400 tokens of evidence (the same for every question index), then one of two questions."""
    paragraphs, questions = [FALLBACK_TEXT] * 3, ["Who shared the 1903 prize?", "When did she win chemistry?"]
    if hotpotqa is not None:
        items = json.loads(hotpotqa.read_text(encoding="utf-8"))[:2]
        paragraphs = ["".join(sentences) for _, sentences in items[0]["context"][:2]]
        questions = [item["question"] for item in items]
    evidence = "\n".join(f"[{i}] {text}" for i, text in enumerate(paragraphs, 1))
    return [
        {"role": "system", "content": "Answer the question from the evidence only, as a short span."},
        {"role": "user", "content": f"Evidence:\n{evidence}\n\nQuestion: {questions[question_index]}"},
    ]


def _timed(model: Any, messages: list[dict[str, str]], **kwargs: Any) -> Any:
    return model.complete(messages, temperature=0.0, **kwargs)


def study_round(model: Any, llama: Any, hotpotqa: Path | None, tokens: int) -> dict[str, float]:
    """One round of the --study timings on the loaded model (threads already set)."""
    first, second = _reader_messages(hotpotqa, 0), _reader_messages(hotpotqa, 1)
    llama.reset()
    cold = _timed(model, second, max_tokens=1)
    _timed(model, first, max_tokens=1)  # the previous call: same evidence, another question
    warm = _timed(model, second, max_tokens=1)
    free = _timed(model, second, max_tokens=tokens)  # prompt cached: times generation
    out = {
        "prompt_tokens": cold.prompt_tokens,
        "cold_prompt_s": cold.seconds,
        "cold_prompt_tok_s": cold.prompt_tokens / cold.seconds,
        "reused_prefix_s": warm.seconds,
        "free_ms_per_tok": 1000 * free.seconds / max(free.completion_tokens, 1),
    }
    for mode in ("lazy", "stock"):
        llama.lazy_grammar = mode == "lazy"
        try:
            constrained = _timed(model, second, schema=READER_SCHEMA, max_tokens=tokens)
        finally:
            llama.lazy_grammar = True
        out[f"{mode}_ms_per_tok"] = 1000 * constrained.seconds / max(constrained.completion_tokens, 1)
    return out


def study(name: str, hotpotqa: Path | None, settings: list[str], tokens: int, repeats: int) -> None:
    """Threads × (cold prompt, reused prefix, free, lazy and stock grammar); prints a Markdown table."""
    import llama_cpp

    from deepresearch.models.llama_backend import LlamaCppModel

    model = LlamaCppModel(LLMConfig(model_path=name))
    llama = model._load()
    _timed(model, _reader_messages(hotpotqa, 0), max_tokens=2)  # warm-up
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in settings}
    for _ in range(repeats):
        for setting in settings:
            threads, batch = (int(x) for x in setting.split("/"))
            llama_cpp.llama_set_n_threads(llama._ctx.ctx, threads, batch)
            runs[setting].append(study_round(model, llama, hotpotqa, tokens))
            print(f"{setting}: {json.dumps({k: round(v, 3) for k, v in runs[setting][-1].items()})}", file=sys.stderr)
    keys = list(runs[settings[0]][0])
    print(f"model {name} (vocab {llama.n_vocab()}), {repeats} interleaved rounds, medians; {llama_build()}")
    print("| n_threads/n_threads_batch | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for setting, rows in runs.items():
        cells = [statistics.median(r[k] for r in rows) for k in keys]
        print(f"| {setting} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")


def llama_build() -> str:
    """How the imported llama-cpp-python was built (the doctor's llama-build line)."""
    from deepresearch.doctor import describe_llama_build

    detail, warning = describe_llama_build()
    return detail + (f" (warning: {warning})" if warning else "")


def compare_builds(builds: list[str], args: argparse.Namespace) -> None:
    """Run the benchmark in each LABEL=PYTHON interpreter, rounds interleaved; print medians and ratios."""
    pairs = [b.split("=", 1) for b in builds]
    runs: dict[str, list[dict]] = {label: [] for label, _ in pairs}
    described: dict[str, str] = {}
    for _ in range(args.repeats):
        for label, python in pairs:
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                cmd = [python, __file__, "--models", args.models[0], "--tokens", str(args.tokens), "--repeats", "1"]
                cmd += ["--json", out.name, "--no-grammar"] + (["--threads", str(args.threads)] if args.threads else [])
                cmd += ["--hotpotqa", str(args.hotpotqa)] if args.hotpotqa else []
                subprocess.run(cmd, check=True, capture_output=True)
                row = json.loads(Path(out.name).read_text())[0]
            runs[label].append(row)
            described[label] = row["llama_build"]
    keys = ("prompt_tok_s", "free_tok_s")
    med = {label: {k: statistics.median(r[k] for r in rows) for k in keys} for label, rows in runs.items()}
    base = pairs[0][0]
    print(f"model {args.models[0]}, {args.repeats} interleaved rounds, medians; ratio = build ÷ {base}")
    print("| build | prompt tok/s | generation tok/s | prompt ratio | generation ratio |")
    print("|---|---|---|---|---|")
    for label, m in med.items():
        print(
            f"| {label} | {m['prompt_tok_s']:.1f} | {m['free_tok_s']:.1f} | "
            f"{m['prompt_tok_s'] / med[base]['prompt_tok_s']:.3f} | {m['free_tok_s'] / med[base]['free_tok_s']:.3f} |"
        )
    for label, text in described.items():
        print(f"{label}: {text}")


def main() -> None:
    """Parse arguments, benchmark each model, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hotpotqa", type=Path, help="hotpotqa_train.json for a real paragraph as the prompt")
    parser.add_argument("--models", nargs="+", default=["smollm2-135m-instruct"], help="shipped names or GGUF paths")
    parser.add_argument("--tokens", type=int, default=96, help="max generated tokens per call")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: llm.n_threads rule)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--no-grammar", action="store_true", help="time prompt and free generation only")
    parser.add_argument("--builds", nargs="+", metavar="LABEL=PYTHON", help="compare llama.cpp builds (see above)")
    parser.add_argument("--study", action="store_true", help="threads, reused prefix, tiny-schema grammar (above)")
    parser.add_argument("--thread-settings", nargs="+", default=["1/1", "2/2", "1/2"], help="for --study")
    args = parser.parse_args()
    if args.study:
        study(args.models[0], args.hotpotqa, args.thread_settings, args.tokens, args.repeats)
        return
    if args.builds:
        compare_builds(args.builds, args)
        return
    messages = _messages(args.hotpotqa)
    rows = [
        bench_model(name, messages, args.tokens, args.repeats, args.threads, not args.no_grammar)
        for name in args.models
    ]
    cols = [
        ("model", "model"),
        ("vocab", "n_vocab"),
        ("threads", "threads"),
        ("prompt tok", "prompt_tokens"),
        ("prompt tok/s", "prompt_tok_s"),
        ("free tok/s", "free_tok_s"),
        ("free ms/tok", "free_ms_per_tok"),
        ("stock grammar ms/tok", "stock_ms_per_tok"),
        ("lazy grammar ms/tok", "lazy_ms_per_tok"),
        ("stock ÷ free", "stock_vs_free"),
        ("lazy ÷ free", "lazy_vs_free"),
    ]
    print("| " + " | ".join(c for c, _ in cols) + " |")
    print("|" + "---|" * len(cols))
    for row in rows:
        print("| " + " | ".join(f"{row[k]:.2f}" if isinstance(row[k], float) else str(row[k]) for _, k in cols) + " |")
    for row in rows:
        print(f"{row['model']}: lazy-grammar tokens {row['lazy_grammar_tokens']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
