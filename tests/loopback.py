"""A real HTTP server on loopback that answers JSON: scripted replies first, then a standing one."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _encode(body: Any) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


class JsonServer:
    """Answers each request with the next `script` entry (status, body, headers), or else with what
        `serve` set (200 `{}` to start); records when each request arrived in `times`, and its path
    and query in `paths`."""

    def __init__(self) -> None:
        self.script: list[tuple[int, Any, dict[str, str]]] = []
        self.times: list[float] = []
        self.paths: list[str] = []
        self.serve({})
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                server.times.append(time.monotonic())
                server.paths.append(self.path)
                status, body, headers = server.script.pop(0) if server.script else server.standing
                data = _encode(body)
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _reply

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def serve(self, body: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        """The standing reply, once the script is used up."""
        self.standing: tuple[int, Any, dict[str, str]] = (status, body, headers or {})

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
