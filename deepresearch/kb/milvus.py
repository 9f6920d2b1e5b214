"""The Milvus side of `kb sync milvus`: collection names, the client with deadlines and retries, the schema.

pymilvus (the `milvus` extra) is imported lazily. A uri is a server URL
(http://host:19530) or a milvus-lite path ending in `.db` (a directory it creates).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from deepresearch.errors import DeepResearchError, DimensionMismatch, InputError, SearchError
from deepresearch.facts import Fact
from deepresearch.models.embed import Embedder
from deepresearch.retry import GaveUp, Retry, TryAgain

if TYPE_CHECKING:
    from deepresearch.config import MilvusConfig

log = logging.getLogger(__name__)

COLLECTION_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
NEVER = -1.0  # expires_at sentinel: Milvus scalars cannot be NULL in every version
MODEL_PROPERTY = "deepresearch.embedding_model"
INSTALL_FIX = "pip install 'deepresearch[milvus]'"
# Byte limits of the VARCHAR fields (Milvus counts UTF-8 bytes); a fact is ≤ 2000 chars.
LIMITS = {"fact": 8192, "source_url": 8192, "research_topic": 4096, "category": 64, "status": 16}
MAX_SOURCES_BYTES = 60_000
# Codes pymilvus uses for "could not connect" (2) and rate limiting (8); plus gRPC wording.
RETRIABLE_CODES = {2, 8}
# "auth check failure" (code 1800 on Milvus 2.3) and the gRPC status a token-checking proxy returns
AUTH_CODES = {1800, 1801, 1802, 1803, 1804}
AUTH_WORDS = ("auth check fail", "authenticat", "unauthenticated", "username and password", "permission denied")
RETRIABLE_WORDS = (
    "unavailable",
    "timed out",
    "timeout",
    "deadline exceeded",
    "connection refused",
    "not ready",
)

# --- validation and connection ----------------------------------------------------------


def validate_collection(name: str) -> str:
    """The collection name if it matches the allow-list pattern, else InputError."""
    if not isinstance(name, str) or not COLLECTION_PATTERN.match(name):
        raise InputError(
            f"invalid Milvus collection name {name!r} — use letters, digits and underscores,"
            " starting with a letter or underscore, at most 255 characters (e.g. deepresearch_facts)"
        )
    return name


def resolve_uri(uri: str) -> str:
    """A server URL as given, or a milvus-lite path made absolute (it must end in .db)."""
    uri = (uri or "").strip()
    if re.match(r"^(https?|tcp)://", uri) or uri.startswith("unix:"):
        return uri
    if not uri:
        raise InputError("no Milvus uri — pass --uri http://host:19530 or --uri ./milvus.db")
    path = Path(uri).expanduser()
    if path.suffix != ".db":
        raise InputError(
            f"{uri} is neither a server URL nor a milvus-lite path — use http://host:19530, or a"
            " local path ending in .db (e.g. ./milvus.db)"
        )
    if not path.parent.is_dir():
        raise InputError(f"the folder of the milvus-lite path {uri} does not exist — create {path.parent} first")
    return str(path.resolve())


def default_client(uri: str, timeout: float, token: str = "") -> Any:
    """A pymilvus client; `timeout` bounds the connect (each call gets its own, see `Remote.call`);
    `token` (user:password or an API key) for a server with authorization on."""
    try:
        from pymilvus import MilvusClient
    except ImportError as exc:
        raise DeepResearchError(f"Milvus sync needs pymilvus — {INSTALL_FIX}") from exc
    return MilvusClient(uri=uri, timeout=timeout, token=token)


def token_from_env(name: str) -> str:
    """The credentials in environment variable `name` (kb.milvus.token_env), "" when unset."""
    return os.environ.get(name, "").strip() if name else ""


def auth_refusal(exc: BaseException | None) -> BaseException | None:
    """The error saying the server refused the credentials (or needs some), None if none does:
    retrying cannot help then. pymilvus reports a refused connect as "Fail connecting … or server
    unavailable" (code 2); the gRPC error it wraps (`__cause__`) says UNAUTHENTICATED."""
    for _ in range(4):  # the error and the ones it wraps
        if exc is None:
            return None
        code = getattr(exc, "code", None)
        if callable(code):  # grpc.RpcError
            with contextlib.suppress(Exception):
                code = code().name
        message = _short(exc).lower()
        if code in AUTH_CODES or code == "UNAUTHENTICATED" or any(word in message for word in AUTH_WORDS):
            return exc
        exc = exc.__cause__
    return None


def is_retriable(exc: BaseException) -> bool:
    """True for errors worth retrying: connection refused/reset, timeouts, server unavailable, rate limits."""
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    name = type(exc).__name__
    if name == "MilvusUnavailableException":
        return True
    code = getattr(exc, "code", None)
    if callable(code):  # grpc.RpcError: code() is a StatusCode
        with contextlib.suppress(Exception):
            code = code().name
        return code in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED")
    if name.endswith("Exception") and code in RETRIABLE_CODES:
        return True
    message = str(exc).lower()
    return name.endswith("Exception") and any(word in message for word in RETRIABLE_WORDS)


