"""HTTP requests with a whole-request deadline, for every backend that talks to a server.

httpx's timeouts bound each connect, write and read, not the request: a server that drips
one byte every two seconds never trips a three-second read timeout and keeps a search or a
chat call hanging for minutes. `send` bounds the whole exchange (connect, headers, body): a
watchdog timer shuts the request's socket down when the deadline passes, which makes the
blocked read return at once; the body is also checked against the deadline chunk by chunk.
Either way the caller sees `DeadlineExceeded`, an `httpx.TimeoutException`, so the code that
already handles timeouts (retries, messages) handles it too.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

import httpx

_ENCODING_HEADERS = ("content-encoding", "content-length", "transfer-encoding")


class DeadlineExceeded(httpx.TimeoutException):
    """The whole request (connect, headers and body) took longer than its deadline."""


def client(timeout: float, **kwargs: Any) -> httpx.Client:
    """An httpx client for `send`: no idle keep-alive connections, so each request opens (and the
    watchdog sees) its own socket."""
    return httpx.Client(timeout=timeout, limits=httpx.Limits(max_keepalive_connections=0), **kwargs)


def send(http: httpx.Client, method: str, url: str, seconds: float, **kwargs: Any) -> httpx.Response:
    """`http.request(method, url, **kwargs)` with the body read, all within `seconds`."""
    sockets: list[socket.socket] = []
    expired = threading.Event()
    lock = threading.Lock()

    def trace(event: str, info: dict[str, Any]) -> None:
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                with lock:
                    sockets.append(sock)
                    if expired.is_set():  # connected just as the deadline passed
                        _shutdown(sock)

    def expire() -> None:
        with lock:
            expired.set()
            for sock in sockets:
                _shutdown(sock)

    extensions = {**kwargs.pop("extensions", {}), "trace": trace}
    watchdog = threading.Timer(seconds, expire)
    watchdog.daemon = True
    ends = time.monotonic() + seconds
    watchdog.start()
    try:
        with http.stream(method, url, extensions=extensions, **kwargs) as streamed:
            body = bytearray()
            for chunk in streamed.iter_bytes():  # decoded (gzip, …) as they arrive
                body += chunk
                if time.monotonic() > ends:
                    raise DeadlineExceeded(f"no complete answer within {seconds:g}s", request=streamed.request)
        # The body is decoded already: the new response must not decode (or length-check) it again.
        headers = [(k, v) for k, v in streamed.headers.multi_items() if k.lower() not in _ENCODING_HEADERS]
        kept = {k: v for k, v in streamed.extensions.items() if k in ("http_version", "reason_phrase")}
        return httpx.Response(
            streamed.status_code, headers=headers, content=bytes(body), request=streamed.request, extensions=kept
        )
    except DeadlineExceeded:
        raise
    except httpx.HTTPError as exc:
        if expired.is_set() or time.monotonic() > ends:
            raise DeadlineExceeded(f"no complete answer within {seconds:g}s", request=exc.request) from exc
        raise
    finally:
        watchdog.cancel()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
