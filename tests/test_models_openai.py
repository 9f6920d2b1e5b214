"""The openai backend against a real HTTP server on 127.0.0.1 speaking chat-completions."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from deepresearch.config import LLMConfig, OpenAIConfig
from deepresearch.errors import ModelError
from deepresearch.models.llm import complete_json, get_chat_model
from deepresearch.models.openai_backend import OpenAIModel


def _chat_body(content: str, model: str = "served-model") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


class FakeOpenAIServer:
    """Replies to each request with the next scripted (status, body, headers); records requests."""

    def __init__(self) -> None:
        self.script: list[tuple[int, Any, dict[str, str]]] = []
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                server.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "auth": self.headers.get("Authorization"),
                        "body": json.loads(raw) if raw else None,
                    }
                )
                status, body, headers = server.script.pop(0) if server.script else (500, {"error": "no script"}, {})
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_POST = _reply
            do_GET = _reply

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    srv = FakeOpenAIServer()
    yield srv
    srv.close()


@pytest.fixture
def sleeps() -> list[float]:
    return []


def _model(server: FakeOpenAIServer, sleeps: list[float], **kw: Any) -> OpenAIModel:
    config = OpenAIConfig(base_url=server.base_url, model="local-model", api_key_env="DR_TEST_KEY", **kw)
    return OpenAIModel(config, sleep=sleeps.append)


def test_chat_completion_text_usage_and_key(server, sleeps, monkeypatch):
    monkeypatch.setenv("DR_TEST_KEY", "sk-test")
    server.script.append((200, _chat_body("Paris."), {}))
    out = _model(server, sleeps).complete([{"role": "user", "content": "Capital of France?"}], max_tokens=7)
    assert (out.text, out.prompt_tokens, out.completion_tokens, out.model) == (
        "Paris.",
        12,
        3,
        "served-model",
    )
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "local-model"
    assert request["body"]["max_tokens"] == 7
    assert "response_format" not in request["body"]
    assert sleeps == []


def test_schema_request_sends_json_schema_and_parses(server, sleeps):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    server.script.append((200, _chat_body('{"n": 4}'), {}))
    out = _model(server, sleeps).complete([{"role": "user", "content": "2+2"}], schema=schema)
    assert out.data == {"n": 4}
    sent = server.requests[0]["body"]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"] == schema
    assert server.requests[0]["auth"] is None  # key variable unset → no header


@pytest.mark.parametrize("mode, expected", [("json_object", "json_object"), ("none", None)])
def test_schema_mode_for_servers_without_json_schema(server, sleeps, mode, expected):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    server.script.append((200, _chat_body('Here: {"n": 4}'), {}))
    out = _model(server, sleeps, schema_mode=mode).complete([{"role": "user", "content": "2+2"}], schema=schema)
    assert out.data == {"n": 4}
    sent = server.requests[0]["body"].get("response_format")
    assert (sent or {}).get("type") == expected
    if expected:
        assert sent["schema"] == schema


def test_429_then_success_backs_off_and_honours_retry_after(server, sleeps):
    server.script += [
        (429, {"error": {"message": "slow down"}}, {"Retry-After": "2"}),
        (503, {"error": "busy"}, {}),
        (200, _chat_body("ok"), {}),
    ]
    out = _model(server, sleeps, max_retries=3, backoff_seconds=0.5).complete([{"role": "user", "content": "hi"}])
    assert out.text == "ok"
    assert len(server.requests) == 3
    assert sleeps == [2.0, 1.0]  # Retry-After wins, then 0.5 × 2^1


def test_500_exhaustion_raises_after_all_retries(server, sleeps):
    server.script += [(500, {"error": {"message": "boom"}}, {})] * 3
    with pytest.raises(ModelError, match=r"failed after 3 attempts \(HTTP 500: boom\)"):
        _model(server, sleeps, max_retries=2, backoff_seconds=0.25).complete([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 3
    assert sleeps == [0.25, 0.5]


@pytest.mark.parametrize("status", [400, 401, 403])
def test_client_errors_fail_fast_without_retry(server, sleeps, status):
    server.script += [(status, {"error": {"message": "nope"}}, {}), (200, _chat_body("never"), {})]
    with pytest.raises(ModelError, match=rf"HTTP {status}: nope\) — "):
        _model(server, sleeps).complete([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1 and sleeps == []


def test_401_message_names_the_key_variable(server, sleeps):
    server.script.append((401, {"error": {"message": "invalid api key"}}, {}))
    with pytest.raises(ModelError, match="llm.openai.api_key_env"):
        _model(server, sleeps).complete([{"role": "user", "content": "hi"}])


@pytest.mark.parametrize(
    "body, match",
    [
        ("<html>gateway</html>", "not JSON"),
        ('{"choices": [', "not JSON"),
        ({"object": "chat.completion"}, "without choices"),
        ({"choices": []}, "without choices"),
        ({"choices": [{"message": {"content": 42}}]}, "without choices"),
    ],
)
def test_malformed_bodies_raise_model_error(server, sleeps, body, match):
    server.script.append((200, body, {}))
    with pytest.raises(ModelError, match=match):
        _model(server, sleeps).complete([{"role": "user", "content": "hi"}])


def test_connection_refused_is_retried_then_model_error(sleeps):
    srv = FakeOpenAIServer()
    url = srv.base_url
    srv.close()  # nothing listens on that port any more
    model = OpenAIModel(OpenAIConfig(base_url=url, max_retries=1, backoff_seconds=0.01), sleep=sleeps.append)
    with pytest.raises(ModelError, match="cannot connect"):
        model.complete([{"role": "user", "content": "hi"}])
    assert sleeps == [0.01]


def test_complete_json_validates_and_retries_over_http(server, sleeps):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    server.script += [(200, _chat_body('{"n": "four"}'), {}), (200, _chat_body('{"n": 4}'), {})]
    assert complete_json(_model(server, sleeps), [{"role": "user", "content": "2+2"}], schema) == {"n": 4}
    retry_messages = server.requests[1]["body"]["messages"]
    assert retry_messages[-2] == {"role": "assistant", "content": '{"n": "four"}'}
    assert "invalid" in retry_messages[-1]["content"]


def test_registered_backend_and_info(server):
    config = LLMConfig(backend="openai", openai=OpenAIConfig(base_url=server.base_url, model="m1"))
    model = get_chat_model(config)
    assert isinstance(model, OpenAIModel) and model is get_chat_model(config)
    server.script.append((200, {"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]}, {}))
    info = model.info()
    assert info["name"] == "m1" and info["model_listed"] is True and info["path"] == server.base_url
    assert server.requests[0]["method"] == "GET" and server.requests[0]["path"] == "/v1/models"