class Remote:
    """A Milvus client whose every call has a deadline (pymilvus `timeout=`) and retries transient
    errors through `retry.Retry`: one call, retries and waits included, ends within
    kb.milvus.timeout × (kb.milvus.max_retries + 1)."""

    def __init__(self, uri: str, factory: Callable[[str, float], Any], policy: Retry, secret: str = ""):
        self.uri, self.policy, self.secret = uri, policy, secret
        self.client = self._retry("connect", lambda seconds: factory(uri, seconds))

    @classmethod
    def connect(
        cls,
        uri: str,
        settings: MilvusConfig,
        factory: Callable[[str, float], Any] = default_client,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Remote:
        """A client for `uri` with the deadline and retries of `settings` (kb.milvus); the default
        factory sends the credentials of `settings.token_env`, kept out of every message."""
        policy = Retry(settings.max_retries, settings.backoff_seconds, settings.timeout, sleep=sleep)
        token = token_from_env(settings.token_env)
        if factory is default_client:
            return cls(uri, lambda u, seconds: default_client(u, seconds, token), policy, token)
        return cls(uri, factory, policy, token)

    def call(self, op: str, *args: Any, **kwargs: Any) -> Any:
        """client.op(*args, **kwargs, timeout=…) with retries; failures become SearchError naming the uri."""
        return self._retry(op, lambda seconds: getattr(self.client, op)(*args, timeout=seconds, **kwargs))

    def next_batch(self, iterator: Any) -> Any:
        """The next batch of a query iterator (its RPCs carry the timeout it was made with), with retries."""
        return self._retry("query_iterator.next", lambda seconds: iterator.next())

    def _retry(self, op: str, fn: Callable[[float], Any]) -> Any:
        def attempt(seconds: float) -> Any:
            try:
                return fn(seconds)
            except DeepResearchError:
                raise
            except Exception as exc:
                refusal = auth_refusal(exc)
                if refusal is not None:
                    raise SearchError(
                        f"Milvus at {self.uri} refused the credentials ({op}): {self._short(refusal)} — put"
                        " user:password (or an API key) in the environment variable named by"
                        " kb.milvus.token_env (default MILVUS_TOKEN)"
                    ) from None
                if not is_retriable(exc):
                    raise SearchError(
                        f"Milvus at {self.uri} failed ({op}): {self._short(exc)} — check the uri, the"
                        " collection and the server log"
                    ) from exc
                raise TryAgain(self._short(exc)) from exc

        try:
            return self.policy.call(attempt, f"Milvus {op}")
        except GaveUp as exc:
            raise SearchError(
                f"Milvus at {self.uri} is unreachable ({op} failed after {exc.tries}: {exc.describe()}) — start"
                " the server or check --uri (and kb.milvus.timeout), then run the sync again"
            ) from exc.__cause__

    def close(self) -> None:
        """Close the client (errors on close are not worth a failed sync)."""
        with contextlib.suppress(Exception):
            self.client.close()

    def _short(self, exc: BaseException) -> str:
        """The error's message, one line, the credentials blanked (a server may echo them)."""
        text = _short(exc)
        for secret in {self.secret, *self.secret.split(":", 1)[1:]} - {""}:
            text = text.replace(secret, "***")
        return text


def _short(exc: BaseException) -> str:
    details = getattr(exc, "details", None)  # a gRPC error's own words (its str() is a long repr)
    with contextlib.suppress(Exception):
        details = details() if callable(details) else None
    message = details or getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(message).split())[:300]


@contextlib.contextmanager
def quiet_pymilvus() -> Iterator[None]:
    """pymilvus logs every failed RPC with a traceback; our error message replaces that.

    milvus-lite's in-process gRPC server also logs a traceback for an RPC it lacks
    (AllocTimestamp, which query_iterator tries before falling back to a client timestamp).
    """
    with contextlib.suppress(ImportError):
        import pymilvus  # noqa: F401  (its import configures its loggers: do that first)
    loggers = [logging.getLogger(name) for name in ("pymilvus", "grpc._server")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


# --- remote collection ------------------------------------------------------------------


def schema(dimension: int) -> Any:
    from pymilvus import DataType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=32)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
    for name in ("fact", "source_url"):
        schema.add_field(name, DataType.VARCHAR, max_length=LIMITS[name])
    schema.add_field("sources", DataType.JSON)  # {"urls": [...]}: Milvus 2.3 takes only objects here
    schema.add_field("category", DataType.VARCHAR, max_length=LIMITS["category"])
    schema.add_field("confidence", DataType.DOUBLE)
    schema.add_field("research_topic", DataType.VARCHAR, max_length=LIMITS["research_topic"])
    for name in ("created_at", "verified_at", "expires_at"):
        schema.add_field(name, DataType.DOUBLE)
    schema.add_field("status", DataType.VARCHAR, max_length=LIMITS["status"])
    schema.add_field("embedding_model", DataType.VARCHAR, max_length=256)
    return schema


