"""The `openai` chat backend: any server speaking the OpenAI chat-completions format.

llama-server, Ollama (`/v1`), LM Studio and vLLM all do. Transient failures (429, 5xx,
connection errors, timeouts) are retried by `retry.Retry` (exponential backoff, a `Retry-After`
header wins, one deadline for the whole call); a request the server refuses
(400/401/403/404/422) fails at once with a message that names the fix, because sending it
again cannot succeed. Bodies that are not the expected JSON raise `ModelError` instead of
leaking a KeyError.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from deepresearch.errors import ModelError
from deepresearch.models.base import ChatModel, Completion, Message, parse_json
from deepresearch.retry import GaveUp, Retry, TryAgain, retry_after
from deepresearch.text import join_url, redact_secrets

if TYPE_CHECKING:
    import httpx

    from deepresearch.config import OpenAIConfig

_HINTS = {
    400: "the server rejected the request — check llm.openai.model; if it does not support"
    " response_format json_schema, set llm.openai.schema_mode to json_object or none",
    401: "check the API key in the environment variable named by llm.openai.api_key_env",
    403: "the API key is not allowed to use this model — check llm.openai.api_key_env and llm.openai.model",
    404: "check llm.openai.base_url (it usually ends in /v1) and llm.openai.model",
    422: "the server could not process the request — check llm.openai.model",
}


def _is_retryable(status: int) -> bool:
    return status == 429 or status >= 500


class OpenAIModel(ChatModel):
    """A chat model behind an OpenAI-compatible HTTP API."""

    def __init__(
        self,
        config: OpenAIConfig,
        *,
        max_tokens: int = 512,
        temperature: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.config = config
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.name = config.model
        self._sleep = sleep
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> httpx.Client:
        """One HTTP client per model (thread-safe), for requests with a whole-request deadline."""
        with self._lock:
            if self._client is None:
                from deepresearch import deadline

                self._client = deadline.client(self.config.timeout)
            return self._client

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.config.api_key_env, "")
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _url(self, path: str) -> str:
        return join_url(self.config.base_url, path)

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None, retries: int | None = None) -> Any:
        """Send one request with retries (`retry.Retry`); the decoded JSON body or ModelError."""
        import httpx

        from deepresearch import deadline

        url = self._url(path)
        shown = redact_secrets(url)  # what messages (and so doctor, runs, logs) may print
        policy = Retry(
            self.config.max_retries if retries is None else retries,
            self.config.backoff_seconds,
            self.config.timeout,
            sleep=self._sleep,
        )

        def attempt(seconds: float) -> Any:
            try:
                # A whole-request deadline, not one per read: a dripping server cannot stall it.
                response = deadline.send(self.client, method, url, seconds, json=body, headers=self._headers())
            except httpx.TimeoutException:
                raise TryAgain(f"no answer within {self.config.timeout:g} s (llm.openai.timeout)") from None
            except httpx.TransportError as exc:
                raise TryAgain(f"cannot connect: {exc} — is the server running at llm.openai.base_url?") from None
            except (httpx.HTTPError, httpx.InvalidURL) as exc:  # bad encoding, bad URL: sending again cannot help
                raise ModelError(
                    f"{shown} cannot be used ({type(exc).__name__}: {exc}) — check llm.openai.base_url"
                ) from None
            if response.status_code < 300:
                try:
                    return response.json()
                except (ValueError, RecursionError):
                    raise ModelError(
                        f"{shown} returned a body that is not JSON ({response.text[:120]!r}) — "
                        "is llm.openai.base_url an OpenAI-compatible API?"
                    ) from None
            detail = _error_detail(response)
            if not _is_retryable(response.status_code):
                hint = _HINTS.get(response.status_code, "check llm.openai settings")
                raise ModelError(f"{shown} refused the request (HTTP {response.status_code}: {detail}) — {hint}")
            raise TryAgain(f"HTTP {response.status_code}: {detail}", retry_after(response.headers.get("retry-after")))

        try:
            return policy.call(attempt, shown)
        except GaveUp as exc:
            raise ModelError(
                f"{shown} failed after {exc.tries} ({exc.describe()}) — check the server, or raise"
                " llm.openai.max_retries / llm.openai.timeout"
            ) from None

    def complete(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """One chat completion over HTTP; with `schema`, asks for json_schema output."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "max_tokens": max_tokens or self.max_tokens,
            "temperature": self.temperature if temperature is None else temperature,
        }
        if schema is not None and self.config.schema_mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": True},
            }
        elif schema is not None and self.config.schema_mode == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        start = time.perf_counter()
        payload = self._request("POST", "/chat/completions", body)
        seconds = time.perf_counter() - start
        try:
            message = payload["choices"][0]["message"]
            text = message.get("content") or ""
            if not isinstance(text, str):
                raise TypeError("content is not a string")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ModelError(
                f"{redact_secrets(self._url('/chat/completions'))} answered without choices[0].message.content"
                f" ({exc}) — is llm.openai.base_url an OpenAI-compatible chat API?"
            ) from None
        usage = payload.get("usage")
        usage = usage if isinstance(usage, dict) else {}  # token counts are informative: a bad shape counts 0
        return Completion(
            text=text,
            data=parse_json(text) if schema is not None else None,
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            seconds=seconds,
            model=str(payload.get("model") or self.config.model),
        )

    def info(self) -> dict[str, Any]:
        """Server URL and whether it lists the configured model (one quick request)."""
        payload = self._request("GET", "/models", retries=0)
        served = (
            [m.get("id") for m in (payload.get("data") or []) if isinstance(m, dict)]
            if isinstance(payload, dict)
            else []
        )
        return {
            "name": self.config.model,
            "backend": "openai",
            "path": redact_secrets(self.config.base_url),
            "served_models": served,
            "model_listed": self.config.model in served,
        }


def _count(value: Any) -> int:
    """A token count from a usage field: a non-negative whole number, else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0
    return max(0, int(value))


def _error_detail(response: httpx.Response) -> str:
    """The server's error message if the body has one, else the start of the body."""
    try:
        body = response.json()
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:200]
        if isinstance(error, str):
            return error[:200]
    except (ValueError, RecursionError):
        pass
    return response.text[:200] or response.reason_phrase