REQUIRED_FIELDS = {
    "id", "vector", "fact", "source_url", "sources", "category", "confidence", "research_topic",
    "created_at", "verified_at", "expires_at", "status", "embedding_model",
}  # fmt: skip


def describe(remote: Remote, collection: str) -> tuple[int, str | None] | None:
    """(dimension, embedding model) of an existing collection, None if it does not exist."""
    if not remote.call("has_collection", collection):
        return None
    info = remote.call("describe_collection", collection)
    fields = {f["name"]: f for f in info.get("fields", [])}
    missing = sorted(REQUIRED_FIELDS - set(fields))
    if missing:
        raise InputError(
            f"collection {collection} at {remote.uri} was not created by deepresearch (missing fields"
            f" {', '.join(missing)}) — choose another --collection"
        )
    params = fields["vector"].get("params") or {}
    dimension = int(params.get("dim") or fields["vector"].get("dim") or 0)
    model = (info.get("properties") or {}).get(MODEL_PROPERTY)
    return dimension, model


def check_compatible(collection: str, uri: str, remote: tuple[int, str | None], model: str, dim: int) -> None:
    """Fail closed before writing vectors of another dimension or model into a collection."""
    remote_dim, remote_model = remote
    if remote_dim != dim or (remote_model and remote_model != model):
        raise DimensionMismatch(
            f"Milvus collection {collection} at {uri} holds {remote_dim}-d vectors of"
            f" {remote_model or 'an unknown model'}, but this knowledge base has {dim}-d vectors of"
            f" {model} — push to another --collection, or rebuild the local vectors with"
            f" embedding.model={remote_model} and `deepresearch kb reembed`"
        )


def create(remote: Remote, collection: str, dimension: int, model: str) -> None:
    from pymilvus import MilvusClient

    index = MilvusClient.prepare_index_params()
    index.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
    remote.call(
        "create_collection",
        collection,
        schema=schema(dimension),
        index_params=index,
        properties={MODEL_PROPERTY: model},
        consistency_level="Strong",  # a pull right after another workspace's push sees all of it
    )


def fact_row(fact: Fact, vector: Any, model: str) -> tuple[dict[str, Any] | None, str | None]:
    """The Milvus row of a fact, or a reason it cannot be stored there."""
    sources = list(fact.sources or [fact.source_url])
    for name in ("fact", "source_url", "research_topic"):
        if len(getattr(fact, name).encode("utf-8")) > LIMITS[name]:
            return None, f"{name} longer than {LIMITS[name]} bytes"
    if len(json.dumps(sources).encode("utf-8")) > MAX_SOURCES_BYTES:
        return None, f"sources list larger than {MAX_SOURCES_BYTES} bytes"
    return {
        "id": fact.id,
        "vector": [float(x) for x in vector],
        "fact": fact.fact,
        "source_url": fact.source_url,
        "sources": {"urls": sources},
        "category": fact.category,
        "confidence": float(fact.confidence),
        "research_topic": fact.research_topic,
        "created_at": float(fact.created_at),
        "verified_at": float(fact.verified_at),
        "expires_at": NEVER if fact.expires_at is None else float(fact.expires_at),
        "status": fact.status,
        "embedding_model": model,
    }, None


def source_urls(row: dict[str, Any]) -> list[str]:
    """The source URLs of a remote row: `sources` is {"urls": [...]}, or a bare list in rows that
    milvus-lite collections got before that shape (read as they are: no migration needed)."""
    value = row.get("sources")
    if isinstance(value, dict):
        value = value.get("urls")
    urls = [s for s in value if isinstance(s, str) and s] if isinstance(value, list) else []
    return urls or [row["source_url"]]


class RemoteVectors(Embedder):
    """An embedder serving the pulled rows' own vectors when the remote was built with the local
    model, so a pull does not re-embed (the model stays unloaded); other texts go to the model."""

    def __init__(self, local: Any, reuse: bool):
        self.local, self.reuse = local, reuse
        self.table: dict[str, Any] = {}
        self.model_id = local.model_id
        self.served = self.embedded = 0

    @property
    def dimension(self) -> int:  # type: ignore[override]
        """The local model's dimension (read from the remote rows when reusing, without a load)."""
        if self.reuse and self.table:
            return len(next(iter(self.table.values())))
        return self.local.dimension

    def add(self, rows: list[dict]) -> None:
        """Remember the vectors of rows about to be stored (keys as the KB stores the text)."""
        import numpy as np

        if self.reuse:
            for row in (r for r in rows if r.get("embedding_model") == self.model_id):
                vector = np.asarray(row["vector"], dtype=np.float32)
                norm = float(np.linalg.norm(vector))
                self.table[" ".join(row["fact"].split())] = vector / norm if norm else vector

    def embed_batch(self, texts: list[str]) -> Any:
        """Vectors for texts: remote ones where known, the local model for the rest."""
        import numpy as np

        missing = [t for t in texts if t not in self.table]
        if missing:
            self.embedded += len(missing)
            self.table.update(zip(missing, self.local.embed_batch(missing), strict=True))
        self.served += len(texts) - len(missing)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self.table[t] for t in texts]).astype(np.float32)
